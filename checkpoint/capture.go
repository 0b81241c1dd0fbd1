package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
	"golang.org/x/sys/unix"
)

// DefaultExcludes are never captured unless the project's own git tracks them.
var DefaultExcludes = []string{
	"node_modules/", ".env", ".env.*", "__pycache__/", ".git/", "venv/", ".venv/",
	"dist/", "build/", ".next/", "*.pyc", ".DS_Store",
}

// DefaultMaxFileSize is the size above which a file is skipped (100 MiB).
const DefaultMaxFileSize = 100 << 20

// Skipped is a file a capture left out, and why.
type Skipped struct {
	Path string
	Why  string // "over the size limit (N bytes)", "unreadable"
}

// skippedBy reports whether a path is one a capture skipped, or lies in a
// directory it skipped (named with a trailing "/").
func skippedBy(skipped []Skipped) func(string) bool {
	paths := map[string]bool{}
	var dirs []string
	for _, sk := range skipped {
		if d, ok := strings.CutSuffix(sk.Path, "/"); ok {
			dirs = append(dirs, d)
		}
		paths[sk.Path] = true
	}
	return func(p string) bool {
		for _, d := range dirs {
			if within(p, d) {
				return true
			}
		}
		return paths[p]
	}
}

// capture is the state of the work tree as a checkpoint holds it.
type capture struct {
	tree    string
	files   int
	skipped []Skipped
	held    *held           // what the rule held, and the repositories it found
	inTree  map[string]bool // the paths of tree
	meta    *meta
}

// writeExcludes writes the default excludes to the store's info/exclude. rewind
// does not read it (see rule.go); crucible's procedure, whose `git add -A` may
// share the store, honours them there.
func (s *Store) writeExcludes() error {
	var b bytes.Buffer
	b.WriteString("# written by rewind: the default excludes\n")
	for _, p := range DefaultExcludes {
		b.WriteString(p + "\n")
	}
	info := filepath.Join(s.gitDir(), "info")
	if err := os.MkdirAll(info, 0o700); err != nil {
		return err
	}
	return writeIfChanged(filepath.Join(info, "exclude"), b.Bytes(), 0o600)
}

// capture brings the store's index to the work tree's state, as the rule
// (rule.go) says a checkpoint holds it, and writes its tree. maxSize <= 0
// means no limit. A damaged index is deleted and the capture made again.
func (s *Store) capture(ctx context.Context, maxSize int64) (*capture, error) {
	if s.unsplitIndex() {
		// An index rewind wrote before it split its index: split it now, a
		// cost paid once. A failure is left to the capture, which reads the
		// index too and rebuilds a damaged one.
		start := time.Now()
		if _, err := s.git().Run(ctx, "update-index", "--split-index"); err == nil && time.Since(start) > migrationNote {
			s.warn("the store's index was split, once (%s): later checkpoints write only what changed", time.Since(start).Round(100*time.Millisecond))
		}
	}
	c, err := s.captureOnce(ctx, maxSize)
	if why, ok := indexDamaged(ctx, err); ok {
		if err := os.Remove(s.indexFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		s.warn("the store's index (a cache) was damaged (%s); deleted it and read the work tree afresh", why)
		return s.captureOnce(ctx, maxSize)
	}
	return c, err
}

// migrationNote is how long the one-time split of an index must take before
// rewind says why that checkpoint was slow.
var migrationNote = time.Second

// unsplitIndex reports whether the store's index is whole, as rewind before
// the split index wrote it: it exists and no shared part (git's
// sharedindex.<id>, beside it) does. Its first capture writes the shared part,
// a cost paid once.
func (s *Store) unsplitIndex() bool {
	if _, err := os.Lstat(s.indexFile()); err != nil {
		return false
	}
	shared, _ := filepath.Glob(filepath.Join(s.gitDir(), "sharedindex.*"))
	return len(shared) == 0
}

// compactIndex leaves the store's index with one shared part. The parts
// earlier indexes named stay a day after (so that a kill between git writing
// a new part and the index naming it never leaves an index without its part);
// a prune, which frees what is no longer needed, drops them at once. The index
// is first written whole, so that at every instant the index on disk is one
// git can read, then split again with every other shared part deleted.
func (s *Store) compactIndex(ctx context.Context) error {
	if _, err := os.Lstat(s.indexFile()); err != nil {
		return nil
	}
	whole := s.git()
	whole.SplitIndexFile = "" // core.splitIndex=false: write it whole
	if _, err := whole.Run(ctx, "update-index", "--no-split-index"); err != nil {
		return err
	}
	_, err := s.git().Run(ctx, "-c", "splitIndex.sharedIndexExpire=now", "update-index", "--split-index")
	return err
}

func (s *Store) captureOnce(ctx context.Context, maxSize int64) (*capture, error) {
	// Files changed from here on may have been hashed in the same second as
	// their change; see the end.
	start := time.Now()
	if err := s.writeExcludes(); err != nil {
		return nil, err
	}
	// The index is a cache of stat data: only paths new to it, and those git
	// sees differ from it, go through update-index. The other entries keep
	// their stat data and the index keeps its cached trees, so write-tree
	// rehashes only the directories that changed. The listing, the index's
	// paths and the stat walk only read, and run side by side.
	//
	// Which paths the index holds, and which of them changed, come from the
	// stat cache (statcache.go) when it describes the index as it is; else
	// git tells (ls-files, diff-files), beside the listing.
	g := s.git()
	var h *held
	var indexed, differ []byte
	stamp, cached := s.readStatCache()
	jobs := []func() error{func() (err error) { h, err = s.hold(ctx); return err }}
	if cached == nil {
		jobs = append(jobs,
			func() (err error) { indexed, err = g.Run(ctx, "ls-files", "-z", "--cached"); return err },
			func() (err error) {
				differ, err = g.Run(ctx, "diff-files", "-z", "--name-only", "--no-ext-diff")
				return err
			})
	}
	if err := parallel(jobs...); err != nil {
		return nil, err
	}
	for _, n := range h.notes {
		s.warn("%s", n)
	}
	inIndex := map[string]bool{}
	changed := map[string]bool{}
	var unchanged func(p string, k statKey) bool
	if cached != nil {
		for p := range cached {
			inIndex[p] = true
		}
		unchanged = func(p string, k statKey) bool {
			old, ok := cached[p]
			return ok && old == k && k != statKey{}
		}
	} else {
		for _, p := range splitNul(indexed) {
			inIndex[p] = true
		}
		for _, p := range splitNul(differ) {
			changed[p] = true
		}
		unchanged = func(p string, _ statKey) bool { return inIndex[p] && !changed[p] }
	}
	gitexec.TraceStep(fmt.Sprintf("listing (stat cache used: %v)", cached != nil), start)
	s.dirOK.Clear()
	walk := time.Now()
	keep, skipped := s.classify(h.paths, maxSize, unchanged)
	gitexec.TraceStep(fmt.Sprintf("stat walk of %d paths", len(h.paths)), walk)
	skipped = append(skipped, h.unreadable...)
	c := &capture{skipped: skipped, files: len(keep), held: h}
	want := make(map[string]bool, len(keep))
	c.inTree = want
	var update []string
	var fresh []verdict // regular files to hash
	for _, v := range keep {
		want[v.path] = true
		if v.unchanged {
			continue
		}
		update = append(update, v.path)
		if v.regular {
			fresh = append(fresh, v)
		}
	}
	// Whatever else the index holds (a file gone, ignored now, over the
	// limit, a path that became a directory) is dropped, so the tree is
	// exactly what the rule holds.
	var remove []string
	for p := range inIndex {
		if !want[p] {
			remove = append(remove, p)
		}
	}
	if len(remove) > 0 {
		if _, err := g.RunInput(ctx, nulJoin(remove), "update-index", "--force-remove", "-z", "--stdin"); err != nil {
			return nil, err
		}
	}
	s.prewrite(ctx, fresh)
	if len(update) > 0 {
		input := s.countPaths("hashing files", nulJoin(update), len(update), new(atomic.Int64))
		if _, err := g.RunInput(ctx, input, "update-index", "--add", "--remove", "--replace", "-z", "--stdin"); err != nil {
			return nil, err
		}
	}
	out, err := g.Run(ctx, "write-tree")
	if err != nil {
		return nil, err
	}
	c.tree = strings.TrimSpace(string(out))
	// git compares whole-second times here: a file rewritten at the same size
	// in the second it was hashed (its mtime even set back) would look
	// unchanged to every later checkpoint. Entries of files whose status
	// changed since the second this capture began leave the index, so the next
	// capture hashes them again.
	// The files hashed now are looked at again: one changed between the look
	// that judged it and the hash carries a stale time in v.
	recheck := time.Now()
	since := start.Truncate(time.Second)
	hashed := map[string]bool{}
	for _, p := range update {
		hashed[p] = true
	}
	var racy []string
	for _, v := range keep {
		changed := v.changed
		if hashed[v.path] {
			if fi, err := os.Lstat(filepath.Join(s.WorkTree, v.path)); err == nil {
				changed = later(ctime(fi), fi.ModTime())
			}
		}
		if !changed.Before(since) {
			racy = append(racy, v.path)
		}
	}
	if len(racy) > 0 {
		if _, err := g.RunInput(ctx, nulJoin(racy), "update-index", "--force-remove", "-z", "--stdin"); err != nil {
			return nil, err
		}
	}
	// The stat cache now: every path the index holds (those kept, less the
	// racy ones), with what the walk saw of it before any was hashed. Left
	// alone when nothing changed and the index is as it was.
	if now, err := indexStamp(s.indexFile()); len(update) > 0 || len(remove) > 0 || len(racy) > 0 || cached == nil || err != nil || !bytes.Equal(now, stamp) {
		left := map[string]bool{}
		for _, p := range racy {
			left[p] = true
		}
		entries := make(map[string]statKey, len(keep))
		for _, v := range keep {
			if !left[v.path] {
				entries[v.path] = v.key
			}
		}
		s.writeStatCache(entries)
	}
	gitexec.TraceStep(fmt.Sprintf("recent changes re-checked (%d left the index)", len(racy)), recheck)
	var unread []Skipped
	scan := time.Now()
	if c.meta, unread, err = s.buildMeta(ctx, h, keep); err != nil {
		return nil, err
	}
	gitexec.TraceStep("permission bits and empty directories", scan)
	c.skipped = append(c.skipped, unread...)
	return c, nil
}

// prewriteMin is the number of files to hash from which prewrite pays for its
// extra processes.
var prewriteMin = 2000

// prewrite writes the blobs of many files (a first checkpoint, a large
// change) with one update-index per CPU, side by side, each into a scratch
// index. The update-index on the store's index, which hashes and compresses on
// one core, then finds every blob written and only hashes: the compression and
// the writes, most of the cost, are shared out. It is only a head start: a
// file gone or changed meanwhile is for that update-index to judge, so
// failures here are ignored. Each share's blobs go into one pack (see
// gitexec.Shadow.PackBlobs), so that a large store's later write-trees find
// its blobs in memory rather than by a stat per loose file; the update-index
// after it writes no blob of its own for these files, it finds them there.
func (s *Store) prewrite(ctx context.Context, files []verdict) {
	if len(files) < prewriteMin {
		return
	}
	// Deal the files round-robin by size, largest first, so the shares weigh
	// about the same.
	sorted := append([]verdict(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].size > sorted[j].size })
	shares := make([][]string, runtime.NumCPU())
	written := new(atomic.Int64)
	for i, v := range sorted {
		shares[i%len(shares)] = append(shares[i%len(shares)], v.path)
	}
	var jobs []func() error
	for i, share := range shares {
		if len(share) == 0 {
			continue
		}
		g := s.git()
		g.PackBlobs = true // one pack per share, not a loose file per blob
		g.IndexFile = s.scratchFile(fmt.Sprintf("prewrite-index-%d", i))
		// Leftovers of a rewind killed here; the store lock is held.
		os.Remove(g.IndexFile)
		os.Remove(g.IndexFile + ".lock")
		defer os.Remove(g.IndexFile)
		jobs = append(jobs, func() error {
			// update-index, not hash-object: it never follows a symlink nor
			// opens a fifo, and --remove leaves out a file gone since.
			g.RunInput(ctx, s.countPaths("writing files", nulJoin(share), len(files), written), "update-index", "--add", "--remove", "-z", "--stdin")
			return nil
		})
	}
	parallel(jobs...)
}

// classify sorts out the paths to keep (existing regular files and symlinks
// under the limit and readable) and the skipped ones to report; the rest (gone,
// or not files) are left out. Stat calls run in parallel:
// this is the one walk a checkpoint costs.
func (s *Store) classify(paths []string, maxSize int64, unchanged func(string, statKey) bool) (keep []verdict, skipped []Skipped) {
	verdicts := make([]verdict, len(paths))
	// Runs of paths in one directory (git lists a directory's files
	// together), of at most 256 so that a flat tree still spreads over the
	// workers, each looked at through one descriptor of its directory.
	type run struct {
		dir        string
		start, end int // indices into paths
	}
	var runs []run
	for i := 0; i < len(paths); {
		d := path.Dir(paths[i])
		j := i + 1
		for j < len(paths) && j-i < 256 && path.Dir(paths[j]) == d {
			j++
		}
		runs = append(runs, run{d, i, j})
		i = j
	}
	forEach(len(runs), func(r int) {
		ds := openDirStat(s.WorkTree + "/" + runs[r].dir)
		defer ds.close()
		for i := runs[r].start; i < runs[r].end; i++ {
			verdicts[i] = s.judge(paths[i], maxSize, unchanged, ds)
		}
	})
	for i, v := range verdicts {
		switch {
		case v.keep:
			v.path = paths[i]
			keep = append(keep, v)
		case v.skip != nil:
			skipped = append(skipped, *v.skip)
		}
	}
	return keep, skipped
}

// verdict is what classify makes of a path.
type verdict struct {
	path    string
	keep    bool
	regular bool // a regular file (else a symlink), when kept
	size    int64
	perm    os.FileMode
	changed time.Time // the later of its ctime and mtime
	skip    *Skipped

	key       statKey // what the stat cache compares
	unchanged bool    // the store's index holds it as it is: not hashed again
}

// judge looks at one path; unchanged says whether the store's index holds it
// as it is, given its stat (then it is not read again, so the readability
// check is spared: a chmod or an ACL change moves the ctime).
func (s *Store) judge(rel string, maxSize int64, unchanged func(string, statKey) bool, ds dirStat) (v verdict) {
	if hasGitComponent(rel) || s.symlinkParent(rel) {
		// below a symlink: git refuses the path ("beyond a symbolic link"),
		// and the symlink itself is captured as a symlink
		return v
	}
	if why := refusedName(rel); why != "" {
		v.skip = &Skipped{Path: rel, Why: why}
		return v
	}
	full := s.WorkTree + "/" + rel // rel is clean, and never empty
	fi, err := ds.lstat(full, path.Base(rel))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return v // gone: update-index --remove drops it
	case err != nil:
		v.skip = &Skipped{Path: rel, Why: "cannot be read: " + errText(err)}
		return v
	}
	v.perm, v.changed, v.key = fi.Mode().Perm(), later(ctime(fi), fi.ModTime()), keyOf(fi)
	v.unchanged = unchanged(rel, v.key)
	switch {
	case fi.Mode()&os.ModeSymlink != 0 && strings.EqualFold(path.Base(rel), ".gitmodules"):
		v.skip = &Skipped{Path: rel, Why: "git cannot store a symlink named .gitmodules"}
	case fi.Mode()&os.ModeSymlink != 0:
		v.keep = true
	case fi.IsDir():
		// a tracked path that is now a directory: its files are listed
	case !fi.Mode().IsRegular():
		v.skip = &Skipped{Path: rel, Why: fmt.Sprintf("not a file git can store (%s)", fi.Mode().Type())}
	case maxSize > 0 && fi.Size() > maxSize:
		v.skip = &Skipped{Path: rel, Why: fmt.Sprintf("over the size limit (%d bytes)", fi.Size())}
	case !v.unchanged && unix.Access(full, unix.R_OK) != nil:
		v.skip = &Skipped{Path: rel, Why: "unreadable"}
	default:
		v.keep, v.regular, v.size = true, true, fi.Size()
	}
	return v
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// refusedName says why git cannot store a path in a tree whatever it is told
// (a component that is ".git" in another case; judge checks the other such
// name, a symlink named .gitmodules), or "" when it can.
func refusedName(rel string) string {
	for part := range strings.SplitSeq(rel, "/") {
		if strings.EqualFold(part, ".git") {
			return fmt.Sprintf("git cannot store a path named %q", part)
		}
	}
	return ""
}

// symlinkParent reports whether a directory above rel is a symlink (or not a
// directory at all), as when a captured directory was replaced by a symlink.
// Answers are cached per directory: classify asks once per file.
func (s *Store) symlinkParent(rel string) bool {
	d := path.Dir(rel)
	if d == "." {
		return false
	}
	if v, ok := s.dirOK.Load(d); ok {
		return !v.(bool)
	}
	bad := s.symlinkParent(d)
	if !bad {
		fi, err := os.Lstat(filepath.Join(s.WorkTree, d))
		bad = err == nil && !fi.IsDir()
	}
	s.dirOK.Store(d, !bad)
	return bad
}

// hasGitComponent reports whether a path lies inside a .git directory: those are
// never captured, a nested repository's included.
func hasGitComponent(rel string) bool {
	for part := range strings.SplitSeq(rel, "/") {
		if part == ".git" {
			return true
		}
	}
	return false
}

// forEach calls fn(0) to fn(n-1) from a few goroutines, for work that waits
// on the file system (stat calls, directory reads): a few per CPU keep the
// CPUs busy while others wait. Indices are handed out in batches, so that
// handing them out costs little beside the calls.
func forEach(n int, fn func(i int)) {
	const batch = 64
	workers := runtime.NumCPU() * 4
	if max := (n + batch - 1) / batch; workers > max {
		workers = max
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				start := int(next.Add(batch)) - batch
				if start >= n {
					return
				}
				for i := start; i < min(start+batch, n); i++ {
					fn(i)
				}
			}
		}()
	}
	wg.Wait()
}

// parallel runs fns at once and returns the first error, after all have ended.
func parallel(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func splitNul(b []byte) []string {
	var out []string
	for _, p := range bytes.Split(b, []byte{0}) {
		if len(p) > 0 {
			out = append(out, string(p))
		}
	}
	return out
}

func nulJoin(paths []string) *bytes.Reader {
	var b bytes.Buffer
	for _, p := range paths {
		b.WriteString(p)
		b.WriteByte(0)
	}
	return bytes.NewReader(b.Bytes())
}

func dedupe(paths []string) []string {
	seen := make(map[string]bool, len(paths))
	out := paths[:0]
	for _, p := range paths {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
