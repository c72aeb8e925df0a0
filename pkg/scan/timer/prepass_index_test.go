package timer

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	gen5x "github.com/storectl/storectl/internal/gen/rocketmq5x"
	"github.com/storectl/storectl/internal/testutil"
	ftimer "github.com/storectl/storectl/pkg/format/timer"
)

// TestIndexHalves: Prepare's index of a timerlog file read as two halves
// at once gives the chunks and unit count of the one walk, on an intact
// file and with the walk's end (a step that is not a unit) in either half,
// at the split and on a file cut short.
func TestIndexHalves(t *testing.T) {
	src := t.TempDir()
	sum, err := gen5x.GenerateTimer(src, gen5x.Config{TotalBytes: 16 << 20, FileSize: 4 << 20, TimerLogFileSize: 1 << 20, SpacingMs: 1000, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join("timerlog", "00000000000000000000")
	st, err := os.Stat(filepath.Join(src, log))
	if err != nil {
		t.Fatal(err)
	}
	steps := st.Size() / ftimer.UnitSize
	split := int64(chunkUnits)
	mid := steps / 2 / chunkUnits * chunkUnits
	if steps < 2*split || int64(sum.Units) <= mid+chunkUnits {
		t.Fatalf("the generated timerlog has %d steps and %d units: too few to split at %d", steps, sum.Units, mid)
	}
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"intact", func(*testing.T, string) {}},
		{"bad magic in the first half", badMagicAt(mid / 3)},
		{"bad magic at the split", badMagicAt(mid)},
		{"bad magic just before the split", badMagicAt(mid - 1)},
		{"bad magic in the second half", badMagicAt(mid + chunkUnits + 7)},
		{"cut inside the second half", func(t *testing.T, path string) {
			if err := os.Truncate(path, (mid+100)*ftimer.UnitSize+20); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := testutil.CopyTree(t, src)
			c.damage(t, filepath.Join(store, log))
			defer func(old int64) { indexSplit = old }(indexSplit)
			indexSplit = 1 << 40 // one walk
			one, err := Prepare(context.Background(), store)
			if err != nil {
				t.Fatal(err)
			}
			indexSplit = split
			two, err := Prepare(context.Background(), store)
			if err != nil {
				t.Fatal(err)
			}
			if one.units == 0 || len(one.chunks) == 0 {
				t.Fatalf("the one walk indexed %d units", one.units)
			}
			if two.units != one.units || !reflect.DeepEqual(two.chunks, one.chunks) || !reflect.DeepEqual(two.maxHi, one.maxHi) {
				t.Errorf("two halves: %d units in %d chunks; one walk: %d units in %d chunks", two.units, len(two.chunks), one.units, len(one.chunks))
			}
		})
	}
}

// badMagicAt writes a magic no unit has into step k of the file.
func badMagicAt(k int64) func(t *testing.T, path string) {
	return func(t *testing.T, path string) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], 0x7F)
		if _, err := f.WriteAt(b[:], k*ftimer.UnitSize+12); err != nil {
			t.Fatal(err)
		}
	}
}
