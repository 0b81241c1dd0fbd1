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
	"slices"
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
	held    *held       // what the rule held, and the repositories it found
	inTree  sortedPaths // the paths of tree
	looked  []verdict   // what the walk saw of each path of inTree, in its order
	meta    *meta
	// imported is the pack an import wrote: see keepImport
	imported importedPack
	// lookup reads tree's entries for heldAsIs (treeLookup)
	lookupOnce sync.Once
	lookup     *treeLookup
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
	s.releaseImports()
	if s.unsplitIndex() {
		// An index rewind wrote before it split its index: split it now, a
		// cost paid once. A failure is left to the capture, which reads the
		// index too and rebuilds a damaged one.
		start := time.Now()
		if _, err := s.git().Run(ctx, "update-index", "--split-index"); err == nil && time.Since(start) > migrationNote {
			s.warn("the store's index was split, once (%s): later checkpoints write only what changed", time.Since(start).Round(100*time.Millisecond))
		}
	}
	// A store with checkpoints but no listing cache (an older rewind's)
	// builds it now: a full walk, paid once, and said so when it is slow.
	_, indexErr := os.Lstat(s.indexFile())
	_, cacheErr := os.Lstat(s.listCacheFile())
	building := indexErr == nil && errors.Is(cacheErr, os.ErrNotExist)
	start := time.Now()
	c, err := s.captureOnce(ctx, maxSize)
	if changedWhileHashed(ctx, err) {
		// A file the walk saw was a directory, or below a symlink, by the
		// time update-index hashed it (which refuses it): a change made
		// during the capture. The index holds none of the files (its
		// removals may be done, which the stat cache's stamp then tells):
		// once more sees the change.
		s.warnTrace("update-index: %v", err)
		c, err = s.captureOnce(ctx, maxSize)
	}
	if err == nil && building && c.held.inputs != nil && time.Since(start) > migrationNote {
		if _, err := os.Lstat(s.listCacheFile()); err == nil {
			s.warn("read the whole work tree once to build the store's listing cache (%s): later checkpoints read only what changed", time.Since(start).Round(100*time.Millisecond))
		}
	}
	if why, ok := indexDamaged(ctx, err); ok {
		if err := os.Remove(s.indexFile()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		s.warn("the store's index (a cache) was damaged (%s); deleted it and read the work tree afresh", why)
		return s.captureOnce(ctx, maxSize)
	}
	return c, err
}

// changedWhileHashed reports whether err is update-index refusing a path
// it was to hash because it is now a directory, or below a symlink.
func changedWhileHashed(ctx context.Context, err error) bool {
	var ge *gitexec.Error
	return ctx.Err() == nil && errors.As(err, &ge) &&
		(strings.Contains(ge.Stderr, "is a directory - add files inside instead") || strings.Contains(ge.Stderr, "is beyond a symbolic link"))
}

// migrationNote is how long a one-time cost (the split of an index, the
// building of the listing cache) must take before rewind says why that
// checkpoint was slow.
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
	s.cacheWrites.Wait() // an earlier capture's, in this process
	if _, local := fsKind(s.WorkTree); !local {
		lstatOrdinary() // see fstatat
	}
	// Files changed from here on may have been hashed in the same second as
	// their change; see the end.
	start := time.Now()
	// The shared part the index names now: when the capture's index names
	// another, this one goes (dropSharedPart).
	sharedBefore := make(chan string, 1)
	go func() { sharedBefore <- namedSharedPart(s.indexFile()) }()
	// A directory changed just before the capture began, or since, may have
	// changed while git listed it: the listing cache keeps it to list again
	// (dirRacyCut).
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
	var indexed []byte
	var differ []string // the index's files not as it holds them
	var cached *statCache
	var trusted, fine bool
	var listing *listCache
	var differWarn string
	// The lstat of every file, the longest step, runs beside the listing:
	// rewind's own (differFromCache) when the stat cache describes the
	// index, else git's diff-files.
	err := parallel(
		func() error {
			if cached = s.readStatCache(); cached != nil && ownLook {
				look := time.Now()
				differ = s.differFromCache(cached)
				gitexec.TraceStep(fmt.Sprintf("lstat of the index's %d files (%d not as the stat cache holds them)", len(cached.paths)-cached.held, len(differ)), look)
				return nil
			}
			out, warn, err := g.RunWarn(ctx, "diff-files", "-z", "--name-only", "--no-ext-diff")
			differ, differWarn = splitNul(out), warn
			return err
		},
		func() (err error) {
			trusted, fine = s.dirCacheTrusted()
			h, listing, err = s.hold(ctx, trusted)
			return err
		})
	if err != nil {
		return nil, err
	}
	dirsSince := dirRacyCut(start, fine)
	var jobs []func() error
	if cached == nil {
		jobs = append(jobs, func() (err error) { indexed, err = g.Run(ctx, "ls-files", "-z", "--cached"); return err })
	}
	if err := parallel(jobs...); err != nil {
		return nil, err
	}
	for _, n := range h.notes {
		s.warn("%s", n)
	}
	// Paths in order, as the index and the stat cache hold theirs, so that
	// the two are compared in one pass.
	paths := h.paths
	if !sort.StringsAreSorted(paths) {
		paths = append([]string(nil), paths...)
		sort.Strings(paths)
	}
	var inIndex []string // the index's paths, in order
	var unchanged func(i int, k statKey) bool
	var known func(i int) (statKey, bool)
	var heldByID func(i int) bool // whether the index holds paths[i] by id (nil: none)
	refresh := false
	// A file diff-files could not look at (a directory without search
	// permission: git says so on stderr, and leaves it out) is not known to
	// be as the index holds it: then every file is looked at.
	if cached != nil && strings.TrimSpace(differWarn) != "" {
		gitexec.TraceStep("diff-files could not look at every file: all looked at", start)
		cached = nil
		var err error
		if indexed, err = g.Run(ctx, "ls-files", "-z", "--cached"); err != nil {
			return nil, err
		}
	}
	if cached != nil {
		inIndex = cached.paths
		prior := make([]int32, len(paths)) // 1 + the cache's entry for paths[i], or 0
		j := 0
		for i, p := range paths {
			for j < len(inIndex) && inIndex[j] < p {
				j++
			}
			if j < len(inIndex) && inIndex[j] == p {
				prior[i] = int32(j + 1)
			}
		}
		priorKey := func(i int) statKey {
			if prior[i] == 0 {
				return statKey{}
			}
			return cached.keys[prior[i]-1]
		}
		// A file the index holds by id is always looked at, and is as the
		// index holds it when its stat data is what the cache holds. Of the
		// others, what git found differs from the index is looked at; the
		// rest is as the index, and so the cache, holds it. Past byIDMax
		// files held by id, those unchanged get git's stat data (refresh):
		// else git's diff-files would name ever more of them.
		heldByID = func(i int) bool { return prior[i] != 0 && cached.byID[prior[i]-1] }
		for _, p := range differ {
			if i, ok := slices.BinarySearch(paths, p); ok && !heldByID(i) {
				prior[i] = 0
			}
		}
		refresh = cached.held > byIDMax
		known = func(i int) (statKey, bool) { return priorKey(i), prior[i] != 0 && !heldByID(i) }
		unchanged = func(i int, k statKey) bool {
			return k != statKey{} && priorKey(i) == k
		}
	} else {
		inIndex = splitNul(indexed)
		sort.Strings(inIndex)
		listed := make(map[string]bool, len(inIndex))
		for _, p := range inIndex {
			listed[p] = true
		}
		changed := map[string]bool{}
		for _, p := range differ {
			changed[p] = true
		}
		known = func(int) (statKey, bool) { return statKey{}, false }
		unchanged = func(i int, _ statKey) bool { return listed[paths[i]] && !changed[paths[i]] }
	}
	gitexec.TraceStep(fmt.Sprintf("listing (by %s; stat cache used: %v)", h.listedBy, cached != nil), start)
	s.dirOK.Clear()
	walk := time.Now()
	keep, skipped, looked := s.classify(paths, maxSize, known, unchanged, heldByID)
	gitexec.TraceStep(fmt.Sprintf("stat walk of %d paths (%d not as the index holds them)", len(paths), looked), walk)
	skipped = append(skipped, h.unreadable...)
	c := &capture{skipped: skipped, files: len(keep), held: h}
	c.inTree = make(sortedPaths, len(keep)) // keep is in order
	c.looked = keep
	var update []string
	var fresh []verdict // regular files to hash
	var restat []string // files held by id and unchanged, to get git's stat data (refresh)
	for i, v := range keep {
		c.inTree[i] = v.path
		if v.unchanged {
			if refresh && v.byID {
				restat = append(restat, v.path)
				keep[i].byID, keep[i].restat = false, true
			}
			continue
		}
		update = append(update, v.path)
		if v.regular {
			fresh = append(fresh, v)
		}
	}
	// What a tree cannot hold is worked out from the walk, beside the rest.
	var unread []Skipped
	var metaErr error
	metaDone := make(chan struct{})
	go func() {
		defer close(metaDone)
		defer gitexec.TraceStep("permission bits and empty directories", time.Now())
		unread, metaErr = s.buildMeta(ctx, c, h, keep, listing, trusted, dirsSince)
	}()
	defer func() { <-metaDone }() // on an error too: nothing outlives the capture
	// Whatever else the index holds (a file gone, ignored now, over the
	// limit, a path that became a directory) is dropped, so the tree is
	// exactly what the rule holds.
	var remove []string
	j := 0
	for _, p := range inIndex { // both in order
		for j < len(keep) && keep[j].path < p {
			j++
		}
		if j == len(keep) || keep[j].path != p {
			remove = append(remove, p)
		}
	}
	// git compares whole-second times here: a file rewritten at the same size
	// in the second it was hashed (its mtime even set back) would look
	// unchanged to every later checkpoint. Entries of files whose status
	// changed since the second this capture began leave the index (or have
	// no stat data there: byID), so the next capture hashes them again.
	// The stat cache then holds every path the index holds (those kept, less
	// the racy ones taken out, with the racy ones held by id as the index
	// has them), with what the walk saw of it before any was read. Both are
	// worked out beside the import or write-tree.
	imported := false
	var held map[string]heldBlob // the changed files entered by id
	var importTree string        // the import's tree, when it is the index's
	var racy []int               // indices into keep
	var entries *statEntries     // nil until prepare, and when the files are hashed again
	prepare := func() {
		racy = s.racyFiles(keep, fileRacyCut(start))
		var ids map[string]string
		if cached != nil {
			ids = cached.ids
		}
		entries = newStatEntries(keep, racy, held, ids)
	}
	// prepared is prepare, once, with the entries encoded: beside a git
	// process that takes longer.
	prepared := func() error {
		if entries == nil {
			prepare()
		}
		entries.encode()
		return nil
	}
	takeOut := func(paths []string) error {
		if len(paths) == 0 {
			return nil
		}
		_, err := g.RunInput(ctx, nulJoin(paths), "update-index", "--force-remove", "-z", "--stdin")
		return err
	}
	// hash has update-index hash paths into the index, writing their
	// objects unless infoOnly.
	hash := func(infoOnly bool, paths []string) error {
		if len(paths) == 0 {
			return nil
		}
		args := []string{"update-index", "--add", "--remove", "--replace"}
		if infoOnly {
			args = append(args, "--info-only") // hash, write no object
		}
		input := s.countPaths("hashing files", nulJoin(paths), len(paths), new(atomic.Int64))
		_, err := g.RunInput(ctx, input, append(args, "-z", "--stdin")...)
		return err
	}
	// rehash hashes the files to update and restat again, writing their
	// objects: out of the index first, since update-index passes over an
	// entry whose stat data is the file's (as a hash with --info-only left
	// it), whatever its object.
	rehash := func() error {
		paths := append(append([]string(nil), update...), restat...)
		if err := takeOut(paths); err != nil {
			return err
		}
		return hash(false, paths)
	}
	// The files to restat are in the tree as they are (their blobs are
	// there): hashed for their stat data alone. One changed since the walk
	// is in the index as it is now, and write-tree then has the index
	// decide the tree (its blob, not written, fails it: then rehash).
	restatted := func() error {
		if len(restat) > 0 {
			beforeRestat()
		}
		return hash(true, restat)
	}
	// A small change: preimport writes its objects in one pack. The changed
	// files are read first (readHeld), and go into the index by the blob
	// ids of what the import writes (enterByID), beside it: the import's
	// tree is then the index's, and when the index held the import's base,
	// no write-tree has to work it out. A file that cannot be held makes
	// update-index hash them all instead, beside the import, and write-tree
	// then finds every object it names, or fails on the blob of a file
	// changed between the two reads: then the files are hashed again, and
	// written. (importChanged: held holds what was read of changed already
	// when read is true.)
	importChanged := func(changed []verdict, read bool) error {
		trees := s.readBaseTreesBeside(ctx, cached.base, changed, remove)
		if !read {
			held = s.readHeld(changed, cached.base)
		}
		var tree string
		importing := func() error {
			imported, tree, c.imported = s.preimport(cached.base, trees, changed, held)
			return nil
		}
		var err error
		if held != nil {
			// The files were read: what is racy among them is known, and
			// the stat cache's entries are worked out beside the import.
			// The files to restat are looked at again (racyFiles) once
			// hashed: the stat cache's entries wait for that hash.
			beside := prepared
			if len(restat) > 0 {
				beside = func() error { return nil }
			}
			err = parallel(importing,
				func() error {
					if err := s.enterByID(ctx, remove, changed, held, cached.base); err != nil {
						return err
					}
					if err := restatted(); err != nil || len(restat) == 0 {
						return err
					}
					return prepared()
				},
				beside)
		} else if err = takeOut(remove); err == nil {
			err = parallel(importing, func() error { return hash(true, append(update, restat...)) })
		}
		if err != nil {
			trees.wait() // nothing outlives the capture (the import waited, unless never run)
			return err
		}
		switch {
		case !imported:
			held, entries = nil, nil // hashed again, every file: the import's blobs may be missing
			if err := rehash(); err != nil {
				return err
			}
		case held != nil && cached.tree == cached.base && len(restat) == 0:
			importTree = tree
		}
		return nil
	}
	settled := 0 // files the index holds by id found as it holds them
	if cached != nil && preimportFits(cached.base, len(update), len(remove)) {
		changed := changedOf(keep)
		// A file the index holds by id may be what it holds (one racy when
		// last read, so read again): read first, those stay as they are,
		// and only the others are imported.
		read := false
		if cached.ids != nil && slices.ContainsFunc(changed, func(v verdict) bool { return cached.ids[v.path] != "" }) {
			held, read = s.readHeld(changed, cached.base), true
			if settled = settleByID(keep, held, cached.ids); settled > 0 {
				changed = changedOf(keep)
				update = update[:0]
				for _, v := range changed {
					update = append(update, v.path)
				}
			}
		}
		if len(changed) == 0 && len(remove) == 0 {
			if err := restatted(); err != nil {
				return nil, err
			}
		} else if err := importChanged(changed, read); err != nil {
			return nil, err
		}
	} else {
		if err := takeOut(remove); err != nil {
			return nil, err
		}
		s.prewrite(ctx, fresh)
		if err := hash(false, append(update, restat...)); err != nil {
			return nil, err
		}
	}
	recheck := time.Now()
	writeTree := func() error {
		out, err := g.Run(ctx, "write-tree")
		c.tree = strings.TrimSpace(string(out))
		return err
	}
	switch {
	case cached != nil && len(update) == 0 && len(remove) == 0 && len(restat) == 0 && s.hasObject(cached.tree):
		// The index is the one the stat cache describes, unchanged: so is
		// its tree. (Only while the tree is still there: a git gc of the
		// procedure's may have deleted it and the blobs only the index
		// named, which write-tree finds and the capture then rebuilds.)
		c.tree = cached.tree
		prepare()
	case importTree != "":
		// The index held the import's base, and took the same changes.
		c.tree = importTree
		if checkImportTree {
			if err := writeTree(); err != nil || c.tree != importTree {
				return nil, fmt.Errorf("the import's tree %s is not the index's %s (%v)", importTree, c.tree, err)
			}
		}
	default:
		err := parallel(writeTree, prepared)
		if err != nil && imported {
			s.warnTrace("write-tree after the import: %v", err)
			held = nil
			if err = rehash(); err == nil {
				err = writeTree()
				prepare() // the files were hashed again: looked at again
			}
		}
		if err != nil {
			return nil, err
		}
	}
	// Those held by id are in the index with no stat data already: as good
	// as out of it.
	leave := entries.leave
	if err := takeOut(leave); err != nil {
		return nil, err
	}
	// The stat cache is left alone when nothing changed and the index is as
	// it was.
	tree := c.tree
	if len(leave) > 0 {
		tree = "" // the index no longer holds those files: its tree is not c.tree
	}
	if s.splitPartLarge() {
		if _, err := g.Run(ctx, "update-index", "--split-index"); err != nil {
			return nil, err
		}
	}
	now, err := indexStamp(s.indexFile())
	switch {
	case err != nil:
		os.Remove(s.statCacheFile())
	case len(update) > 0 || len(remove) > 0 || len(racy) > 0 || settled > 0 || cached == nil || !bytes.Equal(now, cached.stamp) || tree != cached.tree || c.tree != cached.base:
		// Written beside what follows (the commit, the ref), with the
		// index's stamp of now: an index changed meanwhile would not match
		// it.
		s.cacheWrites.Go(func() { s.writeStatCache(entries, now, tree, c.tree) })
	}
	if err == nil && (cached == nil || !bytes.Equal(now, cached.stamp)) {
		s.cacheWrites.Go(func() {
			if before := <-sharedBefore; before != "" && before != namedSharedPart(s.indexFile()) {
				s.dropSharedPart(before)
			}
		})
	}
	gitexec.TraceStep(fmt.Sprintf("recent changes re-checked (%d racy, %d left the index)", len(racy), len(leave)), recheck)
	<-metaDone
	if metaErr != nil {
		return nil, metaErr
	}
	c.skipped = append(c.skipped, unread...)
	return c, nil
}

// changedOf is the verdicts of keep not unchanged, in order.
func changedOf(keep []verdict) []verdict {
	var changed []verdict
	for _, v := range keep {
		if !v.unchanged {
			changed = append(changed, v)
		}
	}
	return changed
}

// settleByID marks unchanged each changed file of keep that the index holds
// by id (ids: statCache.ids) and whose content read (held) is that entry,
// mode and blob: the index holds it as it is, and it stays there by id with
// the stat data the walk saw (racyFiles still judges it). It returns how
// many it marked.
func settleByID(keep []verdict, held map[string]heldBlob, ids map[string]string) int {
	n := 0
	for i := range keep {
		v := &keep[i]
		if v.unchanged {
			continue
		}
		if b, ok := held[v.path]; ok && ids[v.path] == b.mode+" "+b.id {
			v.unchanged, v.byID = true, true
			n++
		}
	}
	return n
}

// buildMeta records in c what a git tree cannot hold (permission bits,
// directories without files: meta.go), and writes the listing cache for the
// next capture. With the listing all from the cache, and the kept files in
// the same directories, the directories are the cache's: none is read. It
// runs beside settleByID, which marks verdicts of keep unchanged: it reads
// keep's paths, kinds and stat data through pointers, never copying a
// verdict whole.
func (s *Store) buildMeta(ctx context.Context, c *capture, h *held, keep []verdict, listing *listCache, trusted bool, since time.Time) ([]Skipped, error) {
	parents := parentsDigest(keep)
	if h.fromCache && len(h.confirmed) == 0 && bytes.Equal(listing.parents, parents) {
		c.meta = newMeta(h, keep, listing.dirPerms, listing.empty)
		return nil, nil
	}
	// Listed again in part (or confirmed: the same names), with the same
	// directories holding kept files: only the directories listed again
	// are read, and the confirmed ones looked at again; the others,
	// unchanged, hold what the cache says.
	var only dirSet
	if (h.relisted != nil || h.fromCache) && bytes.Equal(listing.parents, parents) {
		only = h.relisted
		if only == nil {
			only = dirSet{}
		}
		for d := range only {
			if fi, err := os.Lstat(filepath.Join(s.WorkTree, d)); err != nil || !fi.IsDir() {
				only = nil // (its parent would have been listed again)
				break
			}
		}
	}
	found, empty, unread, stray := map[string]dirFound{}, []string(nil), []Skipped(nil), false
	if only == nil || len(only) > 0 {
		// (nothing listed again: no directory to read, nor the kept files'
		// directories to work out; a confirmed directory holds no .git)
		var err error
		if found, empty, unread, stray, err = s.metaDirs(ctx, h, keep, since, only, listing); err != nil {
			return nil, err
		}
	}
	if only != nil {
		gitexec.TraceStep(fmt.Sprintf("directories read again: %d listed again, and below; %d with the same names", len(only), len(h.confirmed)), time.Now())
		for d, k := range listing.dirs {
			if !only.holds(d) {
				found[d] = dirFound{ok: true, perm: listing.dirPerms[d], keys: k, digest: listing.digests[d]}
			}
		}
		// A confirmed directory keeps its names' digest, with its stat data
		// (and permission bits) of now: a change since the names were read
		// is of the capture's second, so marked racy.
		for _, d := range h.confirmed {
			f := s.lookAtDir(d, since)
			if !f.ok {
				f = dirFound{ok: true, perm: listing.dirPerms[d], keys: racyKeys}
			}
			f.digest = listing.digests[d]
			found[d] = f
		}
		for _, d := range listing.empty {
			if !only.holds(d) {
				empty = append(empty, d)
			}
		}
		sort.Strings(empty)
	}
	perms := make(map[string]os.FileMode, len(found))
	keys := make(map[string]dirKeys, len(found))
	digests := map[string][]byte{}
	for d, f := range found {
		perms[d], keys[d] = f.perm, f.keys
		if f.digest != nil {
			digests[d] = f.digest
		}
	}
	c.meta = newMeta(h, keep, perms, empty)
	if !trusted {
		s.writeListCache(nil)
		return unread, nil
	}
	if h.inputs == nil || len(h.repos) != 1 || len(h.opaque) > 0 || len(h.unreadable) > 0 || len(unread) > 0 || stray {
		s.writeListCache(nil)
		return unread, nil
	}
	s.writeListCache(&listCache{inputs: h.inputs, paths: h.paths, tracked: h.tracked, dirs: keys,
		parents: parents, empty: empty, dirPerms: perms, digests: digests})
	return unread, nil
}

// racyFiles are the indices of the kept files whose status changed since
// the capture began (since: fileRacyCut), in keep's order. The files read
// now (those not unchanged) are looked at again: one changed between the
// look that judged it and the read carries a stale time in its verdict, and
// one gone since (update-index then dropped it from the index) is racy too,
// so that the stat cache never names a path the index may not hold. So are
// the files a refresh hashed for their stat data (restat), looked at after
// that hash: one changed since the walk is racy.
func (s *Store) racyFiles(keep []verdict, since time.Time) []int {
	cut := since.UnixNano()
	var racy []int
	for i := range keep {
		v := &keep[i]
		changed := max(int64(v.key.ctime), int64(v.key.mtime))
		if !v.unchanged || v.restat {
			fi, err := os.Lstat(filepath.Join(s.WorkTree, v.path))
			if err != nil || (v.restat && keyOf(fi) != v.key) {
				// (a file to restat that changed since the walk is in the
				// index as update-index saw it, or not at all: not as the
				// walk saw it)
				racy = append(racy, i)
				continue
			}
			changed = later(ctime(fi), fi.ModTime()).UnixNano()
		}
		if changed >= cut {
			racy = append(racy, i)
		}
	}
	return racy
}

// fileRacyCut is the time from which a file's change makes it racy (see
// racyFiles): the second the capture began, or a tenth of a second before
// the capture began when that is earlier. The kernel stamps files from a
// clock that may lag a tick behind the one rewind reads (as dirRacyCut
// says): a file changed just after a capture began, in the first
// milliseconds of a second, may carry a time in the second before, and a
// same-size rewrite in the same tick would leave its stat data unchanged.
func fileRacyCut(start time.Time) time.Time {
	cut := start.Truncate(time.Second)
	if lagged := start.Add(-100 * time.Millisecond); lagged.Before(cut) {
		return lagged
	}
	return cut
}

// dirRacyCut is the time from which a directory's change makes the listing
// cache list it again. On a file system with times finer than a second
// (fine), a tenth of a second before the capture began: the kernel stamps
// them from a clock that may lag a tick (a few milliseconds) behind the one
// rewind reads. Else a second before the second it began, so that
// whole-second times are covered too. (A test moves it to the capture's
// start, to see the cache used between quick steps.)
var dirRacyCut = func(start time.Time, fine bool) time.Time {
	if fine {
		return start.Add(-100 * time.Millisecond)
	}
	return start.Truncate(time.Second).Add(-time.Second)
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
// failures here are ignored. Each share's blobs go into packs (see
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
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].size() > sorted[j].size() })
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
		g.PackBlobs = true // packs, not a loose file per blob
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
	before := s.packNames()
	parallel(jobs...)
	s.recordBulkPacks(before)
}

// beforeRestat runs before the files held by id are hashed for their stat
// data (a test changes one there).
var beforeRestat = func() {}

// checkImportTree has a capture that takes the import's tree as the index's
// check it with write-tree (the package's tests set it).
var checkImportTree = false

// classify sorts out the paths to keep (existing regular files and symlinks
// under the limit and readable) and the skipped ones to report; the rest (gone,
// or not files) are left out. Stat calls run in parallel:
// this is the one walk a checkpoint costs.
// known(i) gives the stat data of paths[i] when git found it as the index
// holds it (then it is not looked at again); unchanged(i, k) says whether
// the index holds paths[i] as it is, given its stat data k; heldByID(i),
// when not nil, whether the index holds it by id.
func (s *Store) classify(paths []string, maxSize int64, known func(int) (statKey, bool), unchanged func(int, statKey) bool, heldByID func(int) bool) (keep []verdict, skipped []Skipped, looked int) {
	verdicts := make([]verdict, len(paths))
	// Files git found as the index holds them are judged from their stat
	// data then (a share of the paths on each CPU: most of a large tree);
	// the rest are looked at, side by side.
	shares := make([][]int, runtime.NumCPU())
	fns := make([]func() error, len(shares))
	for c := range shares {
		fns[c] = func() error {
			for i := c * len(paths) / len(shares); i < (c+1)*len(paths)/len(shares); i++ {
				if k, ok := known(i); ok && (maxSize <= 0 || int64(k.size) <= maxSize) {
					if verdicts[i], ok = verdictOf(k); ok {
						continue
					}
				}
				shares[c] = append(shares[c], i)
			}
			return nil
		}
	}
	parallel(fns...)
	looks := slices.Concat(shares...) // indices into paths, in order
	// Each run of those paths in one directory looked at through one
	// descriptor of it. (A directory none of whose files is looked at needs
	// no look either: git's diff-files takes a path below a symlink or a file
	// for deleted.)
	runs := dirRuns(len(looks), func(i int) string { return paths[looks[i]] })
	forEach(len(runs), func(r int) {
		run := runs[r]
		if s.notADir(run.dir) {
			// below a symlink or a file: git refuses the paths ("beyond a
			// symbolic link"), and the symlink itself is captured as one
			for _, i := range looks[run.start:run.end] {
				verdicts[i] = verdict{}
			}
			return
		}
		d := openDirStat(s.WorkTree + "/" + run.dir)
		defer d.close()
		for _, i := range looks[run.start:run.end] {
			verdicts[i] = s.judge(paths[i], i, maxSize, unchanged, d)
		}
	})
	// kept in place: verdicts is not needed after
	keep = verdicts[:0]
	for i, v := range verdicts {
		switch {
		case v.keep:
			v.path = paths[i]
			v.byID = v.unchanged && heldByID != nil && heldByID(i)
			keep = append(keep, v)
		case v.skip != nil:
			skipped = append(skipped, *v.skip)
		}
	}
	return keep, skipped, len(looks)
}

// dirRun is a run of paths in one directory: the start-th to the end-th.
type dirRun struct {
	dir        string
	start, end int
}

// dirRuns cuts n paths in order (path(i) the i-th) into runs of one
// directory each (git orders a directory's files together), of at most 256 so
// that a flat tree still spreads over the workers that look at them.
func dirRuns(n int, path func(int) string) []dirRun {
	var runs []dirRun
	for i := 0; i < n; {
		d := dirOf(path(i))
		j := i + 1
		for j < n && j-i < 256 && dirOf(path(j)) == d {
			j++
		}
		runs = append(runs, dirRun{d, i, j})
		i = j
	}
	return runs
}

// dirOf is path.Dir of a path as git lists one (clean, relative), without
// path.Clean's pass over it: classify asks it of every path.
func dirOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return "."
}

// verdictOf is the verdict on a file kept as the index holds it, from its
// stat data then; false for a type judge must look at.
func verdictOf(k statKey) (verdict, bool) {
	v := verdict{keep: true, unchanged: true, key: k}
	switch k.mode & unix.S_IFMT {
	case unix.S_IFREG:
		v.regular = true
	case unix.S_IFLNK:
	default:
		return verdict{}, false
	}
	return v, true
}

// verdict is what classify makes of a path (kept small: a capture holds one
// per file).
type verdict struct {
	path      string
	key       statKey // its stat data, which the stat cache compares
	skip      *Skipped
	keep      bool
	regular   bool // a regular file (else a symlink), when kept
	unchanged bool // the store's index holds it as it is: not hashed again
	byID      bool // unchanged, and the store's index holds it by its blob id, with no stat data
	restat    bool // unchanged, held by id, and hashed by a refresh for its stat data
}

func (v *verdict) perm() os.FileMode { return os.FileMode(v.key.mode) & os.ModePerm }
func (v *verdict) size() int64       { return int64(v.key.size) }

// judge looks at one path; unchanged says whether the store's index holds it
// as it is, given its stat (then it is not read again, so the readability
// check is spared: a chmod or an ACL change moves the ctime).
func (s *Store) judge(rel string, i int, maxSize int64, unchanged func(int, statKey) bool, ds dirStat) (v verdict) {
	switch gitComponent(rel) {
	case gitExact:
		return v // inside a .git directory: never captured
	case gitFolded:
		v.skip = &Skipped{Path: rel, Why: refusedName(rel)}
		return v
	}
	fi, err := ds.look(s.WorkTree, rel)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return v // gone: update-index --remove drops it
	case err != nil:
		v.skip = &Skipped{Path: rel, Why: "cannot be read: " + errText(err)}
		return v
	}
	v.key = fi.key
	v.unchanged = unchanged(i, v.key)
	switch {
	case fi.mode&os.ModeSymlink != 0 && underGitmodules(rel):
		// git's verify_path refuses it: update-index would leave it out
		// with a warning, where the import (and so a checkpoint's tree
		// taken from it) would hold it.
		v.skip = &Skipped{Path: rel, Why: "git cannot store a symlink named .gitmodules, or below one"}
	case fi.mode&os.ModeSymlink != 0:
		v.keep = true
	case fi.mode.IsDir():
		// a tracked path that is now a directory: its files are listed
	case !fi.mode.IsRegular():
		v.skip = &Skipped{Path: rel, Why: fmt.Sprintf("not a file git can store (%s)", fi.mode.Type())}
	case maxSize > 0 && fi.size > maxSize:
		v.skip = &Skipped{Path: rel, Why: fmt.Sprintf("over the size limit (%d bytes)", fi.size)}
	case !v.unchanged && unix.Access(s.WorkTree+"/"+rel, unix.R_OK) != nil:
		v.skip = &Skipped{Path: rel, Why: "unreadable"}
	default:
		v.keep, v.regular = true, true
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

// underGitmodules reports whether a component of rel is named .gitmodules,
// in any case: git refuses a symlink at such a path.
func underGitmodules(rel string) bool {
	for part := range strings.SplitSeq(rel, "/") {
		if strings.EqualFold(part, ".gitmodules") {
			return true
		}
	}
	return false
}

// symlinkParent reports whether a directory above rel is a symlink (or not a
// directory at all), as when a captured directory was replaced by a symlink.
func (s *Store) symlinkParent(rel string) bool { return s.notADir(path.Dir(rel)) }

// notADir reports whether d ("." the work tree) or a directory above it is a
// symlink or not a directory. Answers are cached per directory: classify and
// the restore ask for many files of one directory.
func (s *Store) notADir(d string) bool {
	if d == "." {
		return false
	}
	if v, ok := s.dirOK.Load(d); ok {
		return !v.(bool)
	}
	bad := s.notADir(path.Dir(d))
	if !bad {
		fi, err := os.Lstat(filepath.Join(s.WorkTree, d))
		bad = err == nil && !fi.IsDir()
	}
	s.dirOK.Store(d, !bad)
	return bad
}

// hasGitComponent reports whether a path lies inside a .git directory: those are
// never captured, a nested repository's included.
func hasGitComponent(rel string) bool { return gitComponent(rel) == gitExact }

const (
	gitNone   = iota
	gitExact  // a component is ".git"
	gitFolded // a component is ".git" in another case (".GIT"): git refuses it
)

// gitComponent looks for a component named .git in any case, without
// allocating: classify asks it of every path.
func gitComponent(rel string) int {
	found := gitNone
	for start := 0; start <= len(rel); {
		end := strings.IndexByte(rel[start:], '/')
		if end < 0 {
			end = len(rel)
		} else {
			end += start
		}
		if part := rel[start:end]; len(part) == 4 && strings.EqualFold(part, ".git") {
			if part == ".git" {
				return gitExact
			}
			found = gitFolded
		}
		start = end + 1
	}
	return found
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

// changedSince reports whether the file at rel, as fi says it is now, is
// not the one the capture read: a path of its tree whose stat data is not
// what its walk saw (its mtime to the nanosecond, its size, inode, mode
// and owner), unless it holds what the capture's tree holds (heldAsIs).
// Not its ctime: a restore's removal of a hard link of the same file moves
// it. A path the capture did not hold is not judged.
func (s *Store) changedSince(c *capture, rel string, fi os.FileInfo) bool {
	i, ok := slices.BinarySearch(c.inTree, rel)
	if !ok || i >= len(c.looked) {
		return false
	}
	now, then := keyOf(fi), c.looked[i].key
	now.ctime, then.ctime = 0, 0
	return now != then && !s.heldAsIs(c, rel, now, then)
}

// heldAsIs reports whether the file at rel, whose stat data (now) is not
// what the capture's walk saw (then), holds what the capture's tree holds
// there: a file changed between the walk and the read is in the checkpoint
// with its new content, under the walk's stat data. Its type and bits must
// be the walk's (the checkpoint records those) and the tree entry's, its
// content the entry's blob, read from the file whose stat data is now (the
// one the caller judged, open or at the path), never from another put there
// meanwhile. A file that cannot be read so is not.
func (s *Store) heldAsIs(c *capture, rel string, now, then statKey) bool {
	if now.mode != then.mode || c.tree == "" {
		return false
	}
	var mode string
	switch now.mode & unix.S_IFMT {
	case unix.S_IFREG:
		mode = "100644"
		if now.mode&unix.S_IXUSR != 0 {
			mode = "100755"
		}
	case unix.S_IFLNK:
		mode = "120000"
	default:
		return false
	}
	entry, err := c.treeLookup(s).entry(rel)
	if err != nil || entry.mode != mode {
		return false
	}
	id, err := hashBeneath(s.WorkTree, rel, now, len(c.tree) == 64)
	return err == nil && bytes.Equal(id, entry.id)
}

// treeLookup is the lookup of the capture's tree that heldAsIs reads, made
// at its first use; a restore closes it when done (closeTreeLookup).
func (c *capture) treeLookup(s *Store) *treeLookup {
	c.lookupOnce.Do(func() { c.lookup = s.newTreeLookup(c.tree) })
	return c.lookup
}

// closeTreeLookup unmaps what the lookup mapped, if one was made. A look
// after it (none is: the restore closes it when done) finds nothing, so
// the file is changed.
func (c *capture) closeTreeLookup() {
	c.lookupOnce.Do(func() {}) // none made from here on
	if c.lookup != nil {
		c.lookup.close()
	}
}

// sortedPaths are paths in order, looked up by binary search: a capture
// makes one of every path it holds, where a map of 100,000 paths costs more
// than every lookup a restore makes in it.
type sortedPaths []string

func (ps sortedPaths) has(p string) bool {
	_, ok := slices.BinarySearch(ps, p)
	return ok
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
