package scan

import (
	"path/filepath"
	"sort"

	"github.com/storectl/storectl/internal/storefile"
	rmq "github.com/storectl/storectl/pkg/format/rocketmq"
)

// OffsetFile is one RocketMQ mapped file of a dir: a regular file named by
// the 20-digit offset of its first byte (commitlog, consume queue,
// timerlog and DLedger data/index files share the naming).
type OffsetFile struct {
	Name string // the 20-digit name
	Path string // dir joined with Name
	Base int64  // the offset the name parses to
	Size int64
}

// OffsetFiles lists the mapped files of dir sorted by Base. Entries whose
// name is not 20 digits that fit an int64 (rmq.ParseFileName), and
// entries that are not regular files (dirs, symlinks, FIFOs, ...), are
// left out; scanners that report such entries list the dir themselves.
// dir is read with storefile.ReadDir, so a missing dir's error satisfies
// errors.Is(err, fs.ErrNotExist).
func OffsetFiles(dir string) ([]OffsetFile, error) {
	out, _, err := OffsetFilesIrregular(dir)
	return out, err
}

// OffsetFilesIrregular is OffsetFiles, and apart from them the entries
// named like a mapped file that are there but cannot be read as one: a
// dir, FIFO, socket or device, or a symlink to one (storefile.Irregular;
// Size 0). What the store kept under such a name is unknown, not absent.
func OffsetFilesIrregular(dir string) (files, irregular []OffsetFile, err error) {
	ents, err := storefile.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		base, err := rmq.ParseFileName(e.Name())
		if err != nil {
			continue
		}
		if !e.Type().IsRegular() {
			if _, ok := storefile.Irregular(dir, e); ok {
				irregular = append(irregular, OffsetFile{Name: e.Name(), Path: filepath.Join(dir, e.Name()), Base: base})
			}
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, nil, err
		}
		files = append(files, OffsetFile{Name: e.Name(), Path: filepath.Join(dir, e.Name()), Base: base, Size: info.Size()})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Base < files[j].Base })
	sort.Slice(irregular, func(i, j int) bool { return irregular[i].Base < irregular[j].Base })
	return files, irregular, nil
}
