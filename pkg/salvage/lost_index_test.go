package salvage

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/storectl/storectl/internal/testutil"
	"github.com/storectl/storectl/pkg/format/etf"
	rfmt "github.com/storectl/storectl/pkg/format/rabbitmq"
	rscan "github.com/storectl/storectl/pkg/scan/rabbitmq"
)

// TestSelectLostCleanIndex: after a clean shutdown the broker reads each
// message where msg_store_index.ets says. On the real 4.0.5 clean-shutdown
// dataset, with the dump rewritten so that one referenced id's entry is
// gone, one points where no record starts and one points at an intact copy
// of its record in a file after it (a new highest-numbered .rdq), --select
// lost exports exactly the first two records, each with its reason; the
// unchanged dataset exports none.
func TestSelectLostCleanIndex(t *testing.T) {
	root := testutil.Untar(t, testutil.Testdata("rabbitmq-4.0", "datasets", "clean-shutdown.tar.gz"))
	vdir := filepath.Join(root, "rmq40@localhost", "msg_stores", "vhosts", vhostHash)
	store := filepath.Join(vdir, "msg_store_persistent")
	sel := Options{Select: []Selection{SelectLost}}
	sharedLost := func() map[string]Message {
		_, msgs, _ := exportRabbit(t, root, vdir, sel)
		out := map[string]Message{}
		for _, m := range msgs {
			if m.Location == rscan.LocationSharedStore.String() {
				out[m.MsgID] = m
			}
		}
		return out
	}
	if got := sharedLost(); len(got) != 0 {
		t.Fatalf("the unchanged clean store exports %d lost .rdq records, want 0", len(got))
	}
	idxPath := filepath.Join(store, "msg_store_index.ets")
	b, err := os.ReadFile(idxPath)
	if err != nil {
		t.Fatal(err)
	}
	locs, err := rfmt.ReadMsgStoreIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	info, err := rfmt.ReadETSFile(b)
	if err != nil {
		t.Fatal(err)
	}
	// Three referenced entries in distinct places, and the highest file.
	var pick []int
	last := int64(-1)
	for i, l := range locs {
		last = max(last, l.File)
		if l.RefCount > 0 && len(pick) < 3 {
			pick = append(pick, i)
		}
	}
	if len(pick) < 3 {
		t.Fatalf("only %d referenced entries", len(pick))
	}
	gone, nowhere, moved := locs[pick[0]], locs[pick[1]], locs[pick[2]]
	// moved: a copy of its record, byte for byte, at the start of a new file.
	src, err := os.ReadFile(filepath.Join(store, strconv.FormatInt(moved.File, 10)+".rdq"))
	if err != nil {
		t.Fatal(err)
	}
	copyFile := last + 1
	frame := src[moved.Offset : moved.Offset+moved.TotalSize]
	if err := os.WriteFile(filepath.Join(store, strconv.FormatInt(copyFile, 10)+".rdq"), frame, 0o644); err != nil {
		t.Fatal(err)
	}
	var out []rfmt.MsgLocation
	for i, l := range locs {
		switch i {
		case pick[0]:
			continue
		case pick[1]:
			l.Offset++ // inside the record: no record starts there
		case pick[2]:
			l.File, l.Offset = copyFile, 0
		}
		out = append(out, l)
	}
	nb, err := rfmt.EncodeMsgStoreIndex(out, rfmt.ETSEncodeOptions{Info: info.Info, Atoms: etf.AtomsUTF8})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(idxPath, nb, 0o644); err != nil {
		t.Fatal(err)
	}
	got := sharedLost()
	hex := func(l rfmt.MsgLocation) string { return fmt.Sprintf("%x", l.MsgID) }
	var ids []string
	for id := range got {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	want := []string{hex(gone), hex(nowhere)}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("lost .rdq records %v, want %v (moved to an intact copy: %s)", ids, want, hex(moved))
	}
	if m := got[hex(gone)]; len(m.Why) != 1 || !strings.Contains(m.Why[0], "has no entry") || m.Offset != gone.Offset {
		t.Errorf("%s: at %d, why %q", m.MsgID, m.Offset, m.Why)
	}
	if m := got[hex(nowhere)]; len(m.Why) != 1 || !strings.Contains(m.Why[0], "points at "+strconv.FormatInt(nowhere.File, 10)+".rdq@"+strconv.FormatInt(nowhere.Offset+1, 10)) {
		t.Errorf("%s: why %q", m.MsgID, m.Why)
	}
}
