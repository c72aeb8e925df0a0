package quorum

import (
	"fmt"
	"sort"
	"strings"

	"github.com/storectl/storectl/pkg/scan"
)

// NodeScan is one node's quorum scan (with Replay) in a comparison of a
// cluster's replicas: the data dir it was read from and its result.
type NodeScan struct {
	DataDir string
	Result  *Result
}

// ReplicaView is what one node's files say about its replica of a queue.
type ReplicaView struct {
	Node          string `json:"node"`
	DataDir       string `json:"data_dir"`
	Dir           string `json:"dir"` // the replica dir, relative to DataDir
	UID           string `json:"uid"`
	FirstIndex    uint64 `json:"first_index"`
	LastIndex     uint64 `json:"last_index"`
	LastTerm      uint64 `json:"last_term"`
	SnapshotIndex int64  `json:"snapshot_index"` // -1: none
	// CommittedAtLeast: what this node's files prove committed (its
	// snapshot, or meta.dets' last applied index).
	CommittedAtLeast int64 `json:"committed_at_least"`
	CurrentTerm      int64 `json:"current_term"` // meta.dets; -1 unknown
	// NextStart and Messages: this replica's own prediction (what the
	// queue would hold if it were started from this replica alone).
	NextStart string `json:"next_start"`
	Messages  int    `json:"messages"`
	Damaged   int    `json:"damaged"` // entries it cannot read
	// Behind is how many log entries this replica lacks against the most
	// complete one (0 for that one, and for one whose WaitsOn is set).
	Behind uint64 `json:"behind"`
	// WaitsOn are this node's files of the replica (WAL, segment, replica
	// dir, snapshot) that could not be read: its last index and term are
	// then only what the files read hold, so it is neither chosen as the
	// most complete nor called behind.
	WaitsOn []string `json:"waits_on,omitempty"`
}

// ClusterQueue compares the replicas of one quorum queue across the
// nodes given.
type ClusterQueue struct {
	VHost   string   `json:"vhost"`
	Queue   string   `json:"queue"`
	Members []string `json:"members"` // from the configs and snapshots
	// Replicas: one per node given that has a replica, most complete first.
	Replicas []ReplicaView `json:"replicas"`
	// MostComplete is the node whose replica the others' logs are a prefix
	// of (by Raft's rule: the higher last term, then the higher last
	// index), among those that can start; Why says how it was chosen.
	MostComplete string `json:"most_complete"`
	Why          string `json:"why"`
	// NotGiven: members whose data dir was not among those given.
	NotGiven []string `json:"not_given"`
	// Agree: every replica given has the same last index and term.
	Agree bool `json:"agree"`
	// Majority: the members holding the most complete replica's last
	// index reach a majority of the members (entries above what a
	// majority holds may not be committed: only the most complete copy
	// has them).
	Majority bool `json:"majority"`
}

// CompareReplicas compares, per quorum queue (vhost and name), the
// replicas that the nodes' scans found: last index and term, snapshot,
// what each would start with; and says which replica is the most
// complete, the evidence for choosing the member to keep before a
// force_shrink_member_to_current_member or a grow. Only the quorum system
// is compared (coordination members are not queues).
func CompareReplicas(nodes []NodeScan) []ClusterQueue {
	type key struct{ vhost, queue string }
	byQueue := map[key]*ClusterQueue{}
	members := map[key]map[string]bool{}
	for _, n := range nodes {
		if n.Result == nil {
			continue
		}
		for _, s := range n.Result.Systems {
			if s.System != SystemQuorum {
				continue
			}
			for _, r := range s.sortedReplicas() {
				p := r.Prediction()
				if p == nil {
					p = r.Predict()
				}
				q := p.Queue
				k := key{q.VHost, q.Queue}
				cq := byQueue[k]
				if cq == nil {
					cq = &ClusterQueue{VHost: q.VHost, Queue: q.Queue, Members: []string{}, NotGiven: []string{}}
					byQueue[k] = cq
					members[k] = map[string]bool{}
				}
				for _, n := range r.memberNodes() {
					members[k][n] = true
				}
				cq.Replicas = append(cq.Replicas, ReplicaView{Node: s.Node, DataDir: n.DataDir, Dir: r.Rel, UID: r.UID,
					FirstIndex: q.FirstIndex, LastIndex: q.LastIndex, LastTerm: q.LastTerm, SnapshotIndex: q.SnapshotIndex,
					CommittedAtLeast: q.Commit.AtLeast, CurrentTerm: q.Commit.CurrentTerm, NextStart: q.NextStart.State,
					Messages: q.Keep, Damaged: len(q.Damaged), WaitsOn: r.waitsOn()})
			}
		}
	}
	out := make([]ClusterQueue, 0, len(byQueue))
	for k, cq := range byQueue {
		given := map[string]bool{}
		for _, r := range cq.Replicas {
			given[r.Node] = true
		}
		for m := range members[k] {
			cq.Members = append(cq.Members, m)
			if !given[m] {
				cq.NotGiven = append(cq.NotGiven, m)
			}
		}
		sort.Strings(cq.Members)
		sort.Strings(cq.NotGiven)
		rank(cq)
		out = append(out, *cq)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].VHost != out[j].VHost {
			return out[i].VHost < out[j].VHost
		}
		return out[i].Queue < out[j].Queue
	})
	return out
}

// waitsOn are the files of r that could not be read (its log's and the
// snapshots' ra may recover from), nil for none.
func (r *Replica) waitsOn() []string {
	w := append(r.LogWaitsOn(), r.baseWaitsOn(r.base())...)
	if len(w) == 0 {
		return nil
	}
	return w
}

// memberNodes are the nodes of the replica's members: the cluster of
// its snapshot (the membership as of then), else its config's initial
// members.
func (r *Replica) memberNodes() []string {
	var out []string
	if b := r.base(); b != nil && len(b.Meta.Cluster) > 0 {
		for _, m := range b.Meta.Cluster {
			out = append(out, m.Node)
		}
		return out
	}
	if r.Config != nil {
		for _, m := range r.Config.InitialMembers {
			out = append(out, m.Node)
		}
	}
	return out
}

// upToDate orders replicas by Raft's election rule (RequestVote: the
// log with the later last term is more up to date; with equal terms, the
// longer one); the snapshot index breaks ties of empty logs.
func upToDate(a, b ReplicaView) bool {
	if a.LastTerm != b.LastTerm {
		return a.LastTerm > b.LastTerm
	}
	if a.LastIndex != b.LastIndex {
		return a.LastIndex > b.LastIndex
	}
	return a.SnapshotIndex > b.SnapshotIndex
}

// rank sorts cq's replicas most complete first and fills the verdict.
func rank(cq *ClusterQueue) {
	rs := cq.Replicas
	usable := func(r ReplicaView) bool { return r.NextStart == StartOK && len(r.WaitsOn) == 0 }
	sort.SliceStable(rs, func(i, j int) bool {
		if usable(rs[i]) != usable(rs[j]) {
			return usable(rs[i])
		}
		if upToDate(rs[i], rs[j]) != upToDate(rs[j], rs[i]) {
			return upToDate(rs[i], rs[j])
		}
		return rs[i].Node < rs[j].Node
	})
	best := rs[0]
	cq.MostComplete = best.Node
	cq.Agree = true
	holding := 0
	var unread []string
	for i := range rs {
		r := &rs[i]
		if r.LastIndex != best.LastIndex || r.LastTerm != best.LastTerm || len(r.WaitsOn) > 0 {
			cq.Agree = false
		}
		if len(r.WaitsOn) > 0 {
			unread = append(unread, r.Node)
			continue
		}
		if r.LastIndex < best.LastIndex && len(best.WaitsOn) == 0 {
			r.Behind = best.LastIndex - r.LastIndex
		}
		if r.LastIndex >= best.LastIndex && r.LastTerm == best.LastTerm {
			holding++
		}
	}
	n := max(len(cq.Members), len(rs))
	cq.Majority = holding > n/2
	var why []string
	switch {
	case len(rs) == 1:
		why = append(why, "the only replica given")
	case cq.Agree:
		why = append(why, fmt.Sprintf("every replica given ends at index %d term %d", best.LastIndex, best.LastTerm))
	default:
		why = append(why, fmt.Sprintf("last index %d term %d, the most up-to-date log (Raft: later last term, then higher last index)", best.LastIndex, best.LastTerm))
		if !usable(best) {
			why = append(why, "no replica given can start ("+best.NextStart+")")
		}
		for _, r := range rs[1:] {
			switch {
			case !usable(r) && usable(best):
				why = append(why, fmt.Sprintf("%s does not start (%s)", r.Node, r.NextStart))
			case r.Behind > 0:
				why = append(why, fmt.Sprintf("%s lags %d entries (last index %d term %d)", r.Node, r.Behind, r.LastIndex, r.LastTerm))
			case r.LastTerm != best.LastTerm:
				why = append(why, fmt.Sprintf("%s ends at index %d in older term %d", r.Node, r.LastIndex, r.LastTerm))
			}
		}
	}
	if len(unread) > 0 {
		why = append(why, fmt.Sprintf("the replica files of %s could not all be read: where their logs end is unknown", strings.Join(unread, ", ")))
	}
	if !cq.Majority && len(rs) > 1 {
		why = append(why, fmt.Sprintf("only %d of %d members hold index %d: entries above what a majority holds may be uncommitted", holding, n, best.LastIndex))
	}
	if len(cq.NotGiven) > 0 {
		why = append(why, "not given: "+strings.Join(cq.NotGiven, ", "))
	}
	cq.Why = strings.Join(why, "; ")
}

// ClusterFindings are the findings of a comparison: per queue whose
// replicas differ, one replica-behind finding per lagging replica
// (warning when a majority of the members does not hold the most
// complete replica's entries, else info: a lagging member catches up
// from the leader), at the replica dir of the node whose data dir is
// root (else the most complete one's).
func ClusterFindings(qs []ClusterQueue, root string) []scan.Finding {
	var out []scan.Finding
	for _, q := range qs {
		if q.Agree {
			continue
		}
		best := q.Replicas[0]
		for i, r := range q.Replicas {
			path := r.Dir
			if r.DataDir != root {
				path = r.Node + ":" + r.Dir
			}
			if len(r.WaitsOn) > 0 {
				out = append(out, scan.Finding{Code: CodeReplicaUnknown, Severity: scan.Warning, Path: path, Repair: scan.RepairNone,
					Message: fmt.Sprintf("%s: the replica on %s has files that could not be read (%s): its log ends at index %d term %d or later, unknown, so it is not compared with the other replicas",
						q.Queue, r.Node, strings.Join(r.WaitsOn, ", "), r.LastIndex, r.LastTerm),
					Details: map[string]any{"queue": q.Queue, "vhost": q.VHost, "node": r.Node, "last_index_at_least": r.LastIndex,
						"last_term_at_least": r.LastTerm, "waits_on": r.WaitsOn}})
				continue
			}
			if i == 0 || len(best.WaitsOn) > 0 || r.LastIndex == best.LastIndex && r.LastTerm == best.LastTerm {
				continue
			}
			sev := scan.Info
			if !q.Majority {
				sev = scan.Warning
			}
			out = append(out, scan.Finding{Code: CodeReplicaBehind, Severity: sev, Path: path, Repair: scan.RepairNone,
				Message: fmt.Sprintf("%s: the replica on %s ends at index %d term %d, %d entries behind the most complete one on %s (index %d term %d, snapshot %d); %s",
					q.Queue, r.Node, r.LastIndex, r.LastTerm, r.Behind, best.Node, best.LastIndex, best.LastTerm, best.SnapshotIndex, q.Why),
				Details: map[string]any{"queue": q.Queue, "vhost": q.VHost, "node": r.Node, "last_index": r.LastIndex, "last_term": r.LastTerm,
					"behind": r.Behind, "most_complete": best.Node, "most_complete_last_index": best.LastIndex, "majority": q.Majority}})
		}
	}
	return out
}
