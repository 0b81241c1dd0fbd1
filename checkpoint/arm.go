package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rewind-cli/rewind/gitexec"
)

// An A/B replay runs each arm in a clone of the project, never in the work
// tree: WriteTree puts a checkpoint's files into an arm, CreateFrom records
// an arm's tree in this store when its run ends, and NumStat compares two
// checkpoints' trees.

// ErrNoStore means the store has not been created yet.
var ErrNoStore = errors.New("the store has no checkpoints yet")

// WriteTree writes the files of checkpoint ref into dir (an arm's work tree),
// with the content, type and executable bit git records; dir's other files
// are left as they are. The store is only read. Bits git does not record
// (kept in the checkpoint's metadata for restores) are not set: an arm is a
// scratch copy whose own git sees the same files.
func (s *Store) WriteTree(ctx context.Context, ref, dir string) (*Checkpoint, error) {
	if !s.Exists() {
		return nil, ErrNoStore
	}
	cps, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	c, err := Resolve(cps, ref)
	if err != nil {
		return nil, err
	}
	index, cleanup, err := tempIndex(dir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	g := gitexec.Shadow{GitDir: s.gitDir(), WorkTree: dir, IndexFile: index, ConfigHome: s.home()}
	if _, err := g.Run(ctx, "read-tree", c.Tree); err != nil {
		return nil, err
	}
	if _, err := g.Run(ctx, "checkout-index", "-a", "-f"); err != nil {
		return nil, err
	}
	return c, nil
}

// tempIndex names an index file beside dir (never inside it, where the arm's
// agents work, nor in the store, whose files a concurrent rewind reads) that
// does not exist yet: git makes it.
func tempIndex(dir string) (string, func(), error) {
	f, err := os.CreateTemp(filepath.Dir(filepath.Clean(dir)), ".rewind-arm-index-")
	if err != nil {
		return "", nil, err
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return "", nil, err
	}
	return name, func() { os.Remove(name); os.Remove(name + ".lock") }, nil
}

// CreateFrom records dir's tree (an arm's work tree: a clone of the project)
// as a checkpoint of this store, by the same rule as Create: what the arm's
// own git tracks or does not ignore, minus the default excludes. It uses an
// index of its own, so the store's stat cache of the work tree stays as it
// is, and it takes the store's lock like Create.
func (s *Store) CreateFrom(ctx context.Context, dir string, opt CreateOptions) (*Created, error) {
	if !s.Exists() {
		return nil, ErrNoStore
	}
	if err := s.checkOwner(); err != nil {
		return nil, err
	}
	index, cleanup, err := tempIndex(dir)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	arm := &Store{Dir: s.Dir, WorkTree: dir, Now: s.Now, Wait: s.Wait, Warn: s.Warn, index: index}
	made, err := arm.Create(ctx, opt)
	// The arm's index goes: so does the shared part it named (git writes it
	// beside the store's own).
	arm.dropSharedPart(namedSharedPart(index))
	return made, err
}

// DiffStat is the size of the change between two trees.
type DiffStat struct {
	FilesChanged int
	Insertions   int
	Deletions    int
}

// NumStat compares the trees of two checkpoints (ids or refs), as git diff
// --numstat counts them: a binary file counts as changed with no lines.
func (s *Store) NumStat(ctx context.Context, from, to string) (DiffStat, error) {
	var st DiffStat
	cps, err := s.List(ctx)
	if err != nil {
		return st, err
	}
	a, err := Resolve(cps, from)
	if err != nil {
		return st, err
	}
	b, err := Resolve(cps, to)
	if err != nil {
		return st, err
	}
	out, err := s.git().Run(ctx, "diff-tree", "-r", "-z", "--numstat", "--no-renames", a.Tree, b.Tree)
	if err != nil {
		return st, err
	}
	// -z --numstat: "<ins>\t<del>\t<path>\0" per file.
	for _, rec := range strings.Split(string(out), "\x00") {
		fields := strings.SplitN(rec, "\t", 3)
		if len(fields) != 3 {
			continue
		}
		st.FilesChanged++
		if n, err := strconv.Atoi(fields[0]); err == nil {
			st.Insertions += n
		}
		if n, err := strconv.Atoi(fields[1]); err == nil {
			st.Deletions += n
		}
	}
	return st, nil
}

// String is git's shortstat in the seed's words: "N files changed, +X/-Y lines".
func (d DiffStat) String() string {
	files := "files"
	if d.FilesChanged == 1 {
		files = "file"
	}
	return fmt.Sprintf("%d %s changed, +%d/-%d lines", d.FilesChanged, files, d.Insertions, d.Deletions)
}

// indexOr is the index file CreateFrom set, else def.
func (s *Store) indexOr(def string) string {
	if s.index != "" {
		return s.index
	}
	return def
}
