package stream_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/streamtest"
	"github.com/storectl/storectl/pkg/scan/stream"
)

// oracleDiffs counts the fields compared with an oracle and the ones that differ.
type oracleDiffs struct {
	t             *testing.T
	fields, diffs int
}

func (d *oracleDiffs) eq(where, field string, oracle, got any) {
	d.fields++
	if fmt.Sprint(oracle) != fmt.Sprint(got) {
		d.diffs++
		if d.diffs <= 20 {
			d.t.Errorf("%s: %s: oracle %v, storectl %v", where, field, oracle, got)
		}
	}
}

// oracleChunk is a chunk of the broker's dump, with its user records.
type oracleChunk struct {
	file string
	line map[string]any
	recs []map[string]any
}

// oracleStream reads one stream's chunks from the dump oracle: per file
// for 4.0.5 (osiris_log:dump_chunk), one walk over every segment for
// 3.10.8 (osiris 1.3.1's data reader).
func oracleStream(t *testing.T, ds streamtest.Dataset, dir string) (chunks []*oracleChunk, segments int) {
	add := func(file string, lines []map[string]any) {
		for _, l := range lines {
			switch l["kind"] {
			case "chunk":
				f := file
				if f == "" {
					f = fmt.Sprint(l["file"])
				}
				chunks = append(chunks, &oracleChunk{file: f, line: l})
			case "record":
				c := chunks[len(chunks)-1]
				c.recs = append(c.recs, l)
			}
		}
	}
	if ds.Version == "3.10.8" {
		add("", streamtest.Oracle310(t, ds, dir))
		seen := map[string]bool{}
		for _, c := range chunks {
			seen[c.file] = true
		}
		return chunks, len(seen)
	}
	for _, f := range streamtest.OracleFiles(t, ds, dir) {
		if strings.HasSuffix(f, ".segment") {
			segments++
			add(f, streamtest.Oracle(t, ds, dir, f))
		}
	}
	return chunks, segments
}

func num(v any) uint64 {
	var n uint64
	fmt.Sscan(fmt.Sprint(v), &n)
	return n
}

// TestScanMatchesOracle: what the scan pipeline (the one scan --records,
// verify and salvage run) reports per chunk equals the broker's own dump
// of the real 4.0.5 datasets (S1, S2, S3, Q3's st5) and the 3.10.8 one
// (T1): every user chunk's records carry its file, position, chunk id,
// timestamp, epoch and CRC verdict, one record per entry with its offset,
// byte position and size, message id, sections, body size and sha256; the
// queue line counts the dump's chunks, user and tracking chunks (and the
// offsets tracking chunks take), messages, segments and offset range.
func TestScanMatchesOracle(t *testing.T) {
	d := &oracleDiffs{t: t}
	var nChunks, nTracking, nRecords int
	for _, ds := range streamtest.All {
		node := streamtest.NodeDir(t, ds)
		byFile := map[string][]stream.Record{}
		res := scanNode(t, node, ds.Version, func(r any) error {
			rec := r.(stream.Record)
			k := filepath.Base(filepath.Dir(rec.Path)) + "/" + filepath.Base(rec.Path)
			byFile[k] = append(byFile[k], rec)
			return nil
		})
		for _, st := range res.Streams {
			q := st.Queue
			dir := filepath.Base(q.Dir)
			chunks, segments := oracleStream(t, ds, dir)
			if len(chunks) == 0 {
				t.Fatalf("%s %s: the oracle has no chunk", ds.Name, dir)
			}
			w := ds.Name + "/" + q.Queue
			used := map[string]int{}
			var user, tracking int
			var trackingOffsets, entries uint64
			for _, c := range chunks {
				l := c.line
				nrec := num(l["num_records"])
				if num(l["type"]) != 0 {
					tracking++
					trackingOffsets += nrec
					continue
				}
				user++
				entries += nrec
				k := dir + "/" + c.file
				recs := byFile[k][used[k]:]
				if uint64(len(recs)) < nrec {
					d.eq(w, c.file+" records", nrec, len(recs))
					continue
				}
				recs = recs[:nrec]
				used[k] += int(nrec)
				cw := fmt.Sprintf("%s %s chunk %v", w, c.file, l["chunk_id"])
				for i, r := range recs {
					rw := fmt.Sprintf("%s record %d", cw, i)
					d.eq(rw, "chunk position", l["position"], r.ChunkPos)
					d.eq(rw, "chunk_id", l["chunk_id"], r.ChunkID)
					d.eq(rw, "timestamp", l["timestamp"], r.Timestamp)
					d.eq(rw, "epoch", l["epoch"], r.Epoch)
					d.eq(rw, "crc_match", l["crc_match"], r.CRCMatch)
					if i >= len(c.recs) {
						d.eq(rw, "oracle record", "present", "missing")
						continue
					}
					o := c.recs[i]
					d.eq(rw, "offset", o["offset"], r.StreamOffset)
					if o["data_pos"] != nil { // 4.0.5: the entry's place in the chunk's data
						d.eq(rw, "entry position", num(l["position"])+48+num(l["filter_size"])+num(o["data_pos"]), r.Offset)
					}
					d.eq(rw, "entry size", num(o["size"])+4, r.Size)
					d.eq(rw, "message_id", o["message_id"], r.MsgID)
					var secs []string
					for _, s := range r.Sections {
						secs = append(secs, "v1_0."+strings.ReplaceAll(s, "-", "_"))
					}
					d.eq(rw, "sections", o["sections"], secs)
					d.eq(rw, "body_size", o["body_size"], r.BodySize)
					d.eq(rw, "body_sha256", o["body_sha256"], r.BodySHA256)
					nRecords++
				}
				d.eq(cw, "oracle records", nrec, len(c.recs))
			}
			for k, recs := range byFile {
				if strings.HasPrefix(k, dir+"/") && used[k] != len(recs) {
					d.eq(w, k+" records", used[k], len(recs))
				}
			}
			last := chunks[len(chunks)-1].line
			d.eq(w, "chunks", len(chunks), q.Chunks)
			d.eq(w, "user chunks", user, q.UserChunks)
			d.eq(w, "tracking chunks", tracking, q.TrackingChunks)
			d.eq(w, "tracking offsets", trackingOffsets, q.TrackingOffsets)
			d.eq(w, "messages", entries, q.Entries)
			d.eq(w, "segments", segments, q.Segments)
			d.eq(w, "first offset", chunks[0].line["chunk_id"], *q.FirstOffset)
			d.eq(w, "last offset", num(last["chunk_id"])+num(last["num_records"])-1, *q.LastOffset)
			nChunks += len(chunks)
			nTracking += tracking
		}
	}
	if nChunks == 0 || nRecords == 0 || nTracking == 0 {
		t.Fatalf("nothing compared: %d chunks, %d tracking, %d records", nChunks, nTracking, nRecords)
	}
	t.Logf("scan pipeline vs dump oracle: %d chunks (%d tracking), %d records, %d fields compared, %d differences",
		nChunks, nTracking, nRecords, d.fields, d.diffs)
}
