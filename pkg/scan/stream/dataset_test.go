package stream_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/streamtest"
	"github.com/storectl/storectl/pkg/scan"
	"github.com/storectl/storectl/pkg/scan/stream"
)

func TestMain(m *testing.M) { os.Exit(streamtest.Main(m)) }

func scanNode(t *testing.T, node, version string, records func(any) error) *stream.Result {
	t.Helper()
	res, err := stream.ScanStreams(context.Background(), stream.Config{Root: node, StreamRoots: []string{filepath.Join(node, "stream")}, BrokerVersion: version},
		scan.Options{Jobs: 2, Records: records})
	if err != nil {
		t.Fatal(err)
	}
	if res.Incomplete {
		t.Fatalf("incomplete: %v", res.Errors)
	}
	return res
}

// listQueues reads the restarted broker's list_queues.tsv: vhost/name ->
// messages (rabbitmqctl prints "Listing queues for vhost V ..." before
// each vhost's lines).
func listQueues(t *testing.T, ds streamtest.Dataset) map[string]int {
	f, err := os.Open(filepath.Join(ds.Results, "restart", "list_queues.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int{}
	vhost := "/"
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if v, ok := strings.CutPrefix(l, "Listing queues for vhost "); ok {
			vhost = strings.TrimSuffix(v, " ...")
			continue
		}
		var name, typ string
		var n int
		if _, err := fmt.Sscan(l, &name, &typ, &n); err == nil && typ == "stream" {
			out[vhost+"/"+name] = n
		}
	}
	return out
}

// TestRealStreamsClean: the undamaged 4.0.5 and 3.10.8 streams have no
// finding, the queue line's vhost and name are the broker's, its counts
// are the broker's (list_queues counts offsets, tracking chunks
// included; the restarted consumer got every message), and the next
// start changes nothing.
func TestRealStreamsClean(t *testing.T) {
	for _, ds := range streamtest.All {
		res := scanNode(t, streamtest.NodeDir(t, ds), ds.Version, nil)
		for _, f := range res.Findings {
			t.Errorf("%s: %s %s@%d: %s", ds.Name, f.Code, f.Path, f.Offset, f.Message)
		}
		lq := listQueues(t, ds)
		if len(res.Streams) != len(lq) {
			t.Fatalf("%s: %d streams, broker has %d", ds.Name, len(res.Streams), len(lq))
		}
		for _, st := range res.Streams {
			q := st.Queue
			n, ok := lq[q.VHost+"/"+q.Queue]
			if !ok || q.VHostFrom != "vhost-dirs" || q.NameAmbiguous {
				t.Fatalf("%s: stream %s in vhost %s (%s, ambiguous %v) unknown to the broker %v", ds.Name, q.Queue, q.VHost, q.VHostFrom, q.NameAmbiguous, lq)
			}
			if got := int(*q.LastOffset-*q.FirstOffset) + 1; got != n {
				t.Errorf("%s %s: %d offsets, list_queues %d", ds.Name, q.Queue, got, n)
			}
			if got := int(*q.LastOffset-*q.FirstOffset) + 1 - int(q.TrackingOffsets); got != q.Entries {
				t.Errorf("%s %s: %d offsets less %d tracking is not %d entries", ds.Name, q.Queue, got+int(q.TrackingOffsets), q.TrackingOffsets, q.Entries)
			}
			if dl := streamtest.Deliveries(t, ds, q.Queue); len(dl) != q.Entries || q.Keep != q.Entries || q.Drop != 0 {
				t.Errorf("%s %s: entries %d keep %d drop %d, the restarted broker delivered %d", ds.Name, q.Queue, q.Entries, q.Keep, q.Drop, len(dl))
			}
			if q.NextStart.Changes() || len(q.Unattachable) != 0 || len(q.AtRisk) != 0 {
				t.Errorf("%s %s: next start %+v, unattachable %v, at risk %v", ds.Name, q.Queue, q.NextStart, q.Unattachable, q.AtRisk)
			}
		}
	}
}

// TestRecordsMatchRestart: per message, scan --records equals what the
// restarted broker (4.0.5 and 3.10.8) delivered to an AMQP 0-9-1 consumer
// reading from "first" (offset, message id, size, sha256; and, converted
// the way that version converts, headers, timestamp, correlation id,
// content type, delivery mode, and on 3.10.8 also content encoding,
// priority, expiration, reply-to, type, app id). Tracking chunks take
// offsets but are no message: no record, no delivery.
func TestRecordsMatchRestart(t *testing.T) {
	var total, fields int
	for _, ds := range streamtest.All {
		rules, _ := stream.RulesFor(ds.Version)
		node := streamtest.NodeDir(t, ds)
		var recs []stream.Record
		type conv struct {
			headers             map[string]any
			ts                  uint64
			corrID, contentType string
			deliveryMode        uint8
			p                   map[string]string
		}
		var convs []conv
		cfg := stream.Config{Root: node, StreamRoots: []string{filepath.Join(node, "stream")}, BrokerVersion: ds.Version}
		res, err := stream.ScanStreams(context.Background(), cfg, scan.Options{Records: func(r any) error { recs = append(recs, r.(stream.Record)); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		// the 0-9-1 view, from the same pipeline's messages
		cfg.OnMessage = func(m *stream.Message) error {
			d := stream.DecodeMessage(m)
			if d.Err != nil {
				return d.Err
			}
			p := stream.To091(d, rules).Properties // aliases m.Body: copy what is compared
			c := conv{streamtest.Headers091(p.Headers), *p.Timestamp, deref(p.CorrelationID), deref(p.ContentType), *p.DeliveryMode,
				map[string]string{"content_encoding": deref(p.ContentEncoding), "expiration": deref(p.Expiration), "reply_to": deref(p.ReplyTo),
					"type": deref(p.Type), "app_id": deref(p.AppID), "priority": "0"}}
			if p.Priority != nil {
				c.p["priority"] = fmt.Sprint(*p.Priority)
			}
			convs = append(convs, c)
			return nil
		}
		if _, err := stream.ScanStreams(context.Background(), cfg, scan.Options{}); err != nil {
			t.Fatal(err)
		}
		byQueue := map[string][]int{}
		for i, r := range recs {
			byQueue[r.Queue] = append(byQueue[r.Queue], i)
		}
		for _, st := range res.Streams {
			q := st.Queue.Queue
			dl := streamtest.Deliveries(t, ds, q)
			idx := byQueue[q]
			if len(idx) != len(dl) {
				t.Errorf("%s %s: %d records, %d deliveries", ds.Name, q, len(idx), len(dl))
				continue
			}
			for n, d := range dl {
				r, c := recs[idx[n]], convs[idx[n]]
				w := fmt.Sprintf("%s %s delivery %d", ds.Name, q, n)
				check := func(field string, want, got any) {
					fields++
					if fmt.Sprint(want) != fmt.Sprint(got) {
						t.Errorf("%s: %s: broker %v, storectl %v", w, field, want, got)
					}
				}
				check("offset", d.Offset, r.StreamOffset)
				check("message_id", d.MessageID, r.MsgID)
				check("size", d.Size, r.BodySize)
				check("sha256", d.SHA256, r.BodySHA256)
				check("crc", true, r.CRCMatch)
				hdr := d.Headers
				delete(hdr, "x-stream-offset")
				fields++
				if !streamtest.SameJSON(hdr, c.headers) {
					t.Errorf("%s: headers: broker %v, storectl %v", w, hdr, c.headers)
				}
				check("timestamp", d.Timestamp, c.ts)
				check("correlation_id", d.CorrelationID, c.corrID)
				check("content_type", d.ContentType, c.contentType)
				check("delivery_mode", d.DeliveryMode, c.deliveryMode)
				for k, v := range map[string]*string{"content_encoding": d.ContentEncoding, "expiration": d.Expiration,
					"reply_to": d.ReplyTo, "type": d.Type, "app_id": d.AppID} {
					if v != nil {
						check(k, *v, c.p[k])
					}
				}
				if d.Priority != nil {
					check("priority", *d.Priority, c.p["priority"])
				}
				total++
			}
		}
	}
	t.Logf("%d deliveries, %d fields compared with the restarted brokers'", total, fields)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestParseName(t *testing.T) {
	for _, c := range []struct {
		dir, vhost, queue string
		ambiguous         bool
	}{
		{"__s1a_1796159969530842441", "/", "s1a", false},
		{"__orders_eu_1796159969530842441", "/", "orders_eu", true},
		{"prod_orders_1796159969530842441", "prod", "orders", false},
		{"prod_eu_orders_1796159969530842441", "prod", "eu_orders", true},
		{"x_1796159969530842441", "", "x", true},
		{"__s1a", "/", "s1a", true},
	} {
		n := stream.ParseName(c.dir)
		if n.VHost != c.vhost || n.Queue != c.queue || n.Ambiguous != c.ambiguous {
			t.Errorf("%s: %+v", c.dir, n)
		}
		if n.Ambiguous && len(n.Candidates) == 0 && strings.Contains(c.dir[:len(c.dir)-20], "_") {
			t.Errorf("%s: ambiguous without candidates", c.dir)
		}
	}
	if n := stream.ParseName("__s1a_1796159969530842441"); n.Created != "2026-12-01T21:19:29.530842441Z" {
		t.Errorf("created %q", n.Created)
	}
	// the node's vhosts settle the split (T1: vhost prod_eu, stream orders_v2)
	n := stream.ParseNameWith("prod_eu_orders_v2_1796172841819575519", []string{"/", "prod_eu"})
	if n.VHost != "prod_eu" || n.Queue != "orders_v2" || n.VHostFrom != "vhost-dirs" || n.Ambiguous || !n.Lossy {
		t.Errorf("with vhosts: %+v", n)
	}
	if n := stream.ParseNameWith("__a_b_1796172841819575519", []string{"/", "a"}); n.VHost != "/" || n.Queue != "a_b" || n.Ambiguous {
		t.Errorf("vhost / with vhost a known: %+v", n)
	}
	if n := stream.ParseNameWith("a_b_c_1796172841819575519", []string{"a", "a_b"}); !n.Ambiguous || len(n.Candidates) != 2 {
		t.Errorf("two known vhosts fit: %+v", n)
	}
}
