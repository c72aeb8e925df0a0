package main

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// lastWithBody is the offset, in 5.3.3 a-clean's first commitlog file, of
// the last record before the BLANK end; set by TestVerifyDamageExitCodes.
var lastWithBody int64

type finding struct {
	Type, Code, Path, Severity string
	Offset                     int64
}

// verifyFindings runs verify in all three formats, checks that the exit
// code is 1 in each, and returns the jsonl findings at warning or above.
func verifyFindings(t *testing.T, dir string) []finding {
	t.Helper()
	var jsonl string
	for _, f := range []string{"text", "json", "jsonl"} {
		code, out, errOut := runCLI(t, "verify", dir, "-o", f)
		if code != exitFindings {
			t.Fatalf("verify -o %s: exit %d, want 1\n%s\n%s", f, code, out, errOut)
		}
		if f == "jsonl" {
			jsonl = out
		}
	}
	var fs []finding
	for _, l := range strings.Split(strings.TrimSpace(jsonl), "\n") {
		var f finding
		if err := json.Unmarshal([]byte(l), &f); err != nil {
			t.Fatal(err)
		}
		if f.Type == "finding" && f.Severity != "info" {
			fs = append(fs, f)
		}
	}
	return fs
}

func hasFinding(fs []finding, code, path string, off int64) bool {
	for _, f := range fs {
		if f.Code == code && f.Path == path && (off < 0 || f.Offset == off) {
			return true
		}
	}
	return false
}

// cqUnit is one unit of a RocketMQ consume queue file as the tests read
// it from the file itself (20 bytes: commitlog offset, size, tags code).
type cqUnit struct {
	file string // the consume queue file
	at   int    // the unit's position in it
	off  int64  // its commitlog offset
	dir  string // its queue's dir
}

// cqUnits are the units with a size above 0 of every consume queue file
// under store/consumequeue, in walk order.
func cqUnits(t *testing.T, store string) []cqUnit {
	t.Helper()
	var out []cqUnit
	err := filepath.Walk(filepath.Join(store, "consumequeue"), func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for i := 0; i+20 <= len(b); i += 20 {
			if int32(binary.BigEndian.Uint32(b[i+8:])) > 0 {
				out = append(out, cqUnit{file: p, at: i, off: int64(binary.BigEndian.Uint64(b[i:])), dir: filepath.Dir(p)})
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// newestCQUnit is the unit with the highest commitlog offset (the last
// record dispatched).
func newestCQUnit(t *testing.T, store string) cqUnit {
	t.Helper()
	us := cqUnits(t, store)
	if len(us) == 0 {
		t.Fatal("fixture: no consume queue units")
	}
	n := us[0]
	for _, u := range us {
		if u.off > n.off {
			n = u
		}
	}
	return n
}

// clearCQUnit zeroes unit u in its file.
func clearCQUnit(t *testing.T, u cqUnit) {
	t.Helper()
	patchFile(t, u.file, func(b []byte) []byte { clear(b[u.at : u.at+20]); return b })
}

func patchFile(t *testing.T, path string, f func([]byte) []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, f(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVerifyDamageExitCodes: for the damaged fixtures and for damage made
// here, `storectl verify` exits 1 in every format and names the specific
// finding code at the file (and, where the damage fixes it, the offset).
// The package tests check every offset against the oracles; this test
// shows the CLI carries them through to the exit code.
func TestVerifyDamageExitCodes(t *testing.T) {
	rocket := func(t *testing.T, name string) string {
		return filepath.Join(testutil.Untar(t, testutil.Testdata("rocketmq", name+".tar.gz")), "store")
	}
	const vh = "msg_stores/vhosts/628WB79CIFDYO9LJI6DKMI09L"
	rabbit := func(t *testing.T, name string) string {
		return filepath.Join(testutil.Untar(t, testutil.Testdata("rabbitmq", "datasets", name+".tar.gz")), "rmqfix@localhost")
	}
	{
		b, err := os.ReadFile(filepath.Join(rocket(t, "rmq533-a-clean"), "commitlog", "00000000000000000000"))
		if err != nil {
			t.Fatal(err)
		}
		for pos := int64(0); ; {
			m, err := rmq.DecodeMessage(b[pos:], pos, rmq.DefaultMaxRecordSize)
			if err != nil || m.IsBlank() {
				break
			}
			if len(m.Body) > 8 && !m.Compressed() {
				lastWithBody = pos
			}
			pos += int64(m.TotalSize)
		}
	}
	cases := []struct {
		name   string
		dir    func(t *testing.T) string
		code   string
		path   string
		offset int64
	}{
		{"stale records (c-stale)", func(t *testing.T) string { return rocket(t, "rmq533-c-stale") },
			"rocketmq.commitlog.stale-record", "commitlog/00000000000000786432", 249227},
		{"torn tail, body CRC (d-torn-crc)", func(t *testing.T) string { return rocket(t, "rmq533-d-torn-crc") },
			"rocketmq.commitlog.body-crc", "commitlog/00000000000000786432", 244961},
		{"body byte flipped in the last record of file 0", func(t *testing.T) string {
			d := rocket(t, "rmq533-a-clean")
			patchFile(t, filepath.Join(d, "commitlog", "00000000000000000000"), func(b []byte) []byte {
				m, err := rmq.DecodeMessage(b[lastWithBody:], lastWithBody, rmq.DefaultMaxRecordSize)
				if err != nil || len(m.Body) == 0 {
					t.Fatalf("no record with a body at %d: %v", lastWithBody, err)
				}
				b[lastWithBody+int64(m.TotalSize)-int64(2+len(m.Properties))-int64(len(m.Topic))-2] ^= 0xFF
				return b
			})
			return d
		}, "rocketmq.commitlog.body-crc", "commitlog/00000000000000000000", -2},
		{"consume queue unit pointing mid-message", func(t *testing.T) string {
			d := rocket(t, "rmq533-a-clean")
			patchFile(t, filepath.Join(d, "consumequeue", "TopicA", "1", "00000000000000000000"), func(b []byte) []byte {
				binary.BigEndian.PutUint64(b[40:], binary.BigEndian.Uint64(b[40:])+10) // unit 2
				return b
			})
			return d
		}, "rocketmq.consumequeue.bad-unit", "consumequeue/TopicA/1/00000000000000000000", 40},
		{"deleted consume queue file", func(t *testing.T) string {
			d := rocket(t, "rmq533-a-clean")
			if err := os.Remove(filepath.Join(d, "consumequeue", "TopicA", "1", "00000000000000000000")); err != nil {
				t.Fatal(err)
			}
			return d
		}, "rocketmq.consumequeue.missing", "consumequeue/TopicA/1/00000000000000000000", -1},
		{"truncated index file", func(t *testing.T) string {
			d := rocket(t, "rmq533-a-clean")
			patchFile(t, filepath.Join(d, "index", "20261129234807661"), func(b []byte) []byte { return b[:5000] })
			return d
		}, "rocketmq.index.bad-header", "index/20261129234807661", 5000},
		{".qs CRC flip", func(t *testing.T) string {
			d := rabbit(t, "crash-cqv2")
			patchFile(t, filepath.Join(d, vh, "queues", "6GR38JRPIL3M68J7JM8E1SMBO", "0.qs"), func(b []byte) []byte { b[2400] ^= 0xFF; return b })
			return d
		}, "rabbitmq.qs.crc", vh + "/queues/6GR38JRPIL3M68J7JM8E1SMBO/0.qs", -1},
		{"msg_store_index.ets offset moved", func(t *testing.T) string {
			d := rabbit(t, "clean-shutdown")
			p := filepath.Join(d, vh, "msg_store_persistent", "msg_store_index.ets")
			patchFile(t, p, func(b []byte) []byte {
				f, err := rfmt.ReadETSFile(b)
				if err != nil {
					t.Fatal(err)
				}
				locs, err := rfmt.ReadMsgStoreIndex(b)
				if err != nil {
					t.Fatal(err)
				}
				sort.Slice(locs, func(i, j int) bool { return locs[i].RefCount > locs[j].RefCount })
				locs[0].Offset += 9
				out, err := rfmt.EncodeMsgStoreIndex(locs, rfmt.ETSEncodeOptions{Info: f.Info})
				if err != nil {
					t.Fatal(err)
				}
				return out
			})
			return d
		}, "rabbitmq.index.mismatch", vh + "/msg_store_persistent/msg_store_index.ets", -1},
		{".qi entry whose message is gone", func(t *testing.T) string {
			d := rabbit(t, "crash-cqv2")
			// Zero the first referenced record of the store (the oldest):
			// every queue entry that references it loses its message, and
			// later messages of its queue are on disk, so it is lost, not
			// an unconfirmed publish the crash cut off.
			_, out, _ := runCLI(t, "scan", d, "--records", "-o", "jsonl")
			for _, o := range jsonlObjects(t, out) {
				if refs, _ := o["referenced_by"].([]any); o["type"] != "record" || len(refs) == 0 {
					continue
				}
				off, size := int(o["offset"].(float64)), int(o["size"].(float64))
				patchFile(t, filepath.Join(d, filepath.FromSlash(o["path"].(string))), func(b []byte) []byte {
					clear(b[off : off+size])
					return b
				})
				return d
			}
			t.Fatal("no referenced record")
			return d
		}, "rabbitmq.queue.message-missing", "", -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.offset == -2 {
				c.offset = lastWithBody
			}
			fs := verifyFindings(t, c.dir(t))
			if c.path == "" {
				for _, f := range fs {
					if f.Code == c.code && strings.HasSuffix(f.Path, ".qi") {
						return
					}
				}
				t.Fatalf("no %s at a .qi entry in %+v", c.code, fs)
			}
			if !hasFinding(fs, c.code, c.path, c.offset) {
				t.Fatalf("no %s at %s@%d in %+v", c.code, c.path, c.offset, fs)
			}
		})
	}
}
