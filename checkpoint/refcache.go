package checkpoint

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The list of rewind's checkpoints is read from the store's files where it
// can be, sparing the git process of every checkpoint, restore and hook: the
// refs as git's files backend keeps them (a file per ref, then the
// packed-refs file), and each commit's tree and message from the commit
// cache, which maps commit ids to what for-each-ref printed of them. A
// commit never changes under its id, so an entry is never stale; a ref the
// cache has no commit for, or anything in the refs git would read
// differently, sends the list to git, which fills the cache again.

const commitCacheMagic = "rewind commit cache 1\n"

// cachedCommit is what the list takes of a commit: its tree and message.
type cachedCommit struct{ tree, contents string }

// commitCacheFile is the cache's file, or "" for a store capturing another
// work tree into an index of its own (an arm), which lists by git.
func (s *Store) commitCacheFile() string {
	if s.index != "" {
		return ""
	}
	return s.scratchFile("commitcache")
}

func encodeCommitCache(commits map[string]cachedCommit) []byte {
	b := []byte(commitCacheMagic)
	str := func(v string) {
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	b = binary.AppendUvarint(b, uint64(len(commits)))
	for id, c := range commits {
		str(id)
		str(c.tree)
		str(c.contents)
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

var errNotCommitCache = errors.New("not a commit cache")

func decodeCommitCache(data []byte) (map[string]cachedCommit, error) {
	r, ok := openCache(data, commitCacheMagic)
	if !ok {
		return nil, errNotCommitCache
	}
	n := r.uvarint()
	if !r.ok || n > uint64(len(r.rest)) {
		return nil, errNotCommitCache
	}
	commits := make(map[string]cachedCommit, n)
	for i := uint64(0); i < n && r.ok; i++ {
		id := r.str()
		commits[id] = cachedCommit{tree: r.str(), contents: r.str()}
	}
	if !r.done() {
		return nil, errNotCommitCache
	}
	return commits, nil
}

func (s *Store) readCommitCache() map[string]cachedCommit {
	file := s.commitCacheFile()
	if file == "" {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	commits, err := decodeCommitCache(data)
	if err != nil {
		return nil
	}
	return commits
}

// writeCommitCache replaces the cache with commits; a failure removes it
// (the list then asks git).
func (s *Store) writeCommitCache(commits map[string]cachedCommit) {
	file := s.commitCacheFile()
	if file == "" {
		return
	}
	if writeCache(file, encodeCommitCache(commits)) != nil {
		os.Remove(file)
	}
}

// ownRefs reads the refs under refPrefix (name to commit id) from the
// files, as git's files backend keeps them: a file of its own under
// refs/rewind/checkpoints/ wins over a line of packed-refs, and is read
// before it. ok is false when git must be asked: a store git might not take
// for a git directory (git then fails, and the failure is the store's
// health check), refs in a reftable or another repository's (commondir), a
// ref that is not a plain object id (a symbolic one, a file being written),
// or anything else these files should not hold.
func (s *Store) ownRefs() (refs map[string]string, ok bool) {
	dir := s.gitDir()
	if !looksLikeGitDir(dir) || exists(filepath.Join(dir, "reftable")) {
		return nil, false
	}
	// The loose refs first, then packed-refs, as git reads them: a
	// pack-refs meanwhile (a git gc of the procedure's, which does not take
	// rewind's lock) moves a ref from the first to the second, so that read
	// the other way round it would be in neither.
	looseRefs := map[string]string{}
	loose, err := os.ReadDir(filepath.Join(dir, filepath.FromSlash(refPrefix)))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	for _, e := range loose {
		if !e.Type().IsRegular() {
			if e.IsDir() {
				continue // refs below it are not rewind's (listOwn skips them)
			}
			return nil, false
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(refPrefix), e.Name()))
		id, rest, _ := bytes.Cut(data, []byte("\n"))
		if err != nil || len(rest) != 0 || !objectID(string(id)) || strings.HasSuffix(e.Name(), ".lock") {
			return nil, false
		}
		looseRefs[refPrefix+e.Name()] = string(id)
	}
	refs, ok = packedRefs(dir, func(name string) bool { return strings.HasPrefix(name, refPrefix) })
	if !ok {
		return nil, false
	}
	for name, id := range looseRefs { // a loose ref wins over a packed one
		refs[name] = id
	}
	return refs, true
}

// readRef reads ref in gitDir as git's files backend keeps it: its own
// file, else its line of packed-refs. ok is false for what git would read
// otherwise (a symbolic ref, a file that is not an object id).
func readRef(gitDir, ref string) (id string, found, ok bool) {
	data, err := os.ReadFile(filepath.Join(gitDir, filepath.FromSlash(ref)))
	switch {
	case err == nil:
		id, rest, _ := strings.Cut(string(data), "\n")
		return id, true, rest == "" && objectID(id)
	case !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
		return "", false, false
	}
	packed, ok := packedRefs(gitDir, func(name string) bool { return name == ref })
	id, found = packed[ref]
	return id, found, ok
}

// packedRefs reads the refs of gitDir's packed-refs file that want keeps,
// name to id (none without the file). ok is false for a file git might
// read otherwise: a line of another form, a file that cannot be read.
func packedRefs(gitDir string, want func(name string) bool) (refs map[string]string, ok bool) {
	refs = map[string]string{}
	packed, err := os.ReadFile(filepath.Join(gitDir, "packed-refs"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return refs, true
	case err != nil:
		return nil, false
	}
	for i, line := range strings.Split(string(packed), "\n") {
		switch {
		case line == "", line[0] == '^': // the end, a peeled tag
		case line[0] == '#':
			if i != 0 {
				return nil, false
			}
		default:
			id, name, found := strings.Cut(line, " ")
			if !found || !objectID(id) {
				return nil, false
			}
			if want(name) {
				refs[name] = id
			}
		}
	}
	return refs, true
}

// objectID reports whether id is an object id as git writes one: 40 or 64
// lowercase hex digits.
func objectID(id string) bool {
	return (len(id) == 40 || len(id) == 64) && strings.ToLower(id) == id && isHex(id)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, os.ErrNotExist)
}

// rememberCommit writes the commit cache again for the checkpoints kept,
// the new one c among them (its commit message is contents), beside what
// follows, so that the next list needs no git.
func (s *Store) rememberCommit(c *Checkpoint, contents string, kept []*Checkpoint) {
	if s.commits == nil {
		return
	}
	commits := make(map[string]cachedCommit, len(kept))
	for _, k := range kept {
		if commit, ok := s.commits[k.ID]; ok && !k.Procedure {
			commits[k.ID] = commit
		}
	}
	commits[c.ID] = cachedCommit{tree: c.Tree, contents: contents}
	s.commits = commits
	s.cacheWrites.Go(func() { s.writeCommitCache(commits) })
}
