package stream

// QueueType is the queue_type of a stream's queue line.
const QueueType = "stream"

// Queue is a stream's `queue` line of verify: the fields every queue line
// has (vhost, queue, dir, entries, keep, drop, at_risk; docs/cli.md)
// and the stream's own. The line's "type" is the JSONL record type
// ("queue"), so the kind of queue is queue_type.
type Queue struct {
	QueueType string `json:"queue_type"`
	VHost     string `json:"vhost"`
	Queue     string `json:"queue"`
	Dir       string `json:"dir"`
	// Entries are the messages on disk (records of user chunks; a
	// tracking chunk's offset is not a message).
	Entries int `json:"entries"`
	Keep    int `json:"keep"` // messages the next start keeps
	Drop    int `json:"drop"` // messages the next start drops
	// Unknown: messages whose fate cannot be told: all of the stream's
	// when one of its files could not be read (NextStart.Unknown; the
	// scan is incomplete too), else 0.
	Unknown int `json:"unknown"`
	// AtRisk: per other RabbitMQ version range whose start drops more
	// (or fails), the messages it drops.
	AtRisk map[string]int `json:"at_risk"`

	VHostFrom      string      `json:"vhost_from"`
	NameAmbiguous  bool        `json:"name_ambiguous"`
	NameLossy      bool        `json:"name_lossy"`
	NameCandidates []Candidate `json:"name_candidates,omitempty"`
	Created        string      `json:"created,omitempty"`

	// FirstOffset and LastOffset bound the offsets on disk (absent for an
	// empty stream); offsets of tracking chunks are in the range too.
	FirstOffset     *uint64 `json:"first_offset,omitempty"`
	LastOffset      *uint64 `json:"last_offset,omitempty"`
	Chunks          int     `json:"chunks"`
	UserChunks      int     `json:"user_chunks"`
	TrackingChunks  int     `json:"tracking_chunks"`
	TrackingOffsets int64   `json:"tracking_offsets"`
	Segments        int     `json:"segments"`
	Bytes           int64   `json:"bytes"`
	// CRCDamaged counts the messages in chunks whose data fails its CRC.
	CRCDamaged int64 `json:"crc_damaged"`
	// NextStart is what the start under the chosen version does.
	NextStart Recovery `json:"next_start"`
	// Unattachable are the offsets a consumer attaching there (numeric
	// x-stream-offset) is not served from: it is sent to the end.
	Unattachable []Range `json:"unattachable"`
}

func (st *StreamScan) queue() Queue {
	q := Queue{QueueType: QueueType, VHost: st.Info.Name.VHost, Queue: st.Info.Name.Queue, Dir: st.Info.Dir,
		VHostFrom: st.Info.Name.VHostFrom, NameAmbiguous: st.Info.Name.Ambiguous, NameLossy: st.Info.Name.Lossy,
		NameCandidates: st.Info.Name.Candidates, Created: st.Info.Name.Created,
		NextStart: st.Recovery, AtRisk: map[string]int{}, Unattachable: st.unattachable()}
	if q.Unattachable == nil {
		q.Unattachable = []Range{}
	}
	var first, last *chunkRef
	for _, s := range st.segs {
		if s.p.segment == "" {
			continue
		}
		q.Segments++
		q.Bytes += s.size
		q.Chunks += s.chunks
		q.UserChunks += s.userChunks
		q.TrackingChunks += s.trackingChunks
		q.TrackingOffsets += s.trackingOffsets
		q.Entries += int(s.messages)
		q.CRCDamaged += s.crcBadRecords
		if s.first != nil {
			if first == nil {
				first = s.first
			}
			last = s.lastChunk
		}
	}
	if first != nil {
		f, l := first.ID, last.next()-1
		q.FirstOffset, q.LastOffset = &f, &l
	}
	q.Drop = int(st.Recovery.DropMessages)
	q.Keep = max(q.Entries-q.Drop, 0)
	if len(st.Recovery.Unknown) > 0 {
		q.Keep, q.Unknown = 0, q.Entries
		return q
	}
	for name, r := range st.ByVersion {
		if name == st.Recovery.Rules {
			continue
		}
		switch {
		case r.Crash != "" && st.Recovery.Crash == "":
			q.AtRisk[name] = q.Entries
		case r.DropMessages > st.Recovery.DropMessages:
			q.AtRisk[name] = int(r.DropMessages)
		}
	}
	return q
}
