package main

import (
	"context"
	"fmt"
	"time"

	"github.com/storectl/storectl/pkg/repair"
	quorumrepair "github.com/storectl/storectl/pkg/repair/quorum"
	"github.com/storectl/storectl/pkg/scan"
	quorumscan "github.com/storectl/storectl/pkg/scan/quorum"
)

// withQuorumPlan makes one planner of a RabbitMQ target's other planner
// and its quorum-queue part: truncate adds the WAL cuts
// (pkg/repair/quorum) to the same plan; the other writers (fn nil) add
// only the quorum scan, so that their runs count what scan counts.
func withQuorumPlan(t scan.Target, key string, inner planner, truncate bool) planner {
	return func(ctx context.Context) (*repair.Plan, *scan.Result, map[string]any, error) {
		p, scanned, extra, err := inner(ctx)
		if err != nil {
			return p, scanned, extra, err
		}
		qc, ok := quorumConfig(t)
		if !ok {
			return p, scanned, extra, nil
		}
		if extra == nil {
			extra = map[string]any{}
		}
		var qres *scan.Result
		if truncate {
			var rep *quorumrepair.Report
			if p, rep, err = quorumrepair.PlanTruncate(ctx, quorumrepair.Config{Scan: qc, ToolVersion: version}, p); err != nil {
				return nil, nil, nil, err
			}
			qres = rep.Scan
			extra["quorum_"+key] = rep
		} else {
			r, err := quorumscan.Scan(ctx, qc, scan.Options{})
			if err != nil {
				return nil, nil, nil, err
			}
			qres = r.Result
		}
		if scanned == nil {
			scanned = qres
		} else {
			scanned.Merge(qres)
		}
		if p == nil {
			if p, err = repair.NewPlan(t.Root, version, time.Now()); err != nil {
				return nil, nil, nil, err
			}
		}
		return p, scanned, extra, nil
	}
}

// peersUsable refuses peer data dirs (verify's extra arguments) that are
// not RabbitMQ dirs with quorum queues.
func peersUsable(ts []scan.Target) error {
	if len(ts) < 2 {
		return nil
	}
	for _, t := range ts {
		if _, ok := quorumConfig(t); !ok || t.Store != scan.RabbitMQ {
			return usagef(fmt.Errorf("several data dirs compare the quorum queue replicas of RabbitMQ nodes; %s has no quorum/ dir", t.Path))
		}
	}
	return nil
}

// compareReplicas reads the quorum queues of every node given (ts[0] the
// data dir verified, the others its peers), compares each queue's
// replicas, adds the replica-behind findings to res and the comparison to
// the run's summary ("quorum_replicas").
func compareReplicas(ctx context.Context, ts []scan.Target, res *scan.Result, s *session) error {
	var nodes []quorumscan.NodeScan
	for _, t := range ts {
		qc, _ := quorumConfig(t)
		qc.Replay = true
		r, err := quorumscan.Scan(ctx, qc, scan.Options{})
		if err != nil {
			return fmt.Errorf("%s: %w", t.Root, err)
		}
		if r.Incomplete {
			return fmt.Errorf("%s: quorum scan incomplete: %v", t.Root, r.Errors)
		}
		nodes = append(nodes, quorumscan.NodeScan{DataDir: t.Root, Result: r})
	}
	cmp := quorumscan.CompareReplicas(nodes)
	res.Add(quorumscan.ClusterFindings(cmp, ts[0].Root)...)
	if s.extra == nil {
		s.extra = map[string]any{}
	}
	s.extra["quorum_replicas"] = cmp
	return nil
}
