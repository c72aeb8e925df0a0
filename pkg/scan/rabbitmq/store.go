package rabbitmq

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/storectl/storectl/internal/fileview"
	"github.com/storectl/storectl/internal/parallel"
	"github.com/storectl/storectl/internal/storefile"

	"github.com/storectl/storectl/pkg/scan"
)

// MaxFileSize bounds the .rdq files read whole into memory. The default
// msg_store_file_size_limit is 16 MiB, a file can exceed it by one record,
// and RabbitMQ's hard message size cap is 512 MiB (MAX_MSG_SIZE), so 1 GiB
// holds any file a broker writes while bounding memory on garbage.
const MaxFileSize = 1 << 30

func hexID(id [16]byte) string { return hex.EncodeToString(id[:]) }

// scanner holds what one store's files share.
type scanner struct {
	root  string
	ver   brokerVersion
	opts  scan.Options
	clean *CleanIndex
	// seen holds every msg id met so far (its first copy) and, in lean
	// mode, every referenced id: one pointer-free map for both.
	seen  *idTable
	paths []string // idEntry.path() - 1 indexes it
	abs   []string // the same files' absolute paths
	nums  []int64  // and their numbers
	// rewalks counts the files walked again (recordsOf), for tests.
	rewalks int
	termCnt map[string]int
	// ready, when set, is waited for before the first status is assigned:
	// the queue indexes are read while the first files are walked.
	ready     func()
	readyOnce sync.Once
	lrefs     *leanRefs    // the queues' references (nil: references unknown)
	lidx      *leanIndex   // the off-heap msg_store_index.ets (clean_lean.go)
	cdig      *cleanDigest // or its digest (clean_digest.go)
	// spill holds released files' long victim lists (victim_spill.go): its own
	// object, since the findings that point into it outlive the scanner.
	spill *victimSpill
	// dropVictims: nothing reads a released file's victim lists (the
	// scanner is freed before its caller could), so spillVictims keeps
	// only their summaries (victim_spill.go).
	dropVictims bool
	// vfeed, in a spilled verify, sorts the victims as files are
	// released (verify_spill.go).
	vfeed *victimFeed
	// each is VHostOptions.EachFile bound to its vhost; eachErr is the
	// first error it returned (the files after it are not handed over).
	each    func(*FileScan) error
	eachErr error
	// sj is the spilled join (joinspill.go) when the scan takes its
	// statuses from it instead of seen; joinErr says a file changed
	// between its two walks.
	sj      *spilledJoin
	joinErr error
}

// prepare waits for what classify needs (queue references).
func (s *scanner) prepare() {
	if s.ready != nil {
		s.readyOnce.Do(s.ready)
	}
}

func newScanner(root string, ver brokerVersion, opts scan.Options) *scanner {
	return &scanner{root: root, ver: ver, opts: opts, seen: newIDTable(), termCnt: map[string]int{},
		spill: &victimSpill{file: scan.Spill{Pattern: "storectl-victims-*"}}}
}

func (s *scanner) rel(p string) string { return scan.Rel(s.root, p) }

// free gives back the scanner's off-heap tables and closes its temp file
// (the spilled victim lists) now rather than when the collector finds
// them unreachable (off-heap memory does not make it run). The scanner,
// and the spilled lists of its files' hazards, must not be used
// afterwards.
func (s *scanner) free() {
	if s.vfeed != nil {
		s.vfeed.vics.Close()
		s.vfeed = nil
	}
	s.spill.file.Close()
	s.sj.close()
	s.seen.free()
	if s.lidx != nil {
		s.lidx.ents.Free()
		s.lidx.byPlace.Free()
		s.lidx.idx.free()
		s.lidx = nil
	}
}

// rdqFile is an .rdq found in a store dir.
type rdqFile struct {
	path string
	num  int64
}

// listRDQ lists the .rdq files of dir in numeric order (non-numeric names
// last, by name).
func listRDQ(dir string) ([]rdqFile, error) {
	ents, err := storefile.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []rdqFile
	for _, e := range ents {
		if !isRDQ(dir, e) {
			continue
		}
		out = append(out, rdqFile{filepath.Join(dir, e.Name()), rdqNumber(e.Name())})
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if (a.num < 0) != (b.num < 0) {
			return a.num >= 0
		}
		if a.num != b.num {
			return a.num < b.num
		}
		return a.path < b.path
	})
	return out, nil
}

// isRDQ reports whether an entry of the store dir is a message store
// file (a symlink to one included: the broker opens it by path). A dir,
// FIFO, socket or device named like one is listed too: its open fails
// (storefile refuses it without blocking) and it is reported like any
// .rdq that cannot be read, its messages unknown, not missing.
func isRDQ(dir string, e os.DirEntry) bool {
	if !strings.HasSuffix(e.Name(), ".rdq") {
		return false
	}
	if storefile.IsRegular(dir, e) {
		return true
	}
	_, irregular := storefile.Irregular(dir, e)
	return irregular
}

// rdqShape returns how many .rdq files dir holds and the largest one's
// size (0, 0 when it cannot be listed): what the id table's packing needs
// to know before the scan.
func rdqShape(dir string) (files int, maxSize int64) {
	ents, err := storefile.ReadDir(dir)
	if err != nil {
		return 0, 0
	}
	for _, e := range ents {
		if !isRDQ(dir, e) || !storefile.IsRegular(dir, e) {
			continue
		}
		if info, err := storefile.Info(dir, e); err == nil {
			files++
			maxSize = max(maxSize, info.Size())
		}
	}
	return files, maxSize
}

func rdqNumber(name string) int64 {
	s := strings.TrimSuffix(filepath.Base(name), ".rdq")
	if s == "" || len(s) > 18 || strings.TrimLeft(s, "0123456789") != "" {
		return -1
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return -1
	}
	return n
}

// fileJob is one .rdq file between the phases of a scan: mapped and
// walked (in parallel), classified (in file order), analysed for scanner
// hazards (in parallel), handed to the record callback and EachFile (in
// file order), unmapped and released.
type fileJob struct {
	fs   *FileScan
	view *fileview.File
	b    []byte
	// reached tells the mapping how far a pass over b is (fileview.Stream:
	// the pages a window behind go); a no-op when b is not mapped.
	reached func(off int64)
	idx     int // index in the store's listing
	// classified: the ordered phase gave the records their statuses (the
	// record callback gets them then).
	classified bool
	// kept is the bytes of keptMaps the file holds: its mapping keeps
	// every page it maps until close (0: streamed, released between passes).
	kept int64
}

// keptMaps bounds the bytes of .rdq mappings held whole from the walk to
// the file's last pass (the hazard models, the record callback), across
// every scan of the process. A file's passes then fault its pages in once:
// each fault of a warm file maps at most the kernel's fault-around (64 KiB)
// of small folios, and the walk alone is one fault per 64 KiB; letting the
// pages go between passes (and a window behind each pass) faulted the
// hazard models' reads in again and unmapped everything twice. A file
// that does not fit (more than it, or --jobs files of 16 MiB beyond it)
// streams and releases as before, so memory stays bounded whatever the
// file size and --jobs.
var keptMaps = keepBudget{limit: 64 << 20}

// keptMaxRecords is the most records a file whose pages are kept may
// hold. A scan of small messages holds most of its memory in the records
// of the files in flight (a 16 MiB file of 100-200-byte bodies makes
// 44,000, several MB of heap each with the collector's headroom), and
// with their pages kept on top its peak RSS passed 100 MiB (87 -> 105-111
// MiB, 1 GiB store of 100-200-byte bodies); a file of larger messages has
// few records and its pages are most of what it holds.
const keptMaxRecords = 8192

// keepBudget is a byte budget taken without waiting: a caller that does
// not get its bytes does without.
type keepBudget struct {
	mu          sync.Mutex
	limit, used int64
}

// take reserves n bytes if they fit.
func (k *keepBudget) take(n int64) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if n <= 0 || k.used+n > k.limit {
		return false
	}
	k.used += n
	return true
}

// give returns n bytes taken before.
func (k *keepBudget) give(n int64) {
	if n == 0 {
		return
	}
	k.mu.Lock()
	k.used -= n
	k.mu.Unlock()
}

// open maps a whole file read-only (internal/fileview: no copy, pages the
// scan brings in are dropped again at close) and walks it. The walk is
// the hot path and needs nothing from other files. A file that fits in
// keptMaps keeps the pages it maps until close, so its later passes fault
// nothing in again; any other holds about two windows of pages as a pass
// goes (Stream), none between passes (Release): the process does not keep
// more than keptMaps of whole files, whatever --jobs.
func (s *scanner) open(ctx context.Context, f rdqFile, current, transient bool) (j *fileJob) {
	fs := &FileScan{Path: s.rel(f.path), Abs: f.path, Number: f.num, Current: current, Transient: transient}
	j = &fileJob{fs: fs}
	if err := ctx.Err(); err != nil {
		fs.Err = err
		return j
	}
	v, err := fileview.Open(f.path)
	if err != nil {
		fs.Err = err
		return j
	}
	j.view = v
	if v.Size() > MaxFileSize {
		fs.Err = fmt.Errorf("%s: %d bytes, more than the %d this scanner reads", f.path, v.Size(), MaxFileSize)
		return j
	}
	v.Progress = s.opts.Progress
	defer fileview.Guard(&fs.Err)()
	b, reached, err := v.Stream()
	if err != nil {
		fs.Err = err
		return j
	}
	var found int // records the walk has found
	if v.Mapped() && keptMaps.take(int64(len(b))) {
		// No drops behind the passes, no Release between them: close
		// unmaps the file. A file of more than keptMaxRecords records
		// streams from where the walk finds that out.
		j.kept = int64(len(b))
		stream := reached
		reached = func(off int64) {
			if j.kept > 0 && found > keptMaxRecords {
				keptMaps.give(j.kept)
				j.kept = 0
			}
			if j.kept == 0 {
				stream(off)
			}
		}
	}
	j.b, j.reached = b, reached
	fs.Size = int64(len(b))
	walkCounted(b, fs, reached, &found)
	if j.kept > 0 && found > keptMaxRecords { // past the walk's last report
		keptMaps.give(j.kept)
		j.kept = 0
	}
	j.release()
	return j
}

// release lets go of a streamed file's pages between its passes; a kept
// file keeps them.
func (j *fileJob) release() {
	if j.kept == 0 {
		j.view.Release()
	}
}

// ordered runs the phase that depends on earlier files: statuses
// (duplicates: the first copy in file order wins) and the record callback.
func (s *scanner) ordered(j *fileJob, transient bool) {
	if s.lidx != nil && !transient {
		s.lidx.join(j.fs) // also a file that failed part way: its records so far
	}
	fs := j.fs
	if s.cdig != nil && !transient && (fs.Err == nil || len(fs.Records) > 0) {
		// Every file whose records the join took, classified or not (one
		// that failed part way, one past maxPaths): a later one with the
		// same number overrides places.
		s.cdig.file(fs.Number)
	}
	if fs.Err != nil {
		if s.sj != nil && !transient && s.sj.count[j.idx] >= 0 && s.joinErr == nil {
			// The prepass read it: its records are in the join.
			s.joinErr = fmt.Errorf("%s could be read before and not now: %w", fs.Abs, fs.Err)
		}
		return
	}
	if len(s.paths) >= maxPaths {
		fs.Err = fmt.Errorf("%s: more than %d .rdq files in one scan", fs.Abs, maxPaths)
		return
	}
	s.paths, s.abs, s.nums = append(s.paths, fs.Path), append(s.abs, fs.Abs), append(s.nums, fs.Number)
	pi := int32(len(s.paths))
	if s.sj != nil && !transient {
		if err := s.sj.load(j.idx, len(fs.Records)); err != nil {
			fs.Err = err
			s.joinErr = err
			return
		}
		var tc termCounts
		for k, r := range fs.Records {
			s.classifySpilled(r, s.sj.cur[k])
			tc.add(s.termCnt, r.Term)
			if r.Status == StatusReferenced {
				fs.LastReferencedEnd = r.End()
			}
		}
		tc.addTo(s.termCnt)
		j.classified = true
		return
	}
	var tc termCounts
	defer tc.addTo(s.termCnt)
	for i, r := range fs.Records {
		if i%warmBatch == 0 && !transient {
			recs := fs.Records[i:min(i+warmBatch, len(fs.Records))]
			s.seen.warm(len(recs), func(k int) *[16]byte { return &recs[k].MsgID })
		}
		s.classify(fs, r, transient, pi)
		tc.add(s.termCnt, r.Term)
		if r.Status == StatusReferenced {
			fs.LastReferencedEnd = r.End()
		}
	}
	j.classified = true
}

// termCounts counts one file's records by the three terms a walk names
// (termNames), added to termCnt once the file is done: a map update a
// record was 2% of a small-message scan's instructions, in the ordered
// phase every file waits its turn for.
type termCounts [len(termNames)]int

// add counts term (another term straight into m).
func (c *termCounts) add(m map[string]int, term string) {
	for i, t := range termNames {
		if term == t {
			c[i]++
			return
		}
	}
	m[term]++
}

// addTo adds the counts to m (the terms counted only: m's keys are the
// terms seen, as when each record added its own).
func (c *termCounts) addTo(m map[string]int) {
	for i, n := range c {
		if n > 0 {
			m[termNames[i]] += n
		}
	}
}

// analyse runs the scanner-generation models on the file (they need only
// its own records and statuses).
func (j *fileJob) analyse() {
	if j.fs.Err == nil {
		defer fileview.Guard(&j.fs.Err)()
		hazards(j.b, j.fs, j.reached)
		j.release()
	}
}

// records hands the file's records to the record callback, each with the
// hazards that lose it (lost_by: the whole of the victim lists, which
// findings only sum up). It runs in file order, after analyse.
func (s *scanner) records(j *fileJob) {
	fs := j.fs
	if s.opts.Records == nil || !j.classified {
		return
	}
	var lost map[int64][]LostBy
	for i := range fs.Hazards {
		h := &fs.Hazards[i]
		if lost == nil {
			lost = map[int64][]LostBy{}
		}
		for _, v := range h.Victims { // not spilled yet: that is release's
			lost[v.Offset] = append(lost[v.Offset], LostBy{Code: h.Code, Offset: h.Offset, Versions: h.Versions})
		}
	}
	err := func() (err error) {
		defer fileview.Guard(&err)()
		for _, r := range fs.Records {
			j.reached(r.Offset)
			rj := newRecordJSON(j.b, r)
			rj.LostBy = lost[r.Offset]
			if err = s.opts.Records(rj); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil && fs.Err == nil {
		fs.Err = err
	}
}

// close unmaps the file (and gives back what it kept of keptMaps).
func (j *fileJob) close() {
	j.b = nil
	if j.view != nil {
		j.view.Close()
		j.view = nil
	}
	keptMaps.give(j.kept)
	j.kept = 0
}

// scanFile scans one file: records, statuses, hazards, record callback.
func (s *scanner) scanFile(ctx context.Context, f rdqFile, current, transient bool) *FileScan {
	j := s.open(ctx, f, current, transient)
	s.ordered(j, transient)
	j.analyse()
	s.records(j)
	j.close()
	return j.fs
}

// indexEntry keeps the msg_store_index.ets entry of r, which puts r's id
// elsewhere (FileScan.IndexEntries).
func (fs *FileScan) indexEntry(r *Record, e IndexEntry) {
	if fs.IndexEntries == nil {
		fs.IndexEntries = map[int64]IndexEntry{}
	}
	fs.IndexEntries[r.Offset] = e
}

// classify sets a record's status, references and index agreement.
// pi is 1 + the index of r's file in s.paths.
func (s *scanner) classify(fs *FileScan, r *Record, transient bool, pi int32) {
	r.ReferencedBy = []string{}
	if transient {
		r.Status = StatusUnreferenced
		return
	}
	slot, e := s.seen.lookup(r.MsgID) // one search of the table for the read and the store below
	if s.lrefs != nil && e.set > 0 {
		r.ReferencedBy = s.lrefs.sets[e.set-1]
	}
	if s.cdig != nil && e.set > 0 {
		// The digest's: the id's one entry is its first copy's, if the
		// digests agree (else the vhost is scanned again).
		r.IndexMatch = "match"
		if e.path() > 0 {
			r.IndexMatch = "mismatch"
		}
	} else if s.lidx != nil {
		var ie IndexEntry
		r.IndexMatch, ie = s.lidx.indexMatch(r)
		if r.IndexMatch == "mismatch" {
			fs.indexEntry(r, ie)
		}
	}
	if p := e.path(); p > 0 {
		r.Status, r.FirstPath, r.FirstOffset = StatusDuplicate, s.paths[p-1], int64(e.off)
		return
	}
	e.setPath(pi)
	e.off = uint32(r.Offset)
	if s.cdig != nil && e.set > 0 {
		s.cdig.record(s.nums[pi-1], r, len(s.lrefs.sets[e.set-1]))
	}
	s.seen.store(slot, r.MsgID, e)
	switch {
	case s.lrefs == nil:
		r.Status = StatusUnknown
	case len(r.ReferencedBy) > 0:
		r.Status = StatusReferenced
	default:
		r.Status = StatusUnreferenced
	}
}

// classifySpilled is classify from the spilled join's decision (an
// unclean store: no index to agree with).
func (s *scanner) classifySpilled(r *Record, f recFate) {
	r.ReferencedBy = []string{}
	if f.set > 0 {
		r.ReferencedBy = s.lrefs.sets[f.set-1]
	}
	if f.first > 0 {
		r.Status, r.FirstPath, r.FirstOffset = StatusDuplicate, s.sj.rel[f.first-1], int64(f.off)
		return
	}
	if len(r.ReferencedBy) > 0 {
		r.Status = StatusReferenced
	} else {
		r.Status = StatusUnreferenced
	}
}

// recordsOf walks file p (1 + index in s.paths) again and returns the
// offset and size of the first copy of each id in it: the id table keeps
// where a first copy starts, not its size, and only an index entry that
// does not hold its record asks for it (cleanIndexFindingsLean, once per
// file). The same bytes give the same records; nil if the file can no
// longer be read.
func (s *scanner) recordsOf(p int32) map[[16]byte][2]int64 {
	s.rewalks++
	again := &FileScan{Path: s.paths[p-1], Number: s.nums[p-1]}
	func() {
		v, err := fileview.Open(s.abs[p-1])
		if err != nil {
			return
		}
		defer v.Close()
		var b []byte
		var reached func(int64)
		defer fileview.Guard(&err)()
		if b, reached, err = v.Stream(); err == nil && int64(len(b)) <= MaxFileSize {
			walk(b, again, reached)
		}
	}()
	m := make(map[[16]byte][2]int64, len(again.Records))
	for _, r := range again.Records {
		if _, ok := m[r.MsgID]; !ok {
			m[r.MsgID] = [2]int64{r.Offset, r.TotalSize}
		}
	}
	return m
}

// scanStore scans every .rdq of a store dir: opts.Jobs files at once,
// with statuses and record callbacks in numeric file order, so the result
// is the same whatever Jobs is.
func (s *scanner) scanStore(ctx context.Context, dir string, transient bool) ([]*FileScan, error) {
	var files []rdqFile
	var err error
	if s.sj != nil && !transient {
		if s.sj.listErr != nil {
			return nil, s.sj.listErr
		}
		files = s.sj.files // the prepass's listing: the join's file indexes
	} else if files, err = listRDQ(dir); err != nil {
		return nil, err
	}
	maxNum := int64(-1)
	for _, f := range files {
		maxNum = max(maxNum, f.num)
	}
	out := make([]*FileScan, len(files))
	turn := make([]chan struct{}, len(files)+1)   // turn[i] closes when file i may run its ordered phase
	handed := make([]chan struct{}, len(files)+1) // handed[i] closes when file i may go to s.each
	for i := range turn {
		turn[i], handed[i] = make(chan struct{}), make(chan struct{})
	}
	close(turn[0])
	close(handed[0])
	// parallel.For hands files out in order: file i's predecessors are all
	// taken, so turns always advance.
	parallel.For(len(files), s.opts.Jobs, func(i int) {
		f := files[i]
		j := s.open(ctx, f, f.num == maxNum || f.num < 0, transient)
		j.idx = i
		<-turn[i]
		s.prepare()
		s.ordered(j, transient)
		close(turn[i+1])
		j.analyse()
		if s.each != nil || s.opts.Records != nil {
			<-handed[i]
			s.records(j)
			if s.each != nil && s.eachErr == nil {
				s.eachErr = s.each(j.fs)
			}
			close(handed[i+1])
		}
		j.close()
		s.feedVictims(i, j.fs)
		s.release(j.fs)
		out[i] = j.fs
	})
	return out, nil
}

// StoreRecords returns, by offset, the records the scan's walk takes in
// the persistent store file(s) numbered num of vhostDir (statuses unset;
// a later file with the same number wins where both have a record, as a
// place lookup of the scan does; a file that cannot be read adds the
// records read before the fault, none when it cannot be opened). It is
// for the few places a caller of the streaming scan must look at before
// the scan hands their file over (salvage: where msg_store_index.ets puts
// an id whose first copy is elsewhere).
func StoreRecords(vhostDir string, num int64) (map[int64]Record, error) {
	files, err := listRDQ(filepath.Join(vhostDir, "msg_store_persistent"))
	if err != nil {
		return nil, err
	}
	out := map[int64]Record{}
	for _, f := range files {
		if f.num != num {
			continue
		}
		s := &scanner{root: vhostDir}
		j := s.open(context.Background(), f, false, false)
		for _, r := range j.fs.Records {
			out[r.Offset] = *r
		}
		j.close() // the records copied their ids: no hazards wanted
	}
	return out, nil
}
