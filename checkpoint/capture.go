package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
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
	return writeAtomic(filepath.Join(info, "exclude"), b.Bytes(), 0o600)
}

// capture brings the store's index to the work tree's current state and writes
// its tree. maxSize <= 0 means no limit.
func (s *Store) capture(ctx context.Context, maxSize int64) (*capture, error) {
	if err := s.writeExcludes(); err != nil {
		return nil, err
	}
	paths, err := s.listPaths(ctx, s.WorkTree, "")
	if err != nil {
		return nil, err
	}
	for _, p := range s.projectTracked(ctx) {
		paths = append(paths, p)
	}
	paths = dedupe(paths)

	keep, drop, skipped := s.classify(paths, maxSize)
	c := &capture{skipped: skipped}
	g := s.git()
	if len(drop) > 0 {
		if _, err := g.RunInput(ctx, nulJoin(drop), "update-index", "--force-remove", "-z", "--stdin"); err != nil {
			return nil, err
		}
	}
	if _, err := g.RunInput(ctx, nulJoin(keep), "update-index", "--add", "--remove", "--replace", "-z", "--stdin"); err != nil {
		return nil, err
	}
	// Whatever else the index holds (a path that became a directory, a gitlink
	// left by another tool) is dropped, so the tree is exactly keep.
	listed, err := g.Run(ctx, "ls-files", "-z", "--cached")
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, p := range keep {
		want[p] = true
	}
	var extra []string
	for _, p := range splitNul(listed) {
		if !want[p] {
			extra = append(extra, p)
		} else {
			c.files++
		}
	}
	if len(extra) > 0 {
		if _, err := g.RunInput(ctx, nulJoin(extra), "update-index", "--force-remove", "-z", "--stdin"); err != nil {
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

// listPaths lists the files git would capture under dir (the work tree or a
// nested repository in it), as paths relative to the work tree. A nested
// repository shows up as "sub/" and is listed through its own work tree, so its
// files are captured one by one and never as a gitlink.
func (s *Store) listPaths(ctx context.Context, dir, prefix string) ([]string, error) {
	g := s.git()
	g.WorkTree = dir
	args := []string{"ls-files", "-z", "--others", "--exclude-standard"}
	if prefix == "" {
		args = append(args, "--cached")
	}
	out, err := g.Run(ctx, args...)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, p := range splitNul(out) {
		if strings.HasSuffix(p, "/") {
			nested, err := s.listPaths(ctx, filepath.Join(dir, p), prefix+p)
			if err != nil {
				return nil, err
			}
			paths = append(paths, nested...)
			continue
		}
		paths = append(paths, prefix+p)
	}
	return paths, nil
}

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
	out, err := gitexec.Project{Dir: s.WorkTree}.Run(ctx, "ls-files", "-z", "--cached")
	if err != nil {
		return nil
	}
	return splitNul(out)
}

// classify sorts paths into those to keep (existing regular files and symlinks
// under the limit and readable), those to drop from the index (gone, or no
// longer eligible), and the skipped ones to report. Stat calls run in parallel:
// this is the one walk a checkpoint costs.
func (s *Store) classify(paths []string, maxSize int64) (keep, drop []string, skipped []Skipped) {
	type verdict struct {
		keep bool
		skip *Skipped
	}
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
			keep = append(keep, paths[i])
		default:
			drop = append(drop, paths[i])
			if v.skip != nil {
				skipped = append(skipped, *v.skip)
			}
		}
	}
	return keep, drop, skipped
}

func (s *Store) judge(rel string, maxSize int64) (v struct {
	keep bool
	skip *Skipped
}) {
	if hasGitComponent(rel) {
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
		v.keep = true
	}
	return v
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
