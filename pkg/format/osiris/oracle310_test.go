package osiris_test

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/storectl/storectl/internal/streamtest"
	"github.com/storectl/storectl/pkg/format/osiris"
)

// TestOracle310 compares every chunk and record of the RabbitMQ 3.10.8
// dataset with what the broker's own osiris 1.3.1 reader returned for it
// (init_data_reader + read_chunk_parsed with_header, amqp10_framing of
// 3.10.8: testdata/rabbitmq-3.10-stream/tools/osiris131-dump.escript).
func TestOracle310(t *testing.T) {
	d := &diffs{t: t}
	var chunks, records int
	for _, ds := range streamtest.Datasets310 {
		for _, sdir := range streamtest.StreamDirs(t, ds) {
			name := filepath.Base(sdir)
			lines := streamtest.Oracle310(t, ds, name)
			type rec struct {
				e   osiris.Entry
				off uint64
				typ osiris.ChunkType
			}
			var cs []osiris.Chunk
			var files []string
			var recs []rec
			segs, _ := filepath.Glob(filepath.Join(sdir, "*.segment"))
			for _, p := range segs {
				f, err := os.Open(p)
				if err != nil {
					t.Fatal(err)
				}
				st, _ := f.Stat()
				sr, err := osiris.NewSegmentReader(f, st.Size())
				if err != nil {
					t.Fatal(err)
				}
				for sr.Next() {
					c := *sr.Chunk()
					c.Data = append([]byte(nil), c.Data...)
					cs = append(cs, c)
					files = append(files, filepath.Base(p))
					it := osiris.Entries(c.Data, c.Pos+c.Header.DataOffset())
					off := c.Header.ChunkID
					for it.Next() {
						recs = append(recs, rec{it.Entry(), off, c.Header.Type})
						off += uint64(it.Entry().Records())
					}
				}
				if sr.Err() != nil {
					t.Fatal(sr.Err())
				}
				f.Close()
			}
			ci, ri := 0, 0
			for _, l := range lines {
				w := fmt.Sprintf("%s/%s", ds.Name, name)
				switch l["kind"] {
				case "overview":
					r := l["range"].(map[string]any)
					d.eq(w, "first", r["first"], cs[0].Header.ChunkID)
					d.eq(w, "last", r["last"], cs[len(cs)-1].Header.NextOffset()-1)
				case "chunk":
					if ci >= len(cs) {
						d.eq(w, "chunks", "more", len(cs))
						continue
					}
					c, cw := cs[ci], fmt.Sprintf("%s chunk %d", w, ci)
					h := c.Header
					d.eq(cw, "file", l["file"], files[ci])
					d.eq(cw, "position", l["position"], c.Pos)
					d.eq(cw, "chunk_id", l["chunk_id"], h.ChunkID)
					d.eq(cw, "type", l["type"], uint8(h.Type))
					d.eq(cw, "num_entries", l["num_entries"], h.NumEntries)
					d.eq(cw, "num_records", l["num_records"], h.NumRecords)
					d.eq(cw, "timestamp", l["timestamp"], h.Timestamp)
					d.eq(cw, "epoch", l["epoch"], h.Epoch)
					d.eq(cw, "crc", l["crc"], h.CRC)
					d.eq(cw, "crc_match", l["crc_match"], c.CRCMatch())
					d.eq(cw, "data_size", l["data_size"], h.DataSize)
					d.eq(cw, "trailer_size", l["trailer_size"], h.TrailerSize)
					d.eq(cw, "filter_size (0 in osiris 1.3)", 0, h.FilterSize)
					ci++
					chunks++
				case "record":
					if ri >= len(recs) {
						d.eq(w, "records", "more", len(recs))
						continue
					}
					r, rw := recs[ri], fmt.Sprintf("%s record %d", w, ri)
					ri++
					records++
					d.eq(rw, "offset", l["offset"], r.off)
					d.eq(rw, "size", l["size"], len(r.e.Body))
					if r.typ != osiris.ChunkUser {
						d.eq(rw, "data_hex", l["data_hex"], hex.EncodeToString(r.e.Body))
						continue
					}
					compareMessageWith(d, rw, l, r.e.Body, r.e.Pos+4, streamtest.Erl310, streamtest.ErlField310)
				case "stream_end":
					d.eq(w, "chunks", l["chunks"], len(cs))
					d.eq(w, "stopped", l["stopped"], nil)
				}
			}
			d.eq(ds.Name+"/"+name, "records", len(recs), ri)
		}
	}
	if chunks == 0 || records == 0 {
		t.Fatal("nothing compared")
	}
	t.Logf("3.10.8 oracle: %d chunks, %d records, %d fields compared, %d differences", chunks, records, d.fields, d.n)
}
