package stream

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Rules is what one osiris version does with a stream's files: at the
// writer's start (osiris_log:init/2, maybe_fix_corrupted_files/1) and
// when a consumer reads. docs/formats/osiris.md has the upstream lines.
type Rules struct {
	Name   string `json:"name"`   // RabbitMQ versions, e.g. "4.0.4+"
	Osiris string `json:"osiris"` // osiris version
	// IndexRepair: the last index is scanned backwards for its last record
	// that points at a valid chunk, and the segment is truncated after it
	// (osiris >= 1.3.0, PR #87). Without it a last record that points at a
	// torn chunk stops the stream (osiris#79).
	IndexRepair bool `json:"index_repair"`
	// MissingLastSegment: a last index whose segment is missing is deleted
	// (osiris >= 1.6.9); before, recovery throws missing_file.
	MissingLastSegmentDeleted bool `json:"missing_last_segment_deleted"`
	// OrphanSegmentsDeleted: segments before the first index/segment pair
	// are deleted (orphaned_segments/1, osiris >= 1.8.3).
	OrphanSegmentsDeleted bool `json:"orphan_segments_deleted"`
	// StrayFileCrash: an unexpected file in the stream dir crashes
	// orphaned_segments/1 (osiris 1.8.3 only: server PR #12704).
	StrayFileCrash bool `json:"stray_file_crash"`
	// ReaderChecksCRC: AMQP 0-9-1 consumers read with read_chunk_parsed,
	// which checks every chunk's CRC (RabbitMQ < 4.0); from 4.0 they read
	// with chunk_iterator, which checks it only for a chunk read ahead
	// whole.
	ReaderChecksCRC bool `json:"reader_checks_crc"`
	// Filter: the chunk header has the bloom filter size byte (osiris >= 1.6).
	Filter bool `json:"filter"`
	// MsgRecord: messages are converted for AMQP 0-9-1 consumers by
	// rabbit_msg_record (RabbitMQ < 3.13); from 3.13 by mc_amqpl.
	MsgRecord bool `json:"msg_record"`
}

// The rule sets, newest first. RabbitMQ's osiris pins come from
// rabbitmq-server's rabbitmq-components.mk / MODULE.bazel at each tag.
var ruleSets = []struct {
	from  [3]int // first RabbitMQ version
	rules Rules
}{
	{[3]int{4, 0, 4}, Rules{Name: "4.0.4+", Osiris: "1.8.4+", IndexRepair: true, MissingLastSegmentDeleted: true, OrphanSegmentsDeleted: true, Filter: true}},
	{[3]int{4, 0, 0}, Rules{Name: "4.0.0-4.0.3", Osiris: "1.8.3", IndexRepair: true, MissingLastSegmentDeleted: true, OrphanSegmentsDeleted: true, StrayFileCrash: true, Filter: true}},
	{[3]int{3, 13, 7}, Rules{Name: "3.13.7", Osiris: "1.8.3", IndexRepair: true, MissingLastSegmentDeleted: true, OrphanSegmentsDeleted: true, StrayFileCrash: true, ReaderChecksCRC: true, Filter: true}},
	{[3]int{3, 13, 0}, Rules{Name: "3.13.0-3.13.6", Osiris: "1.7.x", IndexRepair: true, MissingLastSegmentDeleted: true, ReaderChecksCRC: true, Filter: true}},
	{[3]int{3, 11, 20}, Rules{Name: "3.11.20-3.12.x", Osiris: "1.6.9-1.7.x", IndexRepair: true, MissingLastSegmentDeleted: true, ReaderChecksCRC: true, Filter: true, MsgRecord: true}},
	{[3]int{3, 10, 7}, Rules{Name: "3.10.7-3.11.19", Osiris: "1.3.x-1.6.x", IndexRepair: true, ReaderChecksCRC: true, MsgRecord: true}},
	{[3]int{3, 9, 0}, Rules{Name: "3.9.0-3.10.6", Osiris: "1.2.x", ReaderChecksCRC: true, MsgRecord: true}},
}

// ErrBrokerVersion is wrapped by the errors about --broker-version.
var ErrBrokerVersion = errors.New("unusable broker version")

// DefaultVersion is the RabbitMQ version whose rules apply when none is given.
const DefaultVersion = "4.0.5"

// RulesFor returns the rules of RabbitMQ version v ("" = DefaultVersion).
// The 3.11-3.13 boundaries are approximate (osiris 1.6.9 is pinned by
// 3.11.28, 1.7.2 by 3.12.14 and 3.13.0, 1.8.3 by 3.13.7).
func RulesFor(v string) (Rules, error) {
	if v == "" {
		v = DefaultVersion
	}
	p, err := parseVersion(v)
	if err != nil {
		return Rules{}, err
	}
	for _, rs := range ruleSets {
		if !less(p, rs.from) {
			return rs.rules, nil
		}
	}
	return Rules{}, fmt.Errorf("%w: RabbitMQ %s has no streams (they came in 3.9)", ErrBrokerVersion, v)
}

// AllRules is every rule set, newest first.
func AllRules() []Rules {
	out := make([]Rules, len(ruleSets))
	for i, rs := range ruleSets {
		out[i] = rs.rules
	}
	return out
}

func parseVersion(v string) ([3]int, error) {
	var p [3]int
	parts := strings.SplitN(strings.TrimPrefix(strings.TrimSpace(v), "v"), ".", 3)
	for i, s := range parts {
		if i == 2 {
			s, _, _ = strings.Cut(s, "-")
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return p, fmt.Errorf("%w: %q: want MAJOR.MINOR[.PATCH]", ErrBrokerVersion, v)
		}
		p[i] = n
	}
	if len(parts) < 2 {
		return p, fmt.Errorf("%w: %q: want MAJOR.MINOR[.PATCH]", ErrBrokerVersion, v)
	}
	return p, nil
}

func less(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}
