package rabbitmq

import (
	"errors"
	"path"
	"strings"
	"testing"

	"github.com/storectl/storectl/pkg/format"
)

func TestDirNamesSpecExamples(t *testing.T) {
	// Examples marked [verified] in docs/formats/rabbitmq-classic.md §1.2 and the queue
	// hashes listed in testdata/rabbitmq/README.md.
	if got := VHostDirName("/"); got != "628WB79CIFDYO9LJI6DKMI09L" {
		t.Errorf("VHostDirName(/) = %s", got)
	}
	for q, want := range map[string]string{
		"myqueue": "4JGMTHOJKE3ZFBZ90KKG3EGBR",
		"q1":      "6GR38JRPIL3M68J7JM8E1SMBO",
		"q2":      "KANL8CE0UDO3DXGEUF3GF2Q3", // 24 chars: no zero padding
		"q3":      "B8FBNQI2ZKERLJJLPIXJNGUHG",
		"q4":      "BBLAWLQ242Q038SS4SQ12H88L",
	} {
		if got := QueueDirName("/", q); got != want {
			t.Errorf("QueueDirName(/, %s) = %s, want %s", q, got, want)
		}
	}
}

// TestDirNamesFixtures checks the names against the dirs the brokers
// made (read from the tarballs in memory).
func TestDirNamesFixtures(t *testing.T) {
	for _, ds := range qxDatasets {
		t.Run(ds.name, func(t *testing.T) {
			vdir, files := qxVHost(t, ds.tarball)
			vhost, ok := files[vdir+"/.vhost"]
			if !ok {
				t.Fatal("no .vhost")
			}
			if got := VHostDirName(string(vhost)); got != path.Base(vdir) {
				t.Errorf("VHostDirName(%q) = %s, dir is %s", vhost, got, path.Base(vdir))
			}
			qdirs := 0
			for name, b := range files {
				if path.Base(name) != ".queue_name" || path.Dir(path.Dir(name)) != vdir+"/queues" {
					continue
				}
				qdirs++
				qd := path.Dir(name)
				n, err := ParseQueueName(b)
				if err != nil {
					t.Fatalf("%s: %v", qd, err)
				}
				if n.VHost != string(vhost) || n.IndexV2 != strings.Contains(string(b), "INDEX: v2") {
					t.Errorf("%s: parsed %+v from %q", qd, n, b)
				}
				if got := QueueDirName(n.VHost, n.Name); got != path.Base(qd) {
					t.Errorf("QueueDirName(%s) = %s, dir is %s", n.Name, got, path.Base(qd))
				}
			}
			if qdirs < 3 {
				t.Fatalf("only %d queue dirs", qdirs)
			}
			cfg, ok := files[vdir+"/.config"]
			if !ok {
				t.Fatal("no .config")
			}
			if n, err := ParseVHostConfig(cfg); err != nil || n != 2048 {
				t.Errorf("ParseVHostConfig(%q) = %d, %v; want 2048", cfg, n, err)
			}
		})
	}
}

func TestParseVHostConfig(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    int
		field   string
		wantErr error
	}{
		{"%% This file is auto-generated! Edit at your own risk!\n{segment_entry_count, 2048}.", 2048, "", nil},
		{"", LegacySegmentEntryCount, "", nil},
		{"% only a comment\n", LegacySegmentEntryCount, "", nil},
		{"{other, 1}.\n{segment_entry_count,512}.\n", 512, "", nil},
		{"{segment_entry_count, 0}.", 0, "segment_entry_count", format.ErrInvalid},
		{"{segment_entry_count, 16385}.", 0, "segment_entry_count", format.ErrInvalid},
		{"{segment_entry_count, x}.", 0, "segment_entry_count", format.ErrInvalid},
		{"{segment_entry_count, 2048}", 0, "term", format.ErrShort},
		{"segment_entry_count.", 0, "term", format.ErrInvalid},
		{"{Bad, 1}.", 0, "key", format.ErrInvalid},
		{strings.Repeat(" ", namesMaxTextFile+1), 0, "config", format.ErrTooLarge},
	} {
		got, err := ParseVHostConfig([]byte(tc.in))
		if !qxErrIs(err, tc.field, tc.wantErr) || got != tc.want {
			t.Errorf("ParseVHostConfig(%.40q) = %d, %v; want %d, %s %v", tc.in, got, err, tc.want, tc.field, tc.wantErr)
		}
	}
}

func TestParseQueueName(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    QueueName
		field   string
		wantErr error
	}{
		{"VHOST: /\nQUEUE: q1\n", QueueName{"/", "q1", false}, "", nil},
		{"VHOST: /\nQUEUE: q1\nINDEX: v2\n", QueueName{"/", "q1", true}, "", nil},
		{"VHOST: a b\nQUEUE: \n", QueueName{"a b", "", false}, "", nil},
		{"VHOST: /\nQUEUE: q1", QueueName{}, "queue", format.ErrInvalid},
		{"QUEUE: q1\n", QueueName{}, "vhost", format.ErrInvalid},
		{"VHOST: /\nQUEUE: q1\nINDEX: v3\n", QueueName{"/", "q1", false}, "index", format.ErrInvalid},
		{"", QueueName{}, "vhost", format.ErrInvalid},
	} {
		got, err := ParseQueueName([]byte(tc.in))
		if !qxErrIs(err, tc.field, tc.wantErr) || (err == nil && got != tc.want) {
			t.Errorf("ParseQueueName(%q) = %+v, %v; want %+v, %s %v", tc.in, got, err, tc.want, tc.field, tc.wantErr)
		}
	}
}

// qxErrIs reports whether err matches want (nil = no error) and, for a
// *format.CorruptError, names field.
func qxErrIs(err error, field string, want error) bool {
	if want == nil {
		return err == nil
	}
	var ce *format.CorruptError
	return errors.Is(err, want) && errors.As(err, &ce) && ce.Field == field
}

func FuzzNames(f *testing.F) {
	for _, b := range qxFixtureFiles(f, ".config") {
		f.Add(b)
	}
	for _, b := range qxFixtureFiles(f, ".queue_name") {
		f.Add(b)
	}
	f.Add([]byte("{segment_entry_count, 16384}.%"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseVHostConfig(b)
		var ce *format.CorruptError
		if err != nil && (!errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > int64(len(b))) {
			t.Fatalf("config error %v", err)
		}
		if err == nil && (n <= 0 || n > MaxV1SegmentEntryCount) {
			t.Fatalf("segment entry count %d", n)
		}
		q, err := ParseQueueName(b)
		if err != nil && (!errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > int64(len(b))) {
			t.Fatalf("queue name error %v", err)
		}
		if err == nil && strings.ContainsRune(q.VHost+q.Name, '\n') {
			t.Fatalf("newline in %+v", q)
		}
		_ = QueueDirName(string(b), string(b))
	})
}
