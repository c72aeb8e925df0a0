package osiris_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/streamtest"
	"github.com/storectl/storectl/pkg/format/amqp10"
	"github.com/storectl/storectl/pkg/format/osiris"
)

func TestMain(m *testing.M) { os.Exit(streamtest.Main(m)) }

// diffs collects field differences against an oracle line.
type diffs struct {
	t      *testing.T
	n      int
	fields int
}

func (d *diffs) eq(where, field string, oracle any, got any) {
	d.fields++
	o := fmt.Sprint(oracle)
	if n, ok := oracle.(json.Number); ok {
		o = n.String()
	}
	if o != fmt.Sprint(got) {
		d.n++
		if d.n <= 20 {
			d.t.Errorf("%s: %s: oracle %v, storectl %v", where, field, o, got)
		}
	}
}

// TestOracleChunks compares every chunk, entry, trailer and index record
// of the real 4.0.5 datasets with osiris' own dump (osiris_log:dump_chunk,
// dump_index, amqp10_framing:decode_bin, run by the fixture's escript).
func TestOracleChunks(t *testing.T) {
	var chunks, records, idx, fields int
	d := &diffs{t: t}
	for _, ds := range streamtest.Datasets40 {
		for _, sdir := range streamtest.StreamDirs(t, ds) {
			name := filepath.Base(sdir)
			for _, file := range streamtest.OracleFiles(t, ds, name) {
				lines := streamtest.Oracle(t, ds, name, file)
				where := ds.Name + "/" + name + "/" + file
				path := filepath.Join(sdir, file)
				if strings.HasSuffix(file, ".index") {
					idx += compareIndex(t, d, where, path, lines)
				} else {
					c, r := compareSegment(t, d, where, path, lines)
					chunks += c
					records += r
				}
			}
		}
	}
	fields = d.fields
	if chunks == 0 || records == 0 || idx == 0 {
		t.Fatalf("nothing compared: %d chunks, %d records, %d index records", chunks, records, idx)
	}
	t.Logf("oracle: %d chunks, %d records, %d index records, %d fields compared, %d differences", chunks, records, idx, fields, d.n)
}

func compareIndex(t *testing.T, d *diffs, where, path string, lines []map[string]any) int {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	x, err := osiris.NewIndexReader(f, st.Size())
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	var got []osiris.IndexRecord
	var pos []int64
	for x.Next() {
		got = append(got, x.Record())
		pos = append(pos, x.Pos())
	}
	if err := x.Err(); err != nil {
		t.Errorf("%s: %v", where, err)
	}
	n := 0
	for _, l := range lines {
		switch l["kind"] {
		case "index_record":
			if n >= len(got) {
				d.eq(where, "index records", "more", len(got))
				continue
			}
			r, w := got[n], fmt.Sprintf("%s record %d", where, n)
			d.eq(w, "chunk_id", l["chunk_id"], r.ChunkID)
			d.eq(w, "timestamp", l["timestamp"], r.Timestamp)
			d.eq(w, "epoch", l["epoch"], r.Epoch)
			d.eq(w, "file_pos", l["file_pos"], r.FilePos)
			d.eq(w, "type", l["type"], uint8(r.Type))
			d.eq(w, "index_pos", l["index_pos"], pos[n])
			n++
		case "index_end":
			d.eq(where, "records", l["records"], len(got))
			d.eq(where, "end_pos", l["end_pos"], st.Size())
		}
	}
	return n
}

func compareSegment(t *testing.T, d *diffs, where, path string, lines []map[string]any) (int, int) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	sr, err := osiris.NewSegmentReader(f, st.Size())
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	type rec struct {
		e   osiris.Entry
		pos int64 // in the data
		c   osiris.ChunkHeader
	}
	var chunks []osiris.Chunk
	var recs [][]rec
	var trailers [][]byte
	for sr.Next() {
		c := *sr.Chunk()
		c.Data = append([]byte(nil), c.Data...)
		c.Trailer = append([]byte(nil), c.Trailer...)
		chunks = append(chunks, c)
		trailers = append(trailers, c.Trailer)
		var rs []rec
		it := osiris.Entries(c.Data, c.Pos+c.Header.DataOffset())
		for it.Next() {
			e := it.Entry()
			rs = append(rs, rec{e: e, pos: e.Pos - c.Pos - c.Header.DataOffset(), c: c.Header})
		}
		if err := it.Err(); err != nil {
			t.Errorf("%s: %v", where, err)
		}
		recs = append(recs, rs)
	}
	if err := sr.Err(); err != nil {
		t.Errorf("%s: %v", where, err)
	}
	ci, ri, nrec := -1, 0, 0
	for _, l := range lines {
		switch l["kind"] {
		case "chunk":
			ci++
			ri = 0
			if ci >= len(chunks) {
				d.eq(where, "chunks", "more", len(chunks))
				continue
			}
			c, w := chunks[ci], fmt.Sprintf("%s chunk %d", where, ci)
			h := c.Header
			d.eq(w, "position", l["position"], c.Pos)
			d.eq(w, "chunk_id", l["chunk_id"], h.ChunkID)
			d.eq(w, "type", l["type"], uint8(h.Type))
			d.eq(w, "num_entries", l["num_entries"], h.NumEntries)
			d.eq(w, "num_records", l["num_records"], h.NumRecords)
			d.eq(w, "timestamp", l["timestamp"], h.Timestamp)
			d.eq(w, "epoch", l["epoch"], h.Epoch)
			d.eq(w, "crc", l["crc"], h.CRC)
			d.eq(w, "crc_match", l["crc_match"], c.CRCMatch())
			d.eq(w, "data_size", l["data_size"], h.DataSize)
			d.eq(w, "trailer_size", l["trailer_size"], h.TrailerSize)
			d.eq(w, "filter_size", l["filter_size"], h.FilterSize)
			d.eq(w, "chunk_filter_hex", l["chunk_filter_hex"], hex.EncodeToString(c.Filter))
			d.eq(w, "next_position", l["next_position"], c.End())
			d.eq(w, "complete", l["complete"], true)
		case "record":
			if ci < 0 || ci >= len(recs) || ri >= len(recs[ci]) {
				d.eq(where, "records", "more", ri)
				continue
			}
			r, w := recs[ci][ri], fmt.Sprintf("%s chunk %d record %d", where, ci, ri)
			ri++
			nrec++
			d.eq(w, "offset", l["offset"], r.c.ChunkID+uint64(ri-1))
			d.eq(w, "data_pos", l["data_pos"], r.pos)
			d.eq(w, "size", l["size"], len(r.e.Body))
			if r.c.Type != osiris.ChunkUser {
				d.eq(w, "data_hex", l["data_hex"], hex.EncodeToString(r.e.Body))
				continue
			}
			compareMessage(d, w, l, r.e.Body, r.e.Pos+4)
		case "trailer":
			d.eq(where, "trailer_hex", l["trailer_hex"], hex.EncodeToString(trailers[ci]))
		case "segment_end":
			d.eq(where, "chunks", l["chunks"], len(chunks))
			d.eq(where, "end_pos", l["end_pos"], sr.Pos())
			d.eq(where, "file_size", l["file_size"], st.Size())
		}
	}
	return len(chunks), nrec
}

// compareMessage checks one user record's AMQP 1.0 decoding against the
// oracle's amqp10_framing:decode_bin/1 of it.
func compareMessage(d *diffs, w string, l map[string]any, body []byte, off int64) {
	compareMessageWith(d, w, l, body, off, streamtest.Erl, streamtest.ErlField)
}

// compareMessageWith is compareMessage with the term renderers of a
// RabbitMQ version's parser.
func compareMessageWith(d *diffs, w string, l map[string]any, body []byte, off int64, erl, erlField func(amqp10.Value) string) {
	m, err := amqp10.DecodeMessage(body, off)
	if err != nil {
		d.eq(w, "decode", "ok", err)
		return
	}
	var secs []string
	for _, s := range m.Sections {
		secs = append(secs, "v1_0."+strings.ReplaceAll(amqp10.SectionName(s.Code), "-", "_"))
	}
	d.eq(w, "sections", fmt.Sprint(l["sections"]), fmt.Sprint(secs))
	p := m.Properties()
	mid := ""
	if !p.MessageID.IsNull() {
		mid = p.MessageID.Str()
	}
	d.eq(w, "message_id", l["message_id"], mid)
	var body0 []byte
	for _, b := range m.Data() {
		body0 = append(body0, b...)
	}
	sum := sha256.Sum256(body0)
	d.eq(w, "body_size", l["body_size"], len(body0))
	d.eq(w, "body_sha256", l["body_sha256"], hex.EncodeToString(sum[:]))
	d.eq(w, "app_props", erlMap(l["app_props"]), erlMap(mapOf(m.ApplicationProperties(), erl)))
	d.eq(w, "msg_annotations", erlMap(l["msg_annotations"]), erlMap(mapOf(m.MessageAnnotations(), erl)))
	var pf []string
	if m.Section(amqp10.SectionProperties) == nil {
		d.eq(w, "properties", l["properties"], "undefined")
		return
	}
	for _, v := range p.Fields() {
		pf = append(pf, erlField(v))
	}
	d.eq(w, "properties", l["properties"], "{'v1_0.properties',"+strings.Join(pf, ",")+"}")
}

func mapOf(v amqp10.Value, erl func(amqp10.Value) string) map[string]any {
	out := map[string]any{}
	for _, kv := range v.Pairs() {
		out[erl(kv[0])] = erl(kv[1])
	}
	return out
}

// erlMap renders a map deterministically (fmt sorts map keys).
func erlMap(v any) string { return fmt.Sprint(v) }
