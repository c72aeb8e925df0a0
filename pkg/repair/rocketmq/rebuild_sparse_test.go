package rocketmq

import (
	"context"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	gen "github.com/storectl/storectl/internal/gen/rocketmq"
	"github.com/storectl/storectl/internal/testutil"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/repair"
)

// cqActions returns the plan's actions on consume queue files.
func cqActions(p *repair.Plan) []repair.Action {
	var out []repair.Action
	for _, a := range p.Actions {
		if strings.HasPrefix(filepath.ToSlash(a.Path), "consumequeue/") {
			a.Source, a.SourceSHA256 = "", ""
			out = append(out, a)
		}
	}
	return out
}

// TestRebuildSparseConsumeQueues: with the store's consume queue files'
// zero tails as holes, a rebuild-index dry run plans exactly what it plans
// for the same files written out (no consume queue action on a correct
// store; one replace-file with the same unit diffs for a stray unit
// written into a hole), and reads at least 80% fewer bytes than the holes
// hold less: holes compare as zeros without a read (rbSameSparse).
func TestRebuildSparseConsumeQueues(t *testing.T) {
	roots := [2]string{t.TempDir(), t.TempDir()}
	for i, root := range roots {
		if _, err := gen.Generate(root, gen.Config{MappedFileSize: 1 << 20, TotalBytes: 1 << 20, Seed: 3, DenseCQ: i == 0}); err != nil {
			t.Fatal(err)
		}
	}
	var holes int64
	err := filepath.WalkDir(filepath.Join(roots[1], "consumequeue"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			holes += testutil.HoleTail(t, p)
		}
		return err
	})
	if err != nil || holes == 0 {
		t.Fatalf("%d bytes of holes (%v)", holes, err)
	}
	plan := func(root string) ([]repair.Action, *RebuildReport, int64) {
		before := testutil.ReadBytes(t)
		p, rep, err := PlanRebuildIndex(context.Background(), RebuildConfig{DataDir: root, SkipIndex: true})
		read := testutil.ReadBytes(t) - before
		if err != nil {
			t.Fatal(err)
		}
		return cqActions(p), rep, read
	}
	dense, denseRep, denseRead := plan(roots[0])
	sparse, sparseRep, sparseRead := plan(roots[1])
	t.Logf("%d bytes of holes: the dry run read %d bytes written out, %d with holes", holes, denseRead, sparseRead)
	if len(dense) != 0 || len(sparse) != 0 {
		t.Fatalf("correct store: %d consume queue actions written out, %d with holes", len(dense), len(sparse))
	}
	if saved := denseRead - sparseRead; saved < holes*8/10 {
		t.Errorf("holes of %d bytes, but only %d fewer bytes read", holes, saved)
	}
	if !reflect.DeepEqual(denseRep.Queues, sparseRep.Queues) {
		t.Errorf("queue reports differ")
	}

	// A stray unit megabytes into one file's hole.
	rel := "consumequeue/TopicB/1/" + rmq.FormatFileName(0)
	for _, root := range roots {
		st, err := os.Stat(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		off := st.Size()/rmq.CQUnitSize*rmq.CQUnitSize - 7*rmq.CQUnitSize
		f, err := os.OpenFile(filepath.Join(root, rel), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.WriteAt(binary.BigEndian.AppendUint64(nil, 12345), off)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	dense, denseRep, _ = plan(roots[0])
	sparse, sparseRep, _ = plan(roots[1])
	if len(dense) != 1 || filepath.ToSlash(dense[0].Path) != rel || dense[0].Op != repair.OpReplaceFile {
		t.Fatalf("stray unit, written out: actions %+v", dense)
	}
	if !reflect.DeepEqual(dense, sparse) || !reflect.DeepEqual(denseRep.Queues, sparseRep.Queues) {
		t.Fatalf("stray unit: actions or queue reports differ:\n%+v\n%+v", dense, sparse)
	}
}
