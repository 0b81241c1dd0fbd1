package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"rewind/gitexec"
)

// Store is the checkpoint store of one work tree.
type Store struct {
	Dir      string // the store directory
	WorkTree string // absolute, symlinks resolved

	// Now stamps new checkpoints (--now); nil means the current time.
	Now func() time.Time
	// Wait is how long a mutating operation waits for another rewind's lock.
	Wait time.Duration
	// Warn receives warnings (a moved-aside corrupt store, skipped files).
	Warn func(string)

	dirOK sync.Map // capture's cache: directory -> no symlink or file above or at it
}

// ErrForeignStore means the store belongs to another work tree.
var ErrForeignStore = errors.New("store belongs to another work tree")

// ErrRefusedWorkTree means the work tree is / or the home directory.
var ErrRefusedWorkTree = errors.New("refusing to checkpoint this directory")

// ForeignStoreError names both work trees.
type ForeignStoreError struct {
	Store, Recorded, WorkTree string
}

func (e *ForeignStoreError) Error() string {
	return fmt.Sprintf("store %s belongs to work tree %s, not %s", e.Store, e.Recorded, e.WorkTree)
}

func (e *ForeignStoreError) Unwrap() error { return ErrForeignStore }

// DefaultDir is crucible's store location for a work tree:
// ~/.claude/projects/<h>/checkpoints/<h>/ with h = sha256(worktree)[:16].
func DefaultDir(home, workTree string) string {
	sum := sha256.Sum256([]byte(workTree))
	h := hex.EncodeToString(sum[:])[:16]
	return filepath.Join(home, ".claude", "projects", h, "checkpoints", h)
}

// Open returns the store of workTree in dir ("" for the default location). It
// refuses / and the home directory as work trees, and a store that records
// another work tree. The store is created on first use by a mutating operation.
func Open(workTree, dir string) (*Store, error) {
	home, _ := os.UserHomeDir()
	realHome := home
	if r, err := filepath.EvalSymlinks(home); err == nil {
		realHome = r
	}
	if workTree == "/" || (home != "" && (filepath.Clean(workTree) == filepath.Clean(home) || filepath.Clean(workTree) == filepath.Clean(realHome))) {
		return nil, fmt.Errorf("%w: %s is too broad a work tree (a snapshot would hold everything below it)", ErrRefusedWorkTree, workTree)
	}
	if dir == "" {
		if home == "" {
			return nil, errors.New("no home directory for the default store; pass --store")
		}
		dir = DefaultDir(home, workTree)
	}
	s := &Store{Dir: dir, WorkTree: workTree, Wait: 30 * time.Second}
	if err := s.checkOwner(); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Store) gitDir() string        { return filepath.Join(s.Dir, "git") }
func (s *Store) indexFile() string     { return filepath.Join(s.Dir, "index") }
func (s *Store) home() string          { return filepath.Join(s.Dir, "home") }
func (s *Store) ownerFile() string     { return filepath.Join(s.Dir, "worktree") }
func (s *Store) manifestFile() string  { return filepath.Join(s.Dir, "checkpoint-manifest.md") }
func (s *Store) restoreMarker() string { return filepath.Join(s.Dir, "restore-in-progress") }
func (s *Store) restoreIndex() string  { return filepath.Join(s.Dir, "restore-index") }

// git is the shadow runner over the store's own index.
func (s *Store) git() gitexec.Shadow {
	return gitexec.Shadow{GitDir: s.gitDir(), WorkTree: s.WorkTree, IndexFile: s.indexFile(), ConfigHome: s.home()}
}

// Exists reports whether the store has been created.
func (s *Store) Exists() bool {
	_, err := os.Stat(filepath.Join(s.gitDir(), "HEAD"))
	return err == nil
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC().Truncate(time.Second)
	}
	return time.Now().UTC().Truncate(time.Second)
}

func (s *Store) warn(format string, a ...any) {
	if s.Warn != nil {
		s.Warn(fmt.Sprintf(format, a...))
	}
}

// checkOwner refuses a store that records another work tree: one REWIND_STORE
// shared by two projects must never let one project's restore delete the
// other's files.
func (s *Store) checkOwner() error {
	data, err := os.ReadFile(s.ownerFile())
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(s.gitDir()); err != nil {
			return nil // no store yet
		}
		// The record is written before the repository: a concurrent first use
		// may have made both since the first look, so look again.
		data, err = os.ReadFile(s.ownerFile())
		if errors.Is(err, os.ErrNotExist) {
			// A repository without the record: whose files it holds is unknown.
			return &ForeignStoreError{Store: s.Dir, Recorded: "(no record)", WorkTree: s.WorkTree}
		}
	}
	if err != nil {
		return err
	}
	if recorded := strings.TrimSuffix(string(data), "\n"); recorded != s.WorkTree {
		return &ForeignStoreError{Store: s.Dir, Recorded: recorded, WorkTree: s.WorkTree}
	}
	return nil
}

// ensure creates the store or checks its health, under the lock. A store whose
// repository git cannot read is moved aside, never deleted, and re-created.
func (s *Store) ensure(ctx context.Context) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(s.Dir, 0o700); err != nil {
		return err
	}
	if s.Exists() {
		if s.healthy(ctx) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// A HEAD emptied by a crash is the common damage, and refs and objects
		// are intact behind it: repair it before giving up on the repository.
		if err := os.WriteFile(filepath.Join(s.gitDir(), "HEAD"), []byte("ref: refs/heads/rewind\n"), 0o600); err == nil && s.healthy(ctx) {
			s.warn("repaired the store's damaged HEAD")
			return nil
		}
		aside := fmt.Sprintf("%s.corrupt-%s", s.Dir, time.Now().UTC().Format("20060102T150405Z"))
		if err := os.MkdirAll(aside, 0o700); err != nil {
			return err
		}
		for _, name := range []string{"git", "index", "checkpoint-manifest.md"} {
			if err := os.Rename(filepath.Join(s.Dir, name), filepath.Join(aside, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		s.warn("the store's repository was corrupt; moved it to %s and started a new one", aside)
	} else if _, err := os.Stat(s.gitDir()); err == nil {
		// A directory without HEAD: an init that never finished.
		if err := os.RemoveAll(s.gitDir()); err != nil {
			return err
		}
	}
	// The record first: a repository without one is refused by Open, and a
	// concurrent Open must never see the repository before it.
	if err := writeAtomic(s.ownerFile(), []byte(s.WorkTree+"\n"), 0o600); err != nil {
		return err
	}
	return s.git().Init(ctx)
}

func (s *Store) healthy(ctx context.Context) bool {
	_, err := s.git().Run(ctx, "for-each-ref", "--count=1", "refs/rewind/")
	return err == nil
}

// writeIfChanged is writeAtomic for files most calls write unchanged (the
// excludes of every capture): an equal file is left alone, sparing a checkpoint
// an fsync and a rename.
func writeIfChanged(path string, data []byte, mode os.FileMode) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	return writeAtomic(path, data, mode)
}

// writeAtomic replaces path with data via a temporary file, fsync and rename.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
