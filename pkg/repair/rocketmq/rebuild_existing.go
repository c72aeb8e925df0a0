package rocketmq

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// rbExisting is what the store holds today.
type rbExisting struct {
	cq        map[string]int64 // consume queue file (relative path) -> size
	cqSize    int64            // the most common CQ file size, 0 if none
	index     []string         // index file names, sorted as IndexService.load sorts them
	indexSize int64            // size of the first index file, 0 if none
	other     []string         // entries in consumequeue/ or index/ we leave alone
	// entries counts what each consumequeue/<topic> and
	// consumequeue/<topic>/<queueId> dir holds (every kind of entry), so a
	// dir the plan empties can be removed.
	entries map[string]int
}

// rbIndexNameLen is the length of an index file name (yyyyMMddHHmmssSSS).
const rbIndexNameLen = 17

// rbListExisting lists consumequeue/<topic>/<queueId>/<20-digit name> and
// index/<17-digit name>. LMQ queues and anything not named like a broker
// file are listed in other and never touched.
func rbListExisting(data string) (*rbExisting, error) {
	ex := &rbExisting{cq: map[string]int64{}, entries: map[string]int{}}
	topics, err := rbReadDirOpt(filepath.Join(data, "consumequeue"))
	if err != nil {
		return nil, err
	}
	sizes := map[int64]int{}
	for _, t := range topics {
		tdir := filepath.Join("consumequeue", t.Name())
		if !t.IsDir() || strings.HasPrefix(t.Name(), rmq.LMQPrefix) {
			ex.other = append(ex.other, tdir)
			continue
		}
		qs, err := rbReadDirOpt(filepath.Join(data, tdir))
		if err != nil {
			return nil, err
		}
		ex.entries[tdir] = len(qs)
		for _, q := range qs {
			qdir := filepath.Join(tdir, q.Name())
			if id, err := strconv.ParseInt(q.Name(), 10, 32); err != nil || id < 0 || !q.IsDir() || strconv.Itoa(int(id)) != q.Name() {
				ex.other = append(ex.other, qdir)
				continue
			}
			files, err := rbReadDirOpt(filepath.Join(data, qdir))
			if err != nil {
				return nil, err
			}
			ex.entries[qdir] = len(files)
			for _, f := range files {
				rel := filepath.Join(qdir, f.Name())
				if _, err := rmq.ParseFileName(f.Name()); err != nil || !storefile.IsRegular(filepath.Join(data, qdir), f) {
					ex.other = append(ex.other, rel)
					continue
				}
				fi, err := storefile.Info(filepath.Join(data, qdir), f)
				if err != nil {
					return nil, err
				}
				ex.cq[rel] = fi.Size()
				sizes[fi.Size()]++
			}
		}
	}
	for s, n := range sizes {
		if s > 0 && (n > sizes[ex.cqSize] || n == sizes[ex.cqSize] && s > ex.cqSize) {
			ex.cqSize = s
		}
	}
	idx, err := rbReadDirOpt(filepath.Join(data, "index"))
	if err != nil {
		return nil, err
	}
	for _, f := range idx {
		if len(f.Name()) != rbIndexNameLen || strings.Trim(f.Name(), "0123456789") != "" || !f.Type().IsRegular() {
			ex.other = append(ex.other, filepath.Join("index", f.Name()))
			continue
		}
		ex.index = append(ex.index, f.Name())
		if ex.indexSize == 0 {
			if fi, err := f.Info(); err == nil {
				ex.indexSize = fi.Size()
			}
		}
	}
	sort.Strings(ex.index)
	return ex, nil
}

// rbReadDirOpt is os.ReadDir where a missing dir is empty.
func rbReadDirOpt(dir string) ([]os.DirEntry, error) {
	ents, err := storefile.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return ents, err
}
