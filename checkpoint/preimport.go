package checkpoint

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
	"golang.org/x/sys/unix"
)

// preimportMax is the most changed files preimport takes; a larger change
// goes to prewrite, which shares the hashing out over the CPUs.
const preimportMax = 2000

// importRef holds the commit preimport makes, so that the objects it wrote
// stay reachable until the next one (a gc of the procedure's keeps them).
const importRef = "refs/rewind/import"

// preimport writes the objects a capture of a few changed files needs
// (their blobs, the trees of every directory above them, and a commit of
// the root tree for importRef) as one pack: the last tree written, base,
// with the changes on top, its trees read with one git cat-file.
// update-index and write-tree then find every object there and write none,
// where each would otherwise be a file of its own (a create, a write and a
// rename each: on many file systems most of a small checkpoint's cost).
//
// The files in held (readHeld) go in as read then; the others are read
// now. It reports whether the import went through, its root tree, and
// the pack (see keepImport). A failure is only reported: the capture then
// hashes the files itself.
func (s *Store) preimport(base string, trees *baseTrees, update []verdict, held map[string]heldBlob) (ok bool, tree string, pack importedPack) {
	defer gitexec.TraceStep(fmt.Sprintf("%d changes written as one pack", len(update)+trees.removed), time.Now())
	tree, pack, err := s.writeImport(base, trees, update, held)
	if err != nil {
		s.warnTrace("import: %v", err)
		return false, "", importedPack{}
	}
	return true, tree, pack
}

// importedPack is a pack an import wrote: the commit of its tree, for
// importRef, and its .keep file, which keeps a gc from deleting its objects
// until a ref names them (git fast-import's own guard).
type importedPack struct {
	commit, tree, keep string
}

// importKeep is what the .keep file of an import's pack holds.
const importKeep = "rewind: an import, until a ref names it\n"

// keepImport points importRef at the commit of c's import, when there was
// one, and lets its pack go: a capture no checkpoint holds (a dry run's, a
// diff's) has its index hold objects of the import by id that nothing else
// names. A capture whose tree is not the import's (none, or write-tree's)
// has its index name objects git wrote that no ref names either: importRef
// then names a commit of its tree. A checkpoint moves importRef in the
// transaction that creates its ref (updateRefs). A failure costs only
// time: a later capture finds the objects a gc deleted missing, and
// rebuilds its index.
func (s *Store) keepImport(ctx context.Context, c *capture) {
	defer s.releaseImport(ctx, c)
	commit := c.imported.commit
	if c.tree != "" && c.tree != c.imported.tree {
		out, err := s.git().RunInput(ctx, strings.NewReader(""), "commit-tree", c.tree)
		if err != nil {
			s.warnTrace("commit-tree %s: %v", c.tree, err)
			return
		}
		commit = strings.TrimSpace(string(out))
	}
	if commit != "" {
		if _, err := s.git().Run(ctx, "update-ref", importRef, commit); err != nil {
			s.warnTrace("update-ref %s: %v", importRef, err)
		}
	}
}

// releaseImport deletes the .keep file of c's import, once a ref names its
// objects, and merges the small packs, this one now among them.
func (s *Store) releaseImport(ctx context.Context, c *capture) {
	if c.imported.keep == "" {
		return
	}
	os.Remove(c.imported.keep)
	c.imported.keep = ""
	s.consolidatePacks(ctx)
}

// releaseImports deletes the .keep files imports left (a rewind killed
// before a ref named their objects): under the store's lock, no import is
// under way. Only rewind's: a .keep of anyone else's stays. A pack of
// theirs without its index (killed before its rename) goes too: git never
// reads such a pack, nor deletes it.
func (s *Store) releaseImports() {
	keeps, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.keep"))
	for _, k := range keeps {
		if data, err := os.ReadFile(k); err == nil && string(data) == importKeep {
			name := strings.TrimSuffix(k, ".keep")
			if _, err := os.Lstat(name + ".idx"); errors.Is(err, os.ErrNotExist) {
				os.Remove(name + ".pack")
			}
			os.Remove(k)
		}
	}
}

// baseTrees are the edits of a change (see treeEdit), with the trees of the
// base they go on, read in the background from when the change is known:
// beside the reading of the changed files, and the writing of their blobs.
type baseTrees struct {
	root    *treeEdit
	removed int // paths taken away
	done    chan struct{}
	err     error
}

// readBaseTreesBeside starts reading the trees of base that the change of
// update and remove goes on.
func (s *Store) readBaseTreesBeside(ctx context.Context, base string, update []verdict, remove []string) *baseTrees {
	b := &baseTrees{root: &treeEdit{}, removed: len(remove), done: make(chan struct{})}
	for _, p := range remove {
		b.root.below(p).gone = true
	}
	for _, v := range update {
		b.root.below(v.path)
	}
	go func() { b.err = s.readBaseTrees(ctx, base, b.root); close(b.done) }()
	return b
}

// wait waits for the trees, and reports what reading them met.
func (b *baseTrees) wait() error {
	<-b.done
	return b.err
}

// writeImport is preimport's work.
func (s *Store) writeImport(base string, trees *baseTrees, update []verdict, held map[string]heldBlob) (string, importedPack, error) {
	defer trees.wait() // nothing outlives the import
	root := trees.root
	p, err := newPackWriter(filepath.Join(s.gitDir(), "objects", "pack"), len(base) == 64)
	if err != nil {
		return "", importedPack{}, err
	}
	defer p.abort() // after finish, only a no-op
	blob := func(v verdict, b heldBlob, o packedObject) error {
		root.below(v.path).blob = &treeEntry{mode: b.mode, id: o.id}
		return p.write(o)
	}
	if held != nil {
		blobs := p.packAll(packBlob, len(update), func(i int) ([]byte, []byte) {
			b := held[update[i].path]
			id, _ := hex.DecodeString(b.id) // readHeld's
			return b.data, id
		})
		for i, v := range update {
			if err := blob(v, held[v.path], blobs[i]); err != nil {
				return "", importedPack{}, err
			}
		}
	} else {
		// one at a time: they may be large
		for _, v := range update {
			b, err := s.readBlob(v, base, readNoFollow)
			if err != nil {
				continue // gone or changed: write-tree decides
			}
			b.data = importRead(v.path, b.data)
			if err := blob(v, b, p.pack(packBlob, b.data, nil)); err != nil {
				return "", importedPack{}, err
			}
		}
	}
	if err := trees.wait(); err != nil {
		return "", importedPack{}, err
	}
	var made []newTree
	rootID, err := writeTrees(root, &made, p.sha256, true)
	if err != nil {
		return "", importedPack{}, err
	}
	for _, o := range p.packAll(packTree, len(made), func(i int) ([]byte, []byte) { return made[i].data, made[i].id }) {
		if err := p.write(o); err != nil {
			return "", importedPack{}, err
		}
	}
	tree := hex.EncodeToString(rootID)
	c := p.pack(packCommit, fmt.Appendf(nil, "tree %s\nauthor rewind <%[2]s> 0 +0000\ncommitter rewind <%[2]s> 0 +0000\n\n", tree, gitexec.IdentityEmail), nil)
	if err := p.write(c); err != nil {
		return "", importedPack{}, err
	}
	keep, err := p.finish(importKeep)
	if err != nil {
		return "", importedPack{}, err
	}
	return tree, importedPack{commit: hex.EncodeToString(c.id), tree: tree, keep: keep}, nil
}

// preimportFits reports whether preimport takes a change: a few files on the
// last tree written, with a git that can merge the packs it makes.
func preimportFits(base string, update, remove int) bool {
	return base != "" && update <= preimportMax && update+remove > 0 && gitexec.AtLeast(geometricVersion)
}

// heldBlob is a changed file as the capture read it: its content, its mode
// in a tree, and (from readHeld) its blob id.
type heldBlob struct {
	data     []byte
	id, mode string
}

// readBlob reads the file of v (a regular file through read, or a
// symlink's target) with its mode in a tree.
func (s *Store) readBlob(v verdict, base string, read func(string) ([]byte, error)) (heldBlob, error) {
	full := filepath.Join(s.WorkTree, v.path)
	if !v.regular {
		target, err := os.Readlink(full)
		return heldBlob{data: []byte(target), mode: "120000"}, err
	}
	b := heldBlob{mode: "100644"}
	if v.key.mode&unix.S_IXUSR != 0 {
		b.mode = "100755"
	}
	var err error
	b.data, err = read(full)
	return b, err
}

// readHeld reads every changed file before the import, and works out its
// blob id (sha256 for a store of that object format, whose ids are 64
// digits long, like base). The capture then enters them all into the index
// by those ids (enterByID) while the import writes the same bytes: no file
// is read twice, and the import's tree is the index's. It returns nil, and
// the files are hashed by update-index instead, when any cannot be held: one
// gone or no longer what the walk saw (a regular file that is now something
// else, or larger than the walk saw it: the files held are bounded by
// heldBytesMax in all).
func (s *Store) readHeld(update []verdict, base string) map[string]heldBlob {
	var total int64
	for _, v := range update {
		total += v.size()
	}
	if total > heldBytesMax {
		return nil
	}
	blobs := make([]heldBlob, len(update))
	var failed atomic.Bool
	forEach(len(update), func(i int) {
		beforeHeldRead(update[i].path)
		b, err := s.readBlob(update[i], base, func(full string) ([]byte, error) {
			return readRegularNoFollow(full, update[i].size())
		})
		if err != nil {
			failed.Store(true)
			return
		}
		b.id = hex.EncodeToString(gitObjectID(packBlob, b.data, len(base) == 64))
		blobs[i] = b
	})
	if failed.Load() {
		return nil
	}
	held := make(map[string]heldBlob, len(update))
	for i, v := range update {
		held[v.path] = blobs[i]
	}
	return held
}

// beforeHeldRead runs before readHeld reads a changed file the walk looked
// at. (A test changes the file there meanwhile.)
var beforeHeldRead = func(string) {}

// byIDMax is the number of files the index may hold by id (enterByID)
// past which a capture hashes them again, so that they get git's stat data.
var byIDMax = preimportMax

// heldBytesMax bounds the content of the changed files read before the
// import, all held until it has written them (the files of a larger change
// are streamed to it one at a time): up to preimportMax files of up to
// DefaultMaxFileSize each may have changed.
var heldBytesMax int64 = 32 << 20

// enterByID enters the changed files into the index by the blob ids of what
// readHeld read, and takes the removed paths out, in one update-index. No
// entry gets stat data from git (byID): the stat cache holds what the walk
// saw of each file, and a capture looks at them all.
func (s *Store) enterByID(ctx context.Context, remove []string, update []verdict, held map[string]heldBlob, base string) error {
	var in bytes.Buffer
	zero := strings.Repeat("0", len(base))
	for _, p := range remove {
		fmt.Fprintf(&in, "0 %s\t%s\x00", zero, p)
	}
	for _, v := range update {
		b := held[v.path]
		fmt.Fprintf(&in, "%s %s\t%s\x00", b.mode, b.id, v.path)
	}
	_, err := s.git().RunInput(ctx, &in, "update-index", "--add", "--replace", "-z", "--index-info")
	return err
}

// importRead is what the import takes of a file it reads itself. (A test
// gives a file other content, as if it changed between the import and the
// hash.)
var importRead = func(_ string, data []byte) []byte { return data }

// geometricVersion is the first git with repack --geometric, which
// consolidatePacks needs; preimport, which makes a pack per capture, waits
// for it too.
const geometricVersion = "2.32"

// packsMax is the number of small packs past which a capture merges them:
// each object lookup that misses reads every pack's index, and the merge
// stores each tree and file that changed again as a delta of its last
// version (a pack written by the import holds whole objects only), which
// makes the store a fraction of its size.
var packsMax = 8

// consolidatePacks merges the store's small packs (one per capture that
// preimport wrote) into larger ones, keeping every object they hold, once
// there are more than packsMax of them. A large pack is left as it is: one
// of a packsMax-th of all the packs' size or more (there are at most
// packsMax), or a pack of a bulk check-in of half its limit or more (a
// first checkpoint's, written by prewrite in packs of up to that limit, as
// many as its files fill: see bulkPacksFile). They would otherwise all be
// merged into one, once, at the cost of many checkpoints. A failure costs
// only time.
func (s *Store) consolidatePacks(ctx context.Context) {
	packs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.pack"))
	if len(packs) <= packsMax || !gitexec.AtLeast(geometricVersion) {
		return
	}
	bulk := s.bulkPacks()
	sizes := make([]int64, len(packs))
	var total int64
	for i, p := range packs {
		if fi, err := os.Stat(p); err == nil {
			sizes[i] = fi.Size()
			total += sizes[i]
		}
	}
	args := []string{"repack", "-d", "-q", "--geometric=2"}
	small := 0
	for i, p := range packs {
		if largePack(sizes[i], total, bulk[filepath.Base(p)]) {
			args = append(args, "--keep-pack="+filepath.Base(p))
		} else {
			small++
		}
	}
	if small <= packsMax {
		return
	}
	defer gitexec.TraceStep(fmt.Sprintf("%d small packs merged", small), time.Now())
	if _, err := s.git().Run(ctx, args...); err != nil {
		s.warnTrace("repack: %v", err)
	}
}

// largePack reports whether consolidatePacks leaves a pack of size bytes,
// of total in all, as it is; bulk says a bulk check-in of prewrite wrote it.
func largePack(size, total int64, bulk bool) bool {
	return size*int64(packsMax) >= total || bulk && size >= gitexec.BulkPackLimit/2
}

// bulkPacksFile lists the packs prewrite had git write, a name a line. The
// size of a pack cannot tell them: an import of many large files makes a
// pack as large, which the merges are for. A pack merged or repacked since
// is gone, and its name with it when the list is next written; a list lost
// (a rewind killed before it was written) costs a merge of those packs.
func (s *Store) bulkPacksFile() string { return s.scratchFile("bulkpacks") }

// packNames are the names of the store's packs (pack-<id>.pack).
func (s *Store) packNames() map[string]bool {
	packs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.pack"))
	names := make(map[string]bool, len(packs))
	for _, p := range packs {
		names[filepath.Base(p)] = true
	}
	return names
}

// bulkPacks are the packs bulkPacksFile names.
func (s *Store) bulkPacks() map[string]bool {
	data, _ := os.ReadFile(s.bulkPacksFile())
	bulk := map[string]bool{}
	for _, name := range strings.Fields(string(data)) {
		bulk[name] = true
	}
	return bulk
}

// recordBulkPacks adds the packs made since before (the names there then)
// to bulkPacksFile, and takes those no longer there out. A failure costs
// only time.
func (s *Store) recordBulkPacks(before map[string]bool) {
	listed := s.bulkPacks()
	var names []string
	added := false
	for name := range s.packNames() {
		if !before[name] {
			names, added = append(names, name), true
		} else if listed[name] {
			names = append(names, name)
		}
	}
	if !added {
		return
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		b.WriteString(name + "\n")
	}
	if err := writeCache(s.bulkPacksFile(), []byte(b.String())); err != nil {
		s.warnTrace("%s: %v", s.bulkPacksFile(), err)
	}
}

// readRegularNoFollow is readNoFollow of a file that must still be a
// regular one, of at most max bytes: its content goes into the index by id,
// where nothing would see that a FIFO (which reads as empty, opened without
// blocking) or a device was put in its place since it was looked at.
func readRegularNoFollow(full string, max int64) ([]byte, error) {
	f, err := os.OpenFile(full, os.O_RDONLY|syscallNoFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", full, fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err == nil && int64(len(data)) > max {
		err = fmt.Errorf("%s: larger than when looked at", full)
	}
	return data, err
}

// readNoFollow reads a regular file, never through a symlink put in its
// place since it was looked at.
func readNoFollow(full string) ([]byte, error) {
	f, err := os.OpenFile(full, os.O_RDONLY|syscallNoFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// warnTrace reports a failure that costs only time, under REWIND_TRACE.
func (s *Store) warnTrace(format string, a ...any) {
	if gitexec.Trace != nil {
		gitexec.TraceStep("ignored: "+fmt.Sprintf(format, a...), time.Now())
	}
}
