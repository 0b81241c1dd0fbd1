package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The listing cache (rewind-listcache) spares a capture git's walk of the
// work tree, the part of a checkpoint that costs what a `git status` costs
// on top of the stat of every file. It is git's untracked cache done on
// rewind's side of the rule: it holds what the last listing held (the paths,
// which of them the project's git tracks), every directory that listing
// walked with its stat data and its .gitignore's, and a digest of every other
// input of the listing (listingInputs: the project's index, its config,
// info/exclude, the excludes file, .rewindignore, the directories kept
// private).
//
// A directory's entries cannot change without its stat data changing (the
// mtime, or the ctime no tool can set back), nor its .gitignore's content
// without that file's. So a capture stats the directories (a few thousand at
// 100,000 files) and:
//
//   - when every input and every directory is as the cache holds it, the
//     listing is the cache's (and so are the directories without files the
//     checkpoint records, when the files kept lie in the same directories);
//   - when some directories changed, those whose names are still the ones
//     git listed (a digest of each entry's name and kind, and of the
//     .gitignore's content: namesDigest) keep the cache's listing, and only
//     their stat data is taken again: a file written anew (a restore, a
//     checkout, an editor's save through a temporary file) changes its
//     directory's times, not what git lists there;
//   - git lists the other changed subtrees only (pathspecs), and the rest
//     is the cache's;
//   - else (an input changed, the root changed, too many directories) git
//     lists the whole tree, as without the cache.
//
// Exactness: the stat data recorded for a directory is trusted only when its
// last change lies before the second, less one, in which the capture began:
// a directory changed while (or just before) git read it is listed again
// next time, whatever its times say (file systems with whole-second or
// coarse clock times). A names digest is recorded for a directory git
// listed only when its stat data is trusted and the same after the names
// were read; one a capture confirms keeps its digest with the stat data of
// then, marked racy if it changed in the capture's second (so read again).
// A file system whose directories do not change their times as entries come
// and go (network and FUSE file systems, some others) never uses the cache:
// see dirCacheTrusted. Nested repositories, submodules and unreadable
// directories make the listing uncached (their inputs are other
// repositories'), and so does a .git below the top that git did not take for
// a repository (it becomes one, its directory's stat data unchanged, when git
// init fills it in or a gitfile's gitdir appears). The cache is read whole
// and checked (its own checksum, then every input); one that fails is
// ignored, never an error.

const listCacheMagic = "rewind listing cache 3\n"

// dirKeys is what the cache compares of a directory: its own stat data and
// its .gitignore's (zero when it has none).
type dirKeys struct{ dir, ignore statKey }

// racyKeys marks a directory to list again whatever its stat says.
var racyKeys = dirKeys{dir: statKey{mode: 1}}

type listCache struct {
	inputs   []byte             // listingInputs' digest
	paths    []string           // held paths, sorted
	tracked  map[string]bool    // those the project's git tracks
	dirs     map[string]dirKeys // every directory walked ("" the root)
	parents  []byte             // digest of the directories holding kept files
	empty    []string           // the directories holding none (meta.dirs)
	dirPerms map[string]os.FileMode
	digests  map[string][]byte // a directory's names (namesDigest), where known
}

// listCacheFile is the cache's file, or "" for a store capturing another
// work tree into an index of its own (an arm), which keeps no cache.
func (s *Store) listCacheFile() string {
	if s.index != "" {
		return ""
	}
	return s.scratchFile("listcache")
}

func (c *listCache) encode() []byte {
	var b []byte
	b = append(b, listCacheMagic...)
	str := func(v string) {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	key := func(k statKey) {
		for _, v := range [8]uint64{k.dev, k.ino, k.mode, k.size, k.mtime, k.ctime, k.uid, k.gid} {
			b = binary.AppendUvarint(b, v)
		}
	}
	str(string(c.inputs))
	str(string(c.parents))
	b = binary.AppendUvarint(b, uint64(len(c.paths)))
	prev := ""
	for _, p := range c.paths {
		shared := 0
		for shared < len(p) && shared < len(prev) && p[shared] == prev[shared] {
			shared++
		}
		b = binary.AppendUvarint(b, uint64(shared))
		str(p[shared:])
		if c.tracked[p] {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		prev = p
	}
	dirs := make([]string, 0, len(c.dirs))
	for d := range c.dirs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	b = binary.AppendUvarint(b, uint64(len(dirs)))
	for _, d := range dirs {
		str(d)
		key(c.dirs[d].dir)
		key(c.dirs[d].ignore)
		b = binary.AppendUvarint(b, uint64(c.dirPerms[d]))
		str(string(c.digests[d]))
	}
	b = binary.AppendUvarint(b, uint64(len(c.empty)))
	for _, d := range c.empty {
		str(d)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

var errNotListCache = errors.New("not a listing cache")

func decodeListCache(data []byte) (*listCache, error) {
	r, ok := openCache(data, listCacheMagic)
	if !ok {
		return nil, errNotListCache
	}
	key := func() (k statKey) {
		f := [8]*uint64{&k.dev, &k.ino, &k.mode, &k.size, &k.mtime, &k.ctime, &k.uid, &k.gid}
		for _, p := range f {
			*p = r.uvarint()
		}
		return k
	}
	c := &listCache{tracked: map[string]bool{}, dirs: map[string]dirKeys{}, dirPerms: map[string]os.FileMode{}, digests: map[string][]byte{}}
	c.inputs = []byte(r.str())
	c.parents = []byte(r.str())
	n := r.uvarint()
	if !r.ok || n > uint64(len(r.rest)) {
		return nil, errNotListCache
	}
	arena := newPathArena(n)
	tracked := make([]bool, 0, n)
	for i := uint64(0); i < n && r.ok; i++ {
		shared := r.uvarint()
		tail := r.uvarint()
		if !r.ok || tail > uint64(len(r.rest)) || !arena.add(shared, r.rest[:tail]) || len(r.rest) == int(tail) {
			return nil, errNotListCache
		}
		tracked = append(tracked, r.rest[tail] == 1)
		r.rest = r.rest[tail+1:]
	}
	c.paths = arena.strings()
	c.tracked = make(map[string]bool, count(tracked))
	for i, p := range c.paths {
		if tracked[i] {
			c.tracked[p] = true
		}
	}
	n = r.uvarint()
	for i := uint64(0); i < n && r.ok; i++ {
		d := r.str()
		c.dirs[d] = dirKeys{key(), key()}
		c.dirPerms[d] = os.FileMode(r.uvarint()) & os.ModePerm
		if digest := r.str(); digest != "" {
			c.digests[d] = []byte(digest)
		}
	}
	n = r.uvarint()
	for i := uint64(0); i < n && r.ok; i++ {
		c.empty = append(c.empty, r.str())
	}
	if !r.done() {
		return nil, errNotListCache
	}
	return c, nil
}

// readListCache returns the cache, or nil when there is none that can be
// read.
func (s *Store) readListCache() *listCache {
	file := s.listCacheFile()
	if file == "" {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	c, err := decodeListCache(data)
	if err != nil {
		return nil
	}
	return c
}

// writeListCache replaces the cache; without one (c nil, or a failure) the
// old one goes, since it describes a listing that no longer is.
func (s *Store) writeListCache(c *listCache) {
	file := s.listCacheFile()
	if file == "" {
		return
	}
	if c == nil || rewriteCache(file, c.encode()) != nil {
		os.Remove(file)
	}
}

// dirFound is what a look at a directory found.
type dirFound struct {
	ok     bool // it is a directory
	perm   os.FileMode
	keys   dirKeys
	digest []byte // its names (namesDigest), when known to be those git listed
}

// lookAtDir stats a directory and its .gitignore. One of them changed at or
// after since gets racyKeys, so that the next capture lists it again.
func (s *Store) lookAtDir(d string, since time.Time) dirFound {
	full := filepath.Join(s.WorkTree, d)
	fi, err := os.Lstat(full)
	if err != nil || !fi.IsDir() {
		return dirFound{keys: racyKeys}
	}
	f := dirFound{ok: true, perm: fi.Mode().Perm(), keys: dirKeys{dir: keyOf(fi)}}
	if gi, err := os.Lstat(filepath.Join(full, ".gitignore")); err == nil {
		f.keys.ignore = keyOf(gi)
		// (a symlink's own times do not change with what it points to,
		// which a git before 2.32 reads)
		if !later(ctime(gi), gi.ModTime()).Before(since) || gi.Mode()&os.ModeSymlink != 0 {
			f.keys = racyKeys
		}
	}
	if !later(ctime(fi), fi.ModTime()).Before(since) {
		f.keys = racyKeys
	}
	return f
}

// changedDirs stats every directory the cache holds, side by side, and
// returns those whose stat data (or whose .gitignore's) is not the cache's,
// outermost only: a subtree listed again is listed whole. Of those, the ones
// whose names are still those the cache recorded (namesDigest: a file
// written anew, as a restore, an editor's save or a checkout write one, or a
// file made and deleted since) are confirmed instead: their listing is the
// cache's, and only their stat data is taken again.
func (s *Store) changedDirs(c *listCache) (out, confirmed []string) {
	dirs := make([]string, 0, len(c.dirs))
	for d := range c.dirs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	changed := make([]bool, len(dirs))
	same := make([]bool, len(dirs))
	forEach(len(dirs), func(i int) {
		// The racy cut is irrelevant here: a key is only compared.
		d := dirs[i]
		k := s.lookAtDir(d, farFuture).keys
		changed[i] = k != c.dirs[d] || k == racyKeys
		if changed[i] && c.digests[d] != nil {
			// Read now, in the capture: a change after it is one of the
			// capture's second, which the stat data recorded marks racy
			// (dirRacyCut), so that the next capture looks again.
			digest, ok := namesDigest(s.WorkTree, d)
			same[i] = ok && bytes.Equal(digest, c.digests[d])
		}
	})
	for i, d := range dirs {
		if !changed[i] {
			continue
		}
		if same[i] {
			confirmed = append(confirmed, d)
			continue
		}
		if d == "" {
			return []string{""}, nil
		}
		if len(out) > 0 && within(d, out[len(out)-1]) {
			continue // sorted: an enclosing directory comes first
		}
		out = append(out, d)
	}
	// A confirmed directory below one listed again is listed with it.
	kept := confirmed[:0]
	set := newDirSet(out)
	for _, d := range confirmed {
		if !set.holds(d) {
			kept = append(kept, d)
		}
	}
	return out, kept
}

// namesDigest digests what a directory's listing depends on besides the
// listing's inputs: the name and kind of each of its entries and the content
// of its .gitignore. With the same names, kinds and .gitignore, git lists the
// same files there (what lies below a subdirectory is that one's own). false
// when it cannot be read, or its .gitignore is a symlink (read through by a
// git before 2.32, which this does not follow), or it holds a .git below the
// work tree's top: whether git takes it for a nested repository depends on
// what that .git holds (a valid repository, a gitfile naming one), not on
// its name. (The top's own .git is the project's: its listing's inputs.)
func namesDigest(workTree, d string) ([]byte, bool) {
	dir := filepath.Join(workTree, d)
	f, err := os.OpenFile(dir, os.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, false
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	sum := sha256.New()
	for _, e := range entries {
		if d != "" && strings.EqualFold(e.Name(), ".git") {
			return nil, false
		}
		fmt.Fprintf(sum, "%d %s\x00", e.Type(), e.Name())
		if e.Name() == ".gitignore" {
			if !e.Type().IsRegular() {
				return nil, false
			}
			data, err := os.ReadFile(filepath.Join(dir, ".gitignore"))
			if err != nil {
				return nil, false
			}
			fmt.Fprintf(sum, "%d:%s", len(data), data)
		}
	}
	return sum.Sum(nil)[:16], true
}

// lookWithDigest is lookAtDir with the directory's names digest, for a
// directory git listed in this capture: known when its stat data is trusted
// (its last change before the capture began, so git listed what is there)
// and the same after the names were read (nothing changed in between). A
// directory whose stat data is the one prior recorded keeps prior's digest.
func (s *Store) lookWithDigest(d string, since time.Time, prior *listCache) dirFound {
	f := s.lookAtDir(d, since)
	if !f.ok || f.keys == racyKeys {
		return f
	}
	if prior != nil && prior.digests[d] != nil && prior.dirs[d] == f.keys {
		f.digest = prior.digests[d]
		return f
	}
	if digest, ok := namesDigest(s.WorkTree, d); ok && s.lookAtDir(d, farFuture).keys == f.keys {
		f.digest = digest
	}
	return f
}

var farFuture = time.Unix(1<<40, 0)

// parentsDigest identifies the set of directories holding the kept files:
// with the directories unchanged, the same set means the same directories
// holding none (metaDirs).
func parentsDigest(kept []verdict) []byte {
	set := map[string]bool{}
	last := ""
	for i := range kept { // (fields, not copies: see buildMeta)
		v := &kept[i]
		d := v.path[:max(strings.LastIndexByte(v.path, '/'), 0)]
		if d == last {
			continue
		}
		last = d
		set[d] = true
	}
	sum := sha256.Sum256([]byte(strings.Join(sortedKeys(set), "\x00")))
	return sum[:]
}

// replaceUnder returns paths with every path under one of dirs removed and
// fresh added, sorted and without repeats.
func replaceUnder(paths []string, dirs dirSet, fresh []string) []string {
	kept := make([]string, 0, len(paths))
	for _, p := range paths {
		if !dirs.holds(p) {
			kept = append(kept, p)
		}
	}
	sort.Strings(fresh)
	if !sort.StringsAreSorted(kept) {
		kept = append(kept, fresh...)
		sort.Strings(kept)
		return dedupeSorted(kept)
	}
	// Both in order (as the cache keeps its listing): merged.
	out := make([]string, 0, len(kept)+len(fresh))
	for len(kept) > 0 && len(fresh) > 0 {
		if kept[0] <= fresh[0] {
			out, kept = append(out, kept[0]), kept[1:]
		} else {
			out, fresh = append(out, fresh[0]), fresh[1:]
		}
	}
	out = append(append(out, kept...), fresh...)
	return dedupeSorted(out)
}

// count is the number of true values.
func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// dirSet is a set of directories that tells whether a path lies in one at
// the cost of the path's depth (underAny costs one comparison per directory:
// 100,000 paths against a few hundred directories took a second).
type dirSet map[string]bool

func newDirSet(dirs []string) dirSet {
	set := make(dirSet, len(dirs))
	for _, d := range dirs {
		set[d] = true
	}
	return set
}

// holds reports whether p is one of the directories or lies below one.
func (set dirSet) holds(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] == '/' && set[p[:i]] {
			return true
		}
	}
	return set[p]
}

func dedupeSorted(paths []string) []string {
	out := paths[:0]
	for i, p := range paths {
		if i == 0 || p != paths[i-1] {
			out = append(out, p)
		}
	}
	return out
}
