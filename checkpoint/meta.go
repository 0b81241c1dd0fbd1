package checkpoint

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// meta is what a checkpoint holds that a git tree cannot: permission bits
// beyond git's one executable bit, and directories that hold no file. It is
// kept in the checkpoint's commit message, as trailers:
//
//	Rewind-Perms: 0644 0755 0755     the usual bits of files, executables, directories
//	Rewind-Perm: 0600 "secret"       a file or (ending in "/") directory with others
//	Rewind-Dir: "out"                a directory that holds no file of the checkpoint
//	Rewind-Repo: "vendor/lib"        a nested repository (its own ignore rules applied)
//
// A checkpoint without Rewind-Perms (an older one, or one crucible's procedure
// took) has no meta: a restore then keeps the permission bits it finds.
type meta struct {
	base  [3]os.FileMode         // files, executables, directories
	perms map[string]os.FileMode // the exceptions; a directory's path ends in "/"
	dirs  []string               // directories holding no file of the checkpoint
	repos []string               // nested repositories' roots
}

func (m *meta) filePerm(p string, exec bool) os.FileMode {
	if perm, ok := m.perms[p]; ok {
		return perm
	}
	if exec {
		return m.base[1]
	}
	return m.base[0]
}

func (m *meta) dirPerm(d string) os.FileMode {
	if perm, ok := m.perms[d+"/"]; ok {
		return perm
	}
	return m.base[2]
}

// sameMeta reports whether two checkpoints record the same meta.
func sameMeta(a, b *meta) bool {
	return strings.Join(a.trailers(), "\n") == strings.Join(b.trailers(), "\n")
}

// trailers renders the meta as commit message trailers.
func (m *meta) trailers() []string {
	if m == nil {
		return nil
	}
	out := []string{fmt.Sprintf("Rewind-Perms: %04o %04o %04o", m.base[0], m.base[1], m.base[2])}
	keys := make([]string, 0, len(m.perms))
	for k := range m.perms {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, fmt.Sprintf("Rewind-Perm: %04o %s", m.perms[k], strconv.Quote(k)))
	}
	for _, d := range m.dirs {
		out = append(out, "Rewind-Dir: "+strconv.Quote(d))
	}
	for _, r := range m.repos {
		out = append(out, "Rewind-Repo: "+strconv.Quote(r))
	}
	return out
}

// parseMetaTrailer reads one trailer into m (creating it on Rewind-Perms),
// and reports whether the key was a meta key.
func parseMetaTrailer(m **meta, key, value string) bool {
	switch key {
	case "Rewind-Perms":
		f := strings.Fields(value)
		if len(f) != 3 {
			return true
		}
		nm := &meta{perms: map[string]os.FileMode{}}
		for i := range f {
			v, err := strconv.ParseUint(f[i], 8, 32)
			if err != nil {
				return true
			}
			nm.base[i] = os.FileMode(v) & os.ModePerm
		}
		if *m != nil {
			nm.perms, nm.dirs, nm.repos = (*m).perms, (*m).dirs, (*m).repos
		}
		*m = nm
	case "Rewind-Perm":
		perm, rest, ok := strings.Cut(value, " ")
		v, err := strconv.ParseUint(perm, 8, 32)
		p, qerr := strconv.Unquote(rest)
		if !ok || err != nil || qerr != nil {
			return true
		}
		if *m == nil {
			*m = &meta{perms: map[string]os.FileMode{}}
		}
		(*m).perms[p] = os.FileMode(v) & os.ModePerm
	case "Rewind-Dir", "Rewind-Repo":
		if p, err := strconv.Unquote(value); err == nil {
			if *m == nil {
				*m = &meta{perms: map[string]os.FileMode{}}
			}
			if key == "Rewind-Dir" {
				(*m).dirs = append((*m).dirs, p)
			} else {
				(*m).repos = append((*m).repos, p)
			}
		}
	default:
		return false
	}
	return true
}

// metaDirs finds the directories a checkpoint records: every directory above
// a kept file, and those that hold none (found by reading each such
// directory: a subdirectory that holds no kept file and that the rule does
// not ignore is recorded, and read in turn). It returns each directory found
// with its permission bits and its keys for the listing cache (stat data
// taken now, racy ones marked: see dirKeysOf), and the directories holding
// no kept file, and whether one of them below the top holds a .git (stray:
// the listing cannot be cached). With only (the directories a partial listing listed again,
// the directories holding kept files being those of the cache's listing),
// just those and the directories below them are read: the caller has the
// others from the cache. A directory listed again that holds no kept file was
// recorded as one holding none, and still is.
func (s *Store) metaDirs(ctx context.Context, h *held, kept []verdict, since time.Time, only dirSet, prior *listCache) (found map[string]dirFound, empty []string, skipped []Skipped, stray bool, err error) {
	dirs := map[string]bool{"": true}
	for i := range kept { // (fields, not copies: see buildMeta)
		v := &kept[i]
		for d := path.Dir(v.path); d != "."; d = path.Dir(d) {
			if dirs[d] {
				break
			}
			dirs[d] = true
		}
	}
	within := func(d string) bool { return only == nil || only.holds(d) }
	for d := range only {
		if !dirs[d] {
			dirs[d] = true
			empty = append(empty, d)
		}
	}
	// Directories without a kept file, level by level.
	var level []string
	for _, d := range sortedKeys(dirs) {
		if within(d) {
			level = append(level, d)
		}
	}
	for len(level) > 0 {
		// The directories of a level are read side by side; what each
		// holds is sorted out after, in order.
		subdirs := make([][]string, len(level))
		gits := make([]bool, len(level))
		errs := make([]error, len(level))
		forEach(len(level), func(i int) { subdirs[i], gits[i], errs[i] = readSubdirs(filepath.Join(s.WorkTree, level[i])) })
		var candidates []string
		for i, d := range level {
			if err := errs[i]; err != nil {
				if !os.IsNotExist(err) {
					skipped = append(skipped, Skipped{Path: d + "/", Why: "its directory cannot be read: " + errText(err)})
				}
				continue
			}
			// A .git below the top that git did not take for a
			// repository may become one without this directory's stat
			// data changing (git init fills it in, a gitfile's gitdir
			// appears): the listing cannot be cached.
			stray = stray || (gits[i] && d != "")
			for _, name := range subdirs[i] {
				sub := name
				if d != "" {
					sub = d + "/" + name
				}
				if !dirs[sub] && name != ".git" && !hasGitComponent(sub) {
					candidates = append(candidates, sub)
				}
			}
		}
		var next []string
		if len(candidates) > 0 {
			ignored, err := s.ignoredNow(ctx, h, candidates, true)
			if err != nil {
				return nil, nil, nil, false, err
			}
			for _, c := range candidates {
				if !ignored[c] {
					dirs[c] = true
					empty = append(empty, c)
					next = append(next, c)
				}
			}
		}
		level = next
	}
	sort.Strings(empty)
	var dirList []string
	for _, d := range sortedKeys(dirs) {
		if within(d) {
			dirList = append(dirList, d)
		}
	}
	looks := make([]dirFound, len(dirList))
	forEach(len(dirList), func(i int) { looks[i] = s.lookWithDigest(dirList[i], since, prior) })
	found = make(map[string]dirFound, len(dirList))
	for i, d := range dirList {
		if looks[i].ok {
			found[d] = looks[i]
		}
	}
	return found, empty, skipped, stray, nil
}

// newMeta records the permission bits of the kept files and of the
// directories found, the directories holding no kept file, and the nested
// repositories.
func newMeta(h *held, kept []verdict, dirPerms map[string]os.FileMode, empty []string) *meta {
	m := &meta{perms: map[string]os.FileMode{}, dirs: empty}
	for _, r := range h.repos {
		if r != "" {
			m.repos = append(m.repos, r)
		}
	}
	sort.Strings(m.repos)
	// The usual bits are the commonest ones, so that most checkpoints record
	// no exception at all.
	m.base = [3]os.FileMode{0o644, 0o755, 0o755}
	counts := [3]map[os.FileMode]int{{}, {}, {}}
	for i := range kept { // (fields, not copies: see buildMeta)
		if v := &kept[i]; v.regular {
			counts[execIndex(v.perm())][v.perm()]++
		}
	}
	for _, perm := range dirPerms {
		counts[2][perm]++
	}
	for i := range counts {
		best := 0
		for perm, n := range counts[i] {
			if n > best || (n == best && perm < m.base[i]) {
				m.base[i], best = perm, n
			}
		}
	}
	for i := range kept {
		if v := &kept[i]; v.regular && v.perm() != m.base[execIndex(v.perm())] {
			m.perms[v.path] = v.perm()
		}
	}
	for d, perm := range dirPerms {
		if d != "" && perm != m.base[2] {
			m.perms[d+"/"] = perm
		}
	}
	return m
}

// readSubdirs returns the names of the directories in dir, sorted (os.ReadDir
// would sort every entry; only directories matter here), and whether dir
// holds a .git entry. Entries whose type the file system does not give are
// looked at with lstat (by os.File.ReadDir).
func readSubdirs(dir string) ([]string, bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	if err != nil {
		return nil, false, err
	}
	var out []string
	git := false
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
		git = git || strings.EqualFold(e.Name(), ".git")
	}
	sort.Strings(out)
	return out, git, nil
}

// execIndex is 1 for bits git records as executable (the owner's x), else 0.
func execIndex(perm os.FileMode) int {
	if perm&0o100 != 0 {
		return 1
	}
	return 0
}

// errText is an error without the path an *os.PathError repeats.
func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// readBlobs reads the contents of blobs, in order, with one cat-file.
func (s *Store) readBlobs(ctx context.Context, ids []string) ([][]byte, error) {
	var in bytes.Buffer
	for _, id := range ids {
		in.WriteString(id + "\n")
	}
	out, err := s.git().RunInput(ctx, &in, "cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	r := bufio.NewReader(bytes.NewReader(out))
	blobs := make([][]byte, 0, len(ids))
	for range ids {
		header, err := r.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("cat-file: %w", err)
		}
		f := strings.Fields(header)
		if len(f) != 3 {
			return nil, fmt.Errorf("cat-file: %s", strings.TrimSpace(header))
		}
		n, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, fmt.Errorf("cat-file: %s", strings.TrimSpace(header))
		}
		data := make([]byte, n+1)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("cat-file: %w", err)
		}
		blobs = append(blobs, data[:n])
	}
	return blobs, nil
}

// readObjects reads every object a restore will write, before it writes
// anything: a damaged store must fail the restore before the first change,
// never halfway through it. One cat-file reads them whole (which finds a
// damaged one) and names a missing one. The content of the ids that are
// keys of keep is kept there, up to room bytes in all; past it their values
// stay nil.
func (s *Store) readObjects(ctx context.Context, ids []string, keep map[string][]byte, room int64) error {
	if len(ids) == 0 || s.readObjectsDirect(ids, keep, room) {
		return nil
	}
	list := strings.Join(ids, "\n") + "\n"
	check := &batchCheck{keep: keep, room: room}
	err := s.git().Stream(ctx, strings.NewReader(list), check, "cat-file", "--batch")
	if err == nil && check.missing != "" {
		err = fmt.Errorf("object %s is missing", check.missing)
	}
	if err != nil {
		return fmt.Errorf("the store cannot read what the checkpoint holds (nothing was changed): %w", err)
	}
	return nil
}

// readObjectsDirect is readObjects by reading the store's files (see
// objectReader), each object checked against its id, within room bytes
// (and as many again for the deltas and bases on their way) in all. It
// reports false, keeping nothing, when it cannot read one (missing,
// damaged, not a blob, past the room): then cat-file reads them and says
// why.
func (s *Store) readObjectsDirect(ids []string, keep map[string][]byte, room int64) bool {
	r := newObjectReader(filepath.Join(s.gitDir(), "objects"), len(ids[0]) == 64)
	r.budget = 2 * room
	defer r.close()
	for _, id := range ids {
		raw, err := hex.DecodeString(id)
		var typ int
		var data []byte
		if err == nil {
			typ, data, err = r.read(raw)
		}
		if err == nil && typ != packBlob {
			err = fmt.Errorf("%s is not a blob", id)
		}
		if err != nil {
			s.warnTrace("objects to write: %v; asking git", err)
			for k := range keep {
				keep[k] = nil
			}
			return false
		}
		if got, want := keep[id]; want && got == nil && int64(len(data)) <= room {
			room -= int64(len(data))
			keep[id] = data
		}
	}
	return true
}

// batchCheck reads cat-file --batch output as it comes, keeping the first
// object reported missing and the content of the objects keep wants.
type batchCheck struct {
	line    []byte // a header line read in part
	skip    int    // bytes of content (and its newline) still to pass over
	missing string
	keep    map[string][]byte // ids whose content is wanted, filled in as read
	room    int64             // bytes of content keep may still take
	id      string            // the object whose content is being kept
	kept    []byte            // its content (and newline) so far
}

func (b *batchCheck) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if b.skip > 0 {
			k := min(b.skip, len(p))
			if b.kept != nil {
				b.kept = append(b.kept, p[:k]...)
			}
			b.skip -= k
			p = p[k:]
			if b.skip == 0 && b.kept != nil {
				b.keep[b.id] = b.kept[:len(b.kept)-1] // without cat-file's newline
				b.kept = nil
			}
			continue
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			b.line = append(b.line, p...)
			break
		}
		header := string(append(b.line, p[:i]...))
		b.line, p = b.line[:0], p[i+1:]
		f := strings.Fields(header)
		switch {
		case len(f) == 2 && f[1] == "missing":
			if b.missing == "" {
				b.missing = f[0]
			}
		case len(f) == 3:
			size, err := strconv.Atoi(f[2])
			if err != nil || size < 0 {
				return 0, fmt.Errorf("cat-file: unexpected header %q", header)
			}
			b.skip = size + 1
			if data, want := b.keep[f[0]]; want && data == nil && int64(size) <= b.room {
				b.room -= int64(size)
				b.id, b.kept = f[0], make([]byte, 0, size+1)
			}
		default:
			return 0, fmt.Errorf("cat-file: unexpected header %q", header)
		}
	}
	return n, nil
}

// openNoFollow flags: never through a symlink, never wait on a fifo.
const syscallNoFollow = unix.O_NOFOLLOW | unix.O_NONBLOCK

func readFull(r io.Reader, buf []byte) (int, error) {
	n, err := io.ReadFull(r, buf)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return n, err
}
