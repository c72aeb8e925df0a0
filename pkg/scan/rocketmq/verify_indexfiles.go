package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
	"github.com/storectl/storectl/pkg/scan"
)

// indexFile is one file of index/.
type indexFile struct {
	name, path, rel string
	size            int64
	hdr             rmq.IndexHeader
	hdrOK           bool
}

// pickIndexLayout returns the slot and entry counts of the index files
// and where they came from: the config, the most common file size, or
// the broker defaults.
func (v *verifier) pickIndexLayout(files []indexFile) (rmq.IndexLayout, string) {
	slots, entries := int64(v.cfg.IndexSlots), int64(v.cfg.IndexEntries)
	if slots > 0 && entries > 0 {
		return rmq.IndexLayout{Slots: slots, Entries: entries}, "config"
	}
	count := map[int64]int{}
	for _, f := range files {
		count[f.size]++
	}
	sizes := make([]int64, 0, len(count))
	for s := range count {
		sizes = append(sizes, s)
	}
	sort.Slice(sizes, func(i, j int) bool {
		if count[sizes[i]] != count[sizes[j]] {
			return count[sizes[i]] > count[sizes[j]]
		}
		return sizes[i] > sizes[j]
	})
	for _, s := range sizes {
		if l, err := rmq.IndexLayoutFromSize(s, slots); err == nil {
			if slots > 0 {
				return l, "config slots, entries inferred from size"
			}
			return l, "inferred from size"
		}
	}
	return rmq.IndexLayout{Slots: rmq.DefaultIndexSlots, Entries: rmq.DefaultIndexEntries}, "default"
}

// indexCheck is indexStructure's result for every index file, which
// indexRecords completes.
type indexCheck struct {
	files []indexFile
	walks []*indexWalk // per file (nil: no entries to walk)
	errs  []error      // per file: what stopped indexStructure
	err   error        // index/ could not be listed, or the check was cancelled
}

// indexStructures lists index/ and runs indexStructure on every file (the
// half of the index checks that needs no record; Verify runs it beside
// the commitlog walk).
func (v *verifier) indexStructures(ctx context.Context) *indexCheck {
	ic := &indexCheck{}
	dir := filepath.Join(v.cfg.Root, "index")
	ents, err := storefile.ReadDir(dir)
	if os.IsNotExist(err) {
		return ic
	}
	if err != nil {
		ic.err = err
		return ic
	}
	var files []indexFile
	for _, e := range ents {
		if !storefile.IsRegular(dir, e) {
			// A dir, FIFO, socket or device where the broker keeps an
			// index file: what it indexes is not read (nothing is drawn
			// from its absence); the run is incomplete.
			if nr, ok := storefile.Irregular(dir, e); ok {
				rel := v.rel(filepath.Join(dir, e.Name()))
				v.res.Unread(rel, nr)
			}
			continue
		}
		st, err := storefile.Info(dir, e)
		if err != nil {
			ic.err = err
			return ic
		}
		p := filepath.Join(dir, e.Name())
		f := indexFile{name: e.Name(), path: p, rel: v.rel(p), size: st.Size()}
		if !allDigits(e.Name()) || len(e.Name()) != rmq.IndexFileNameLen {
			v.res.Add(scan.Finding{Code: CodeIndexBadFileName, Severity: scan.Warning, Path: f.rel, Repair: scan.RepairRebuildIndex,
				Expected: "17-digit yyyyMMddHHmmssSSS", Actual: e.Name(), Evidence: map[string]string{"name": "fail"},
				Message: "file in index/ is not named by a 17-digit time; the broker would load it as an index file anyway"})
		}
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	lay, src := v.pickIndexLayout(files)
	v.res.Layout["index_files"], v.res.Layout["index_slots"], v.res.Layout["index_entries"] = len(files), lay.Slots, lay.Entries
	v.res.Layout["index_layout_source"] = src
	ic.files = files
	ic.walks, ic.errs = make([]*indexWalk, len(files)), make([]error, len(files))
	for i := range files {
		if err := ctx.Err(); err != nil {
			ic.err = err
			return ic
		}
		ic.walks[i], ic.errs[i] = v.indexStructure(ctx, &ic.files[i], lay)
	}
	return ic
}

// checkIndexFiles completes the index checks of ic (indexRecords per
// file, after the commitlog walk) and checks the files' order.
func (v *verifier) checkIndexFiles(ctx context.Context, ic *indexCheck) error {
	if ic.err != nil {
		return ic.err
	}
	files := ic.files
	for i := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := ic.errs[i]
		if w := ic.walks[i]; w != nil {
			err = v.indexRecords(w, err)
		}
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				v.res.Add(scan.Unreadable(files[i].rel, err)) // the run says which file it could not read
			}
			v.res.Fail(fmt.Errorf("%s: %w", files[i].rel, err))
		}
	}
	for i := 1; i < len(files); i++ {
		a, b := files[i-1], files[i]
		if a.hdrOK && b.hdrOK && a.hdr.IndexCount > 1 && b.hdr.IndexCount > 1 && b.hdr.BeginPhyOffset < a.hdr.EndPhyOffset {
			v.add(b.rel, scan.Finding{Code: CodeIndexBadHeader, Severity: scan.Warning, Path: b.rel, Offset: 16, Length: 8,
				Repair: scan.RepairRebuildIndex, Expected: ">= " + fmtInt(a.hdr.EndPhyOffset), Actual: fmtInt(b.hdr.BeginPhyOffset),
				Evidence: map[string]string{"file_order": "fail"},
				Message:  "index file begins below the end of the previous index file; the broker indexes each message once, in order"})
		}
	}
	return nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func (v *verifier) indexFinding(f *indexFile, code string, off, length int64, msg string, ev map[string]string) scan.Finding {
	return scan.Finding{Code: code, Severity: scan.Warning, Path: f.rel, Offset: off, Length: length,
		Repair: scan.RepairRebuildIndex, Message: msg, Evidence: ev}
}
