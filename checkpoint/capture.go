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

	"golang.org/x/sys/unix"

	"rewind/gitexec"
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

// capture is the state of the work tree as a checkpoint would hold it.
type capture struct {
	tree    string
	files   int
	skipped []Skipped
}

// writeExcludes writes git/info/exclude: the default excludes and the work
// tree's .rewindignore. (A .gitignore inside a git directory is never read.)
func (s *Store) writeExcludes() error {
	var b bytes.Buffer
	b.WriteString("# written by rewind: the default excludes, then .rewindignore\n")
	for _, p := range DefaultExcludes {
		b.WriteString(p + "\n")
	}
	if data, err := os.ReadFile(filepath.Join(s.WorkTree, ".rewindignore")); err == nil {
		b.Write(data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	info := filepath.Join(s.gitDir(), "info")
	if err := os.MkdirAll(info, 0o700); err != nil {
		return err
	}
	return writeIfChanged(filepath.Join(info, "exclude"), b.Bytes(), 0o600)
}

// capture brings the store's index to the work tree's current state and writes
// its tree. maxSize <= 0 means no limit.
//
// force names paths to capture even when ignored (a restore passes the paths it
// may overwrite, so its safety checkpoint holds what they hold now).
func (s *Store) capture(ctx context.Context, maxSize int64, force ...string) (*capture, error) {
	if err := s.writeExcludes(); err != nil {
		return nil, err
	}
	// Only what changed goes through update-index: paths new to the index, and
	// those git sees differ from it. The other entries keep their stat data and
	// the index keeps its cached trees, so write-tree rehashes only the
	// directories that changed: a checkpoint after a small change costs about
	// one directory walk and one stat walk, which run side by side (they only
	// read), as do the listings of the index and of the project.
	g := s.git()
	var paths, tracked []string
	var indexed, differ []byte
	err := parallel(
		func() (err error) { paths, err = s.listPaths(ctx); return err },
		func() error { tracked = s.projectTracked(ctx); return nil },
		func() (err error) { indexed, err = g.Run(ctx, "ls-files", "-z", "--cached"); return err },
		func() (err error) {
			differ, err = g.Run(ctx, "diff-files", "-z", "--name-only", "--no-ext-diff")
			return err
		},
	)
	if err != nil {
		return nil, err
	}
	paths = append(paths, tracked...)
	paths = append(paths, force...)
	paths = dedupe(paths)
	inIndex := map[string]bool{}
	for _, p := range splitNul(indexed) {
		inIndex[p] = true
	}
	changed := map[string]bool{}
	for _, p := range splitNul(differ) {
		changed[p] = true
	}
	// An entry git sees unchanged was judged when it was added: only the rest
	// need a look.
	var unchanged, judge []string
	for _, p := range paths {
		if inIndex[p] && !changed[p] {
			unchanged = append(unchanged, p)
		} else {
			judge = append(judge, p)
		}
	}
	s.dirOK.Clear()
	keep, skipped := s.classify(judge, maxSize)
	c := &capture{skipped: skipped, files: len(keep) + len(unchanged)}
	want := make(map[string]bool, len(paths))
	for _, p := range unchanged {
		want[p] = true
	}
	var update, remove []string
	var fresh []verdict // regular files to hash
	for _, v := range keep {
		want[v.path] = true
		update = append(update, v.path)
		if v.regular {
			fresh = append(fresh, v)
		}
	}
	// Whatever else the index holds (a file gone, ignored, over the limit, a
	// path that became a directory) is dropped, so the tree is exactly keep.
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
		if _, err := g.RunInput(ctx, nulJoin(update), "update-index", "--add", "--remove", "--replace", "-z", "--stdin"); err != nil {
			return nil, err
		}
	}
	out, err := g.Run(ctx, "write-tree")
	if err != nil {
		return nil, err
	}
	c.tree = strings.TrimSpace(string(out))
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
// failures here are ignored.
func (s *Store) prewrite(ctx context.Context, files []verdict) {
	if len(files) < prewriteMin {
		return
	}
	// Deal the files round-robin by size, largest first, so the shares weigh
	// about the same.
	sorted := append([]verdict(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].size > sorted[j].size })
	shares := make([][]string, runtime.NumCPU())
	for i, v := range sorted {
		shares[i%len(shares)] = append(shares[i%len(shares)], v.path)
	}
	var jobs []func() error
	for i, share := range shares {
		if len(share) == 0 {
			continue
		}
		g := s.git()
		g.IndexFile = filepath.Join(s.Dir, fmt.Sprintf("prewrite-index-%d", i))
		// Leftovers of a rewind killed here; the store lock is held.
		os.Remove(g.IndexFile)
		os.Remove(g.IndexFile + ".lock")
		defer os.Remove(g.IndexFile)
		jobs = append(jobs, func() error {
			// update-index, not hash-object: it never follows a symlink nor
			// opens a fifo, and --remove leaves out a file gone since.
			g.RunInput(ctx, nulJoin(share), "update-index", "--add", "--remove", "-z", "--stdin")
			return nil
		})
	}
	parallel(jobs...)
}

// listPaths lists the files git would capture, relative to the work tree.
//
// git lists a nested repository that the index holds nothing of as "sub/" and
// does not descend into it. Listing it through its own work tree would be wrong
// twice: the store's index (whose paths are relative to the root) would hide
// sub/README.md behind the root's README.md, and the root's .gitignore would not
// apply inside it. Instead a scratch index holds one placeholder entry per
// nested repository found so far, which makes git walk into those directories
// from the root with every ignore rule in force; repeat until no new nested
// repository turns up. The placeholder never exists on disk, and nothing on
// disk is renamed.
func (s *Store) listPaths(ctx context.Context) ([]string, error) {
	g := s.git()
	out, err := g.Run(ctx, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	if err != nil {
		return nil, err
	}
	var paths, nested []string
	split := func(out []byte) {
		for _, p := range splitNul(out) {
			if strings.HasSuffix(p, "/") {
				nested = append(nested, p)
			} else {
				paths = append(paths, p)
			}
		}
	}
	split(out)
	if len(nested) == 0 {
		return paths, nil
	}
	scratch := g
	scratch.IndexFile = filepath.Join(s.Dir, "walk-index")
	defer os.Remove(scratch.IndexFile)
	// Leftovers of a rewind killed here; the store lock is held.
	os.Remove(scratch.IndexFile)
	os.Remove(scratch.IndexFile + ".lock")
	empty, err := g.RunInput(ctx, strings.NewReader(""), "hash-object", "-w", "--stdin")
	if err != nil {
		return nil, err
	}
	blob := strings.TrimSpace(string(empty))
	for len(nested) > 0 {
		batch := nested
		nested = nil
		var info strings.Builder
		args := []string{"ls-files", "-z", "--others", "--exclude-standard", "--"}
		for _, dir := range batch {
			fmt.Fprintf(&info, "100644 %s\t%s%s\x00", blob, dir, walkPlaceholder)
			args = append(args, ":(literal)"+dir)
		}
		if _, err := scratch.RunInput(ctx, strings.NewReader(info.String()), "update-index", "--add", "-z", "--index-info"); err != nil {
			return nil, err
		}
		out, err := scratch.Run(ctx, args...)
		if err != nil {
			return nil, err
		}
		split(out)
	}
	return paths, nil
}

// walkPlaceholder is the name of the placeholder entries of listPaths. A real
// file of that name inside a nested repository would be hidden from the listing;
// the control characters make that practically impossible.
const walkPlaceholder = "\x01rewind-walk\x01"

// projectTracked lists the files the project's own git tracks, which a default
// exclude must never drop (a Go package named build/ is source). Outside a git
// repository it is empty.
func (s *Store) projectTracked(ctx context.Context) []string {
	top, err := gitexec.Project{Dir: s.WorkTree}.Run(ctx, "rev-parse", "--show-toplevel")
	if err != nil || filepath.Clean(strings.TrimSpace(string(top))) != s.WorkTree {
		// Not the root of a repository: the project's paths would not be
		// relative to the work tree.
		return nil
	}
	// Only the tracked files a default exclude matches: the others the listing
	// has already.
	patterns := filepath.Join(s.Dir, "default-excludes")
	if err := writeIfChanged(patterns, []byte(strings.Join(DefaultExcludes, "\n")+"\n"), 0o600); err != nil {
		return nil
	}
	out, err := gitexec.Project{Dir: s.WorkTree}.Run(ctx, "ls-files", "-z", "--cached", "--ignored", "--exclude-from="+patterns)
	if err != nil {
		return nil
	}
	return splitNul(out)
}

// classify sorts out the paths to keep (existing regular files and symlinks
// under the limit and readable) and the skipped ones to report; the rest (gone,
// or not files) are left out. Stat calls run in parallel:
// this is the one walk a checkpoint costs.
func (s *Store) classify(paths []string, maxSize int64) (keep []verdict, skipped []Skipped) {
	verdicts := make([]verdict, len(paths))
	workers := runtime.NumCPU() * 4
	var wg sync.WaitGroup
	next := make(chan int, 256)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				verdicts[i] = s.judge(paths[i], maxSize)
			}
		}()
	}
	for i := range paths {
		next <- i
	}
	close(next)
	wg.Wait()
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
	skip    *Skipped
}

func (s *Store) judge(rel string, maxSize int64) (v verdict) {
	if hasGitComponent(rel) || s.symlinkParent(rel) {
		// below a symlink: git refuses the path ("beyond a symbolic link"),
		// and the symlink itself is captured as a symlink
		return v
	}
	full := filepath.Join(s.WorkTree, rel)
	fi, err := os.Lstat(full)
	if err != nil {
		return v // gone: update-index --remove drops it
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		v.keep = true
	case !fi.Mode().IsRegular():
		// sockets, fifos, devices: nothing to snapshot
	case maxSize > 0 && fi.Size() > maxSize:
		v.skip = &Skipped{Path: rel, Why: fmt.Sprintf("over the size limit (%d bytes)", fi.Size())}
	case unix.Access(full, unix.R_OK) != nil:
		v.skip = &Skipped{Path: rel, Why: "unreadable"}
	default:
		v.keep, v.regular, v.size = true, true, fi.Size()
	}
	return v
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
	for _, part := range strings.Split(rel, "/") {
		if part == ".git" {
			return true
		}
	}
	return false
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

var errNoCheckpoints = errors.New("no checkpoints")
