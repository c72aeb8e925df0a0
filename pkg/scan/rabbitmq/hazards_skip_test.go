package rabbitmq

import (
	"math/rand/v2"
	"os"
	"reflect"
	"testing"

	"github.com/storectl/storectl/internal/fileview"
	gen "github.com/storectl/storectl/internal/gen/rabbitmq"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
)

// TestGapCandidatesExact: misread is skipped when gapCandidates finds no
// candidate (and no record is an in-file duplicate); on generated files
// with zero holes and random byte damage, whenever the generation-2 model
// or the §3.4 analysis reports a misread, gapCandidates must have said so.
func TestGapCandidatesExact(t *testing.T) {
	dir := t.TempDir()
	sum, err := gen.Generate(dir, gen.Config{Seed: 5, Kind: gen.MC, TotalBytes: 3 << 20, FileLimit: 256 << 10,
		HoleEvery: 3, HoleMax: 16, UnrefEvery: 4})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	skipped, withHazard, trials := 0, 0, 0
	for _, p := range sum.Files {
		orig, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for range 150 {
			b := append([]byte(nil), orig...)
			for range rng.IntN(40) {
				i := rng.IntN(len(b))
				switch rng.IntN(4) {
				case 0:
					b[i] = 0
				case 1:
					b[i] = 0xFF
				case 2:
					// zero a run: a hole ending right before some bytes
					for j := i; j < min(len(b), i+1+rng.IntN(12)); j++ {
						b[j] = 0
					}
				default:
					b[i] = byte(rng.Uint32())
				}
			}
			fs := &FileScan{Path: "x.rdq"}
			walk(b, fs, nil)
			recs := hazardRecords(fs.Records)
			dup := inFileDup(recs)
			cand := gapCandidates(b, fs.Gaps, nil)
			hs := misread(b, recs, nil)
			trials++
			if len(hs) > 0 {
				withHazard++
				if !cand && !dup {
					t.Fatalf("%s trial %d: misread reports %d hazards (first at %d) but gapCandidates found none",
						p, trials, len(hs), hs[0].Offset)
				}
			}
			if !cand && !dup {
				skipped++
			}
		}
	}
	t.Logf("%d damaged files: %d with misread hazards, %d the pre-check skips", trials, withHazard, skipped)
	if withHazard == 0 || skipped == 0 {
		t.Errorf("vacuous: %d with hazards, %d skipped", withHazard, skipped)
	}
}

// FuzzGapCandidates: on any file, when the pre-check lets hazards skip
// the generation-2 model (no gap candidate, no in-file duplicate), the
// model and the §3.4 analysis report no misread.
func FuzzGapCandidates(f *testing.F) {
	addRDQSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		fs := &FileScan{Number: -1}
		walk(b, fs, nil)
		recs := hazardRecords(fs.Records)
		if gapCandidates(b, fs.Gaps, nil) || inFileDup(recs) {
			return
		}
		if hs := misread(b, recs, nil); len(hs) > 0 {
			t.Fatalf("pre-check skips the model, but misread reports %+v", hs[0])
		}
	})
}

// TestModelFound: the merge of ascending records with the model's and the
// map for records in any other order answer alike.
func TestModelFound(t *testing.T) {
	model := []rfmt.ScanRecord{{Offset: 0}, {Offset: 40}, {Offset: 90}, {Offset: 200}}
	asc := []HazardRecord{{Offset: 0}, {Offset: 10}, {Offset: 40}, {Offset: 91}, {Offset: 200}, {Offset: 300}}
	want := []bool{true, false, true, false, true, false}
	found := modelFound(model, asc)
	for i, r := range asc {
		if got := found(r.Offset); got != want[i] {
			t.Errorf("ascending: %d: %v, want %v", r.Offset, got, want[i])
		}
	}
	other := []HazardRecord{{Offset: 200}, {Offset: 10}, {Offset: 0}, {Offset: 0}, {Offset: 91}, {Offset: 40}}
	wantOther := []bool{true, false, true, true, false, true}
	found = modelFound(model, other)
	for i, r := range other {
		if got := found(r.Offset); got != wantOther[i] {
			t.Errorf("other order: %d: %v, want %v", r.Offset, got, wantOther[i])
		}
	}
}

// TestReachedSame: the walk and the hazard models over a mapping that
// lets its pages go behind them (fileview.Stream, Release between passes,
// as scanner.open and analyse do) give what they give over the plain
// bytes, on generated 4 MiB files with zero holes, unreferenced records
// and random damage; the offsets they report lie in the file.
func TestReachedSame(t *testing.T) {
	dir := t.TempDir()
	sum, err := gen.Generate(dir, gen.Config{Seed: 7, Kind: gen.MC, TotalBytes: 12 << 20, FileLimit: 4 << 20,
		HoleEvery: 5, HoleMax: 64, UnrefEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	calls, hazardsSeen := 0, 0
	for fi, p := range sum.Files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi > 0 { // damage: stale frames in the holes, broken markers
			for range 200 {
				i := rng.IntN(len(b))
				b[i] = []byte{0, 0xFF, byte(rng.Uint32())}[rng.IntN(3)]
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want := &FileScan{Path: "x.rdq"}
		walk(b, want, nil)
		v, err := fileview.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		m, reached, err := v.Stream()
		if err != nil {
			t.Fatal(err)
		}
		check := func(off int64) {
			calls++
			if off < 0 || off > int64(len(m)) {
				t.Fatalf("%s: reached(%d) outside the file of %d bytes", p, off, len(m))
			}
			reached(off)
		}
		got := &FileScan{Path: "x.rdq"}
		walk(m, got, check)
		v.Release()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the walk over the released mapping differs", p)
		}
		recs := hazardRecords(want.Records)
		for i := range recs {
			recs[i].Status = []string{StatusReferenced, StatusUnreferenced, StatusReferenced, StatusDuplicate}[i%4]
		}
		wantH := FileHazards(b, recs, want.Gaps, true)
		gotH := fileHazards(m, recs, want.Gaps, true, check)
		v.Release()
		gotC := gapCandidates(m, want.Gaps, check)
		v.Close()
		if !reflect.DeepEqual(gotH, wantH) {
			t.Fatalf("%s: %d hazards over the released mapping, %d over the bytes", p, len(gotH), len(wantH))
		}
		if gotC != gapCandidates(b, want.Gaps, nil) {
			t.Fatalf("%s: gapCandidates differ", p)
		}
		hazardsSeen += len(wantH)
	}
	t.Logf("%d files, %d hazards, %d reached calls", len(sum.Files), hazardsSeen, calls)
	if len(sum.Files) < 3 || calls < 3*len(sum.Files) || hazardsSeen == 0 {
		t.Fatalf("vacuous: %d files, %d hazards, %d reached calls", len(sum.Files), hazardsSeen, calls)
	}
}
