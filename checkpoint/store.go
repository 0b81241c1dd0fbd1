package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
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
	// Progress, when set, is told how far a long step has come: step names
	// what is counted ("hashing files"), done of total (0: not counted). It
	// may be called from several goroutines at once, and often.
	Progress func(step string, done, total int)
	// Foreign is the work tree the store records when it was opened read-only
	// for another one (OpenReadOnly): a moved or renamed project reading its
	// old checkpoints. Every operation that writes the store refuses then.
	Foreign string

	dirOK sync.Map // capture's cache: directory -> no symlink or file above or at it

	// cacheWrites counts the stat cache writes (and the deletion of a shared
	// part the index left) still under way: a capture does them beside the
	// steps that follow (the commit, the ref), and the next capture and the
	// unlock wait for them.
	cacheWrites sync.WaitGroup

	// commits is the commit cache as the last list of checkpoints had it
	// (refcache.go), for a new checkpoint to add itself to.
	commits map[string]cachedCommit

	// index, when set, is the index file in place of the store's own (a
	// capture of another directory, CreateFrom, keeps the store's stat cache
	// of the work tree intact).
	index string
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
// refuses / and the home directory as work trees, a store that records another
// work tree (a store crucible's procedure made is adopted, see checkOwner),
// and a directory holding other files. A store in rewind's earlier layout is
// moved to the current one (see upgrade). The store is created on first use
// by a mutating operation.
func Open(workTree, dir string) (*Store, error) {
	home, _ := os.UserHomeDir()
	realHome := home
	if r, err := filepath.EvalSymlinks(home); err == nil {
		realHome = r
	}
	if workTree == "/" || (home != "" && (filepath.Clean(workTree) == filepath.Clean(home) || filepath.Clean(workTree) == filepath.Clean(realHome))) {
		return nil, fmt.Errorf("%w: %s is too broad a work tree (a snapshot would hold everything below it)", ErrRefusedWorkTree, workTree)
	}
	chosen := dir != ""
	if !chosen {
		if home == "" {
			return nil, errors.New("no home directory for the default store; pass --store")
		}
		dir = DefaultDir(home, workTree)
	}
	s := &Store{Dir: dir, WorkTree: workTree, Wait: 30 * time.Second}
	if chosen {
		if err := s.checkNotInGitDir(); err != nil {
			return nil, err
		}
	}
	if err := s.checkOwner(); err != nil {
		return nil, err
	}
	if err := s.upgrade(); err != nil {
		return nil, err
	}
	if !s.Exists() {
		if err := s.checkEmpty(); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	return s, nil
}

// ErrStoreInGitDir means the store would lie inside a .git directory: making it
// there would write the project's own repository.
var ErrStoreInGitDir = errors.New("the store cannot be inside a .git directory")

// checkNotInGitDir refuses a store inside the work tree's .git (or any .git
// below the work tree, or the project's git directory wherever it is).
func (s *Store) checkNotInGitDir() error {
	rel, inside := s.insideWorkTree(s.Dir)
	if inside {
		for _, part := range strings.Split(rel, "/") {
			if part == ".git" {
				return fmt.Errorf("%w: %s is in the project's %s", ErrStoreInGitDir, s.Dir, part)
			}
		}
	}
	if ownGitDir(s.WorkTree) || noRepository(s.WorkTree) {
		return nil // the work tree's .git, which the check above covers, or none
	}
	out, err := gitexec.Project{Dir: s.WorkTree}.Run(context.Background(), "rev-parse", "--absolute-git-dir")
	if err != nil {
		return nil // not in a repository, or one git will not read
	}
	gitDir := strings.TrimSpace(string(out))
	if r, err := filepath.EvalSymlinks(gitDir); err == nil {
		gitDir = r
	}
	abs, _ := filepath.Abs(s.Dir)
	if r, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(r, filepath.Base(abs))
	}
	if abs == gitDir || strings.HasPrefix(abs, gitDir+string(filepath.Separator)) {
		return fmt.Errorf("%w: %s is in the project's git directory %s", ErrStoreInGitDir, s.Dir, gitDir)
	}
	return nil
}

// ownGitDir reports whether git finds the work tree's repository in its own
// .git directory, the first place it looks: a directory (not a symlink, nor
// a file naming one elsewhere) that git takes for a repository (a HEAD naming
// a ref or a commit, objects and refs) and that shares no other's (no
// commondir). It spares a git process on every Open with a chosen store.
func ownGitDir(workTree string) bool {
	return looksLikeGitDir(filepath.Join(workTree, ".git"))
}

// looksLikeGitDir reports whether dir is a directory git takes for a git
// directory of its own: a HEAD naming a ref or a commit, objects and refs,
// and no commondir (which would put its refs and objects elsewhere).
func looksLikeGitDir(dir string) bool {
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return false
	}
	if _, err := os.Lstat(filepath.Join(dir, "commondir")); !errors.Is(err, os.ErrNotExist) {
		return false
	}
	head, err := os.ReadFile(filepath.Join(dir, "HEAD"))
	h := strings.TrimSpace(string(head))
	if err != nil || !(strings.HasPrefix(h, "ref: refs/") || len(h) >= 40 && isHex(h)) {
		return false
	}
	return isDir(filepath.Join(dir, "objects")) && isDir(filepath.Join(dir, "refs"))
}

// noRepository reports whether git, started in dir, can find no repository:
// neither dir nor any directory above it holds a .git (a directory, a file
// naming one, or anything else by that name) or a HEAD (which a bare
// repository, or a git directory itself, has). git looks for a repository
// just there, from dir up (its environment holds no GIT_DIR nor ceiling:
// gitexec drops every GIT_* variable), so it spares the project's git
// processes for a work tree outside every repository. Anything in doubt (a
// path that does not resolve, one that cannot be looked at) is false.
func noRepository(dir string) bool {
	d, err := filepath.EvalSymlinks(dir)
	if err != nil || !filepath.IsAbs(d) {
		return false
	}
	for {
		for _, name := range []string{".git", "HEAD"} {
			if _, err := os.Lstat(filepath.Join(d, name)); !errors.Is(err, os.ErrNotExist) {
				return false
			}
		}
		up := filepath.Dir(d)
		if up == d {
			return true
		}
		d = up
	}
}

// TopLevel is the work tree the CLI takes for dir (the top level of the
// repository git finds from it, else dir itself) when it can be told
// without git: dir where git finds no repository (noRepository), or at the
// top of a plain repository (plainRepo). ok is false when git must be asked.
func TopLevel(dir string) (top string, ok bool) {
	if noRepository(dir) || plainRepo(dir) {
		return dir, true
	}
	return "", false
}

// plainRepo reports whether dir holds its repository's own .git (ownGitDir)
// whose config neither mentions another work tree (core.worktree,
// extensions.worktreeConfig) nor includes another file, nor makes it bare:
// then dir is its top level, as git finds it from dir.
func plainRepo(dir string) bool {
	if !ownGitDir(dir) {
		return false
	}
	config, err := os.ReadFile(filepath.Join(dir, ".git", "config"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return false
	}
	config = bytes.ToLower(config)
	if bytes.Contains(config, []byte("worktree")) || bytes.Contains(config, []byte("include")) {
		return false
	}
	for _, line := range bytes.Split(config, []byte("\n")) {
		line = bytes.Join(bytes.Fields(line), nil)
		if bytes.HasPrefix(line, []byte("bare")) && !bytes.Equal(line, []byte("bare=false")) {
			return false
		}
	}
	return true
}

// OpenReadOnly is Open for commands that only read the store (list, show,
// diff between checkpoints, status): a store that records another work tree
// (a moved or renamed project's) is opened all the same, with Foreign set,
// and every operation that would write it refuses. It never creates a store.
func OpenReadOnly(workTree, dir string) (*Store, error) {
	s, err := Open(workTree, dir)
	var fe *ForeignStoreError
	if !errors.As(err, &fe) {
		return s, err
	}
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = DefaultDir(home, workTree)
	}
	if isDir(filepath.Join(dir, "git")) {
		return nil, err // rewind's earlier layout: only a writer may move it
	}
	return &Store{Dir: dir, WorkTree: workTree, Wait: 30 * time.Second, Foreign: fe.Recorded}, nil
}

// ReadOnlyError is an operation that writes the store, refused on a store
// opened read-only for another work tree.
type ReadOnlyError struct {
	Store, Recorded, WorkTree, Op string
}

func (e *ReadOnlyError) Error() string {
	return fmt.Sprintf("%s needs a store of %s's own; %s belongs to work tree %s", e.Op, e.WorkTree, e.Store, e.Recorded)
}

func (e *ReadOnlyError) Unwrap() error { return ErrForeignStore }

func (s *Store) refuseForeign(op string) error {
	if s.Foreign == "" {
		return nil
	}
	return &ReadOnlyError{Store: s.Dir, Recorded: s.Foreign, WorkTree: s.WorkTree, Op: op}
}

// Recorded returns the work tree the store in dir records: rewind's record,
// else the core.worktree of a repository crucible's procedure made, else
// "(no record)"; ok is false when there is no store in dir.
func Recorded(dir string) (workTree string, ok bool, err error) {
	probe := &Store{Dir: dir}
	if !probe.Exists() && !isDir(filepath.Join(dir, "git")) {
		return "", false, nil
	}
	data, err := probe.readOwner()
	if err == nil {
		return strings.TrimSuffix(string(data), "\n"), true, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", true, err
	}
	if wt := probe.configWorkTree(); wt != "" {
		return wt, true, nil
	}
	return "(no record)", true, nil
}

// AdoptOptions are the inputs of Adopt.
type AdoptOptions struct {
	From     string // the store directory to adopt
	To       string // where it goes: From itself (adopt in place) or the work tree's default store
	WorkTree string // the work tree that adopts it (absolute, symlinks resolved)
	Wait     time.Duration
}

// Adopted says what Adopt did.
type Adopted struct {
	Previous    string // the work tree the store recorded
	Checkpoints int
	Moved       bool // the store moved from From to To
}

// ErrAdoptRefused means a store may not be adopted (see Adopt).
var ErrAdoptRefused = errors.New("store not adopted")

// AdoptError says why a store was not adopted.
type AdoptError struct{ Why string }

func (e *AdoptError) Error() string { return e.Why }

func (e *AdoptError) Unwrap() error { return ErrAdoptRefused }

// Adopt makes the store in o.From, recorded for another work tree (the same
// project before it moved or was renamed), o.WorkTree's: under the store's
// lock it records the new work tree (rewind-worktree, and core.worktree when
// crucible's procedure set one; the previous record is kept in
// rewind-adopted-from), then moves the store to o.To when that differs. It
// refuses when the recorded work tree still exists and is another directory
// (a different project, or a copy: its checkpoints are its own), and when
// o.To already holds something. A crash between the two steps leaves a store
// recording the new work tree at the old place, which adopting again moves.
func Adopt(ctx context.Context, o AdoptOptions) (*Adopted, error) {
	recorded, ok, err := Recorded(o.From)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, &AdoptError{fmt.Sprintf("no checkpoint store at %s", o.From)}
	}
	if recorded != o.WorkTree && recorded != "(no record)" && isDir(recorded) && !samePath(recorded, o.WorkTree) {
		return nil, &AdoptError{fmt.Sprintf("the store %s belongs to %s, which still exists and is another directory than %s: its checkpoints are that project's (refusing)", o.From, recorded, o.WorkTree)}
	}
	moving := filepath.Clean(o.From) != filepath.Clean(o.To)
	if moving {
		if entries, err := os.ReadDir(o.To); err == nil && len(entries) > 0 {
			return nil, &AdoptError{fmt.Sprintf("%s already has a store at %s (refusing: adopting would replace it)", o.WorkTree, o.To)}
		} else if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	s := &Store{Dir: o.From, WorkTree: o.WorkTree, Wait: o.Wait}
	if err := s.upgrade(); err != nil { // rewind's earlier layout: moved first, under its own lock
		return nil, err
	}
	// The lock is held through the move: a flock belongs to the open file,
	// which a rename of its directory does not touch.
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	cps, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	res := &Adopted{Previous: recorded, Checkpoints: len(cps), Moved: moving}
	if recorded != o.WorkTree {
		note := fmt.Sprintf("%s\nadopted by %s at %s\n", recorded, o.WorkTree, time.Now().UTC().Format(time.RFC3339))
		if err := writeAtomic(filepath.Join(o.From, "rewind-adopted-from"), []byte(note), 0o600); err != nil {
			return nil, err
		}
		if s.configWorkTree() != "" {
			if _, err := s.git().Run(ctx, "config", "--file", filepath.Join(s.gitDir(), "config"), "core.worktree", o.WorkTree); err != nil {
				return nil, err
			}
		}
		if err := writeAtomic(s.ownerFile(), []byte(o.WorkTree+"\n"), 0o600); err != nil {
			return nil, err
		}
	}
	if !moving {
		return res, nil
	}
	if err := os.MkdirAll(filepath.Dir(o.To), 0o700); err != nil {
		return nil, err
	}
	// An empty directory in the way (a read that made it) goes first.
	if err := os.Remove(o.To); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if err := os.Rename(o.From, o.To); err != nil {
		return nil, fmt.Errorf("moving the store to %s: %w (it records %s already; adopting again finishes the move)", o.To, err, o.WorkTree)
	}
	syncDir(filepath.Dir(o.To))
	syncDir(filepath.Dir(o.From))
	return res, nil
}

// The store directory is itself the git directory, as crucible's checkpoint
// procedure makes it (GIT_DIR=<store> git init): git's own files (HEAD, config,
// objects/, refs/, info/, the procedure's index) and checkpoint-manifest.md sit
// beside rewind's, whose names all start with "rewind-", a name neither git nor
// the procedure uses.
func (s *Store) gitDir() string        { return s.Dir }
func (s *Store) indexFile() string     { return s.indexOr(filepath.Join(s.Dir, "rewind-index")) }
func (s *Store) home() string          { return filepath.Join(s.Dir, "rewind-home") }
func (s *Store) ownerFile() string     { return filepath.Join(s.Dir, "rewind-worktree") }
func (s *Store) lockFile() string      { return filepath.Join(s.Dir, "rewind-lock") }
func (s *Store) manifestFile() string  { return filepath.Join(s.Dir, "checkpoint-manifest.md") }
func (s *Store) restoreMarker() string { return filepath.Join(s.Dir, "rewind-restore-in-progress") }
func (s *Store) restoreIndex() string  { return filepath.Join(s.Dir, "rewind-restore-index") }

// scratchFile is the path of one of rewind's own scratch files (a scratch
// index, a pattern file), named so that git and the procedure never use it.
func (s *Store) scratchFile(name string) string { return filepath.Join(s.Dir, "rewind-"+name) }

// procedureIndex is git's default index of the store, which crucible's
// procedure stages into (git add -A): never rewind's index, but its objects are
// kept by a prune like a checkpoint's.
func (s *Store) procedureIndex() string { return filepath.Join(s.Dir, "index") }

// git is the shadow runner over the store's own index.
func (s *Store) git() gitexec.Shadow {
	return gitexec.Shadow{GitDir: s.gitDir(), WorkTree: s.WorkTree, IndexFile: s.indexFile(), SplitIndexFile: s.indexFile(), ConfigHome: s.home()}
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
// other's files. A repository without rewind's record was made by crucible's
// procedure (rewind writes its record before it creates the repository): it is
// adopted when git's own config names this work tree (the procedure's git init
// records core.worktree), or when it is this work tree's default store (the
// directory's name is the work tree's hash), and refused otherwise.
func (s *Store) checkOwner() error {
	data, err := s.readOwner()
	if errors.Is(err, os.ErrNotExist) {
		if !s.Exists() && !isDir(filepath.Join(s.Dir, "git")) {
			return nil // no store yet
		}
		// The record is written before the repository: a concurrent first use
		// may have made both since the first look, so look again.
		data, err = s.readOwner()
		if errors.Is(err, os.ErrNotExist) {
			return s.checkAdopt()
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

// readOwner reads the work tree record, under its name in either layout.
func (s *Store) readOwner() ([]byte, error) {
	data, err := os.ReadFile(s.ownerFile())
	if errors.Is(err, os.ErrNotExist) {
		if old, lerr := os.ReadFile(filepath.Join(s.Dir, "worktree")); lerr == nil || !errors.Is(lerr, os.ErrNotExist) {
			return old, lerr
		}
	}
	return data, err
}

// checkAdopt decides whether a repository without rewind's record may serve
// this work tree (see checkOwner).
func (s *Store) checkAdopt() error {
	if wt := s.configWorkTree(); wt != "" {
		if samePath(wt, s.WorkTree) {
			return nil
		}
		return &ForeignStoreError{Store: s.Dir, Recorded: wt, WorkTree: s.WorkTree}
	}
	if home, err := os.UserHomeDir(); err == nil && samePath(s.Dir, DefaultDir(home, s.WorkTree)) {
		return nil
	}
	return &ForeignStoreError{Store: s.Dir, Recorded: "(no record)", WorkTree: s.WorkTree}
}

// configWorkTree is core.worktree of the store's git config, made absolute
// (git reads a relative one from the git directory), or "".
func (s *Store) configWorkTree() string {
	if !s.Exists() {
		return ""
	}
	out, err := s.git().Run(context.Background(), "config", "--file", filepath.Join(s.gitDir(), "config"), "--get", "core.worktree")
	wt := strings.TrimSpace(string(out))
	if err != nil || wt == "" {
		return ""
	}
	if !filepath.IsAbs(wt) {
		wt = filepath.Join(s.gitDir(), wt)
	}
	return wt
}

func samePath(a, b string) bool {
	clean := func(p string) string {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return r
		}
		return filepath.Clean(p)
	}
	return clean(a) == clean(b)
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// upgrade moves a store in rewind's earlier layout (the bare repository in
// <store>/git/, its index in <store>/index, the record in <store>/worktree, the
// lock in <store>/lock) to the current one, under both layouts' locks, so that
// crucible's procedure can share it. Every step is a rename that is complete
// or not done, and the whole is idempotent: a migration a crash interrupted is
// finished by the next command. git's HEAD moves last, so a half-moved
// repository is never taken for a current one.
func (s *Store) upgrade() error {
	legacy := filepath.Join(s.Dir, "git")
	if !isDir(legacy) {
		return nil
	}
	ctx := context.Background()
	unlock, err := s.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if !isDir(legacy) {
		return nil // another rewind did it meanwhile
	}
	// An older rewind holds the old lock while it works.
	old := &Store{Dir: s.Dir, Wait: s.Wait}
	unlockOld, err := old.lockAt(ctx, filepath.Join(s.Dir, "lock"), false)
	if err != nil {
		return err
	}
	defer unlockOld()
	if _, err := os.Stat(filepath.Join(legacy, "HEAD")); err == nil && s.Exists() {
		return fmt.Errorf("store %s holds two repositories (rewind's earlier %s and another in the store directory itself); move one of them away", s.Dir, legacy)
	}
	move := func(from, to string) error {
		src, dst := filepath.Join(s.Dir, from), filepath.Join(s.Dir, to)
		if _, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if _, err := os.Lstat(dst); err == nil {
			// Already there (a crash between the two renames is impossible, so
			// this is a cache or scratch file of the earlier layout): the
			// current one wins.
			return os.RemoveAll(src)
		}
		if err := os.Rename(src, dst); err != nil {
			return fmt.Errorf("moving the store to its current layout: %w", err)
		}
		return nil
	}
	// rewind's own files first: once HEAD is in the store directory, the
	// procedure would take an "index" there for its own.
	for _, f := range [][2]string{{"worktree", "rewind-worktree"}, {"index", "rewind-index"}, {"home", "rewind-home"}, {"restore-in-progress", "rewind-restore-in-progress"}} {
		if err := move(f[0], f[1]); err != nil {
			return err
		}
	}
	scratch, _ := filepath.Glob(filepath.Join(s.Dir, "prewrite-index-*"))
	for _, f := range append(scratch, filepath.Join(s.Dir, "restore-index"), filepath.Join(s.Dir, "walk-index"), filepath.Join(s.Dir, "default-excludes")) {
		os.Remove(f)
	}
	entries, err := os.ReadDir(legacy)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == "HEAD" {
			continue
		}
		if err := move(filepath.Join("git", e.Name()), e.Name()); err != nil {
			return err
		}
	}
	if err := move(filepath.Join("git", "HEAD"), "HEAD"); err != nil {
		return err
	}
	if err := os.Remove(legacy); err != nil {
		return fmt.Errorf("moving the store to its current layout: %w", err)
	}
	syncDir(s.Dir)
	os.Remove(filepath.Join(s.Dir, "lock"))
	return nil
}

// ensure creates the store or, with checkHealth, checks its health (heal),
// under the lock. Only proven corruption (git ran and could not open the
// repository, and the repository's own files show why) moves a repository
// aside, never deleting it; any other failure of git is an error that leaves
// the store as it is.
func (s *Store) ensure(ctx context.Context, checkHealth bool) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(s.Dir, 0o700); err != nil {
		return err
	}
	if s.Exists() {
		if !checkHealth {
			return s.adopt(ctx)
		}
		_, err := s.heal(ctx)
		return err
	}
	return s.initNew(ctx)
}

// heal runs the health check and takes the store over when git reads it; a
// store git gave up on is repaired, or moved aside and a new one started:
// healed reports either.
func (s *Store) heal(ctx context.Context) (healed bool, err error) {
	corrupt, err := s.corruption(ctx)
	if err != nil {
		return false, err
	}
	if corrupt == "" {
		return false, s.adopt(ctx)
	}
	// A HEAD emptied by a crash is the common damage, and refs and objects
	// are intact behind it: repair it before giving up on the repository.
	if corrupt == errBadHEAD {
		if err := writeAtomic(filepath.Join(s.gitDir(), "HEAD"), []byte("ref: "+s.headBranch()+"\n"), 0o600); err != nil {
			return false, err
		}
		again, err := s.corruption(ctx)
		if err != nil {
			return false, err
		}
		if again == "" {
			s.warn("repaired the store's damaged HEAD")
			return true, s.adopt(ctx)
		}
		corrupt = again
	}
	aside, err := s.moveAside()
	if err != nil {
		return false, err
	}
	s.warn("the store's repository was corrupt (%s); moved it to %s and started a new one", corrupt, aside)
	return true, s.initNew(ctx)
}

// initNew makes the store's repository in its empty directory.
func (s *Store) initNew(ctx context.Context) error {
	if err := s.checkEmpty(); err != nil {
		return err
	}
	// The record first: a repository without one is refused by Open, and a
	// concurrent Open must never see the repository before it.
	if err := writeAtomic(s.ownerFile(), []byte(s.WorkTree+"\n"), 0o600); err != nil {
		return err
	}
	return s.git().Init(ctx)
}

// storeNames are the entries a directory may hold before rewind makes a
// repository in it: besides rewind's own and any lock file, what a git init
// (rewind's or the procedure's) running at the same time or killed leaves.
var storeNames = map[string]bool{
	"checkpoint-manifest.md": true, ".gitignore": true, "HEAD": true, "config": true, "description": true,
	"objects": true, "refs": true, "info": true, "hooks": true, "branches": true, "logs": true, "packed-refs": true,
	"index": true, "COMMIT_EDITMSG": true,
}

// checkEmpty refuses to make a repository in a directory that holds anything
// else (--store naming a directory in use): the store directory is the git
// directory, and its files would mix with the user's.
func (s *Store) checkEmpty() error {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return err
	}
	var other []string
	for _, e := range entries {
		if n := e.Name(); !storeNames[n] && !strings.HasPrefix(n, "rewind-") && !strings.HasPrefix(n, ".rewind-tmp-") && !strings.HasSuffix(n, ".lock") {
			other = append(other, n)
		}
	}
	if len(other) == 0 {
		return nil
	}
	if len(other) > 3 {
		other = append(other[:3], "...")
	}
	return fmt.Errorf("%w: %s holds other files (%s); pass --store a new or empty directory", ErrNotStore, s.Dir, strings.Join(other, ", "))
}

// ErrNotStore means the store directory holds files that are not a store's.
var ErrNotStore = errors.New("not a checkpoint store")

// adopt writes the record of a repository crucible's procedure made (Open
// accepted it for this work tree), and gives a store rewind's attributes,
// which keep snapshots byte-exact, when it lacks them (the procedure made it,
// or a full disk stopped an earlier init).
func (s *Store) adopt(ctx context.Context) error {
	attrs, _ := os.ReadFile(filepath.Join(s.gitDir(), "info", "attributes"))
	if string(attrs) != gitexec.ShadowAttributes {
		if err := s.git().Init(ctx); err != nil {
			return err
		}
	}
	if _, err := os.Stat(s.ownerFile()); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return writeAtomic(s.ownerFile(), []byte(s.WorkTree+"\n"), 0o600)
}

// headBranch is the branch a repaired HEAD names: the one branch the store
// has (the procedure's commits are on it), else rewind's own unborn one.
func (s *Store) headBranch() string {
	branches := map[string]bool{}
	heads := filepath.Join(s.gitDir(), "refs", "heads")
	filepath.WalkDir(heads, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(p, ".lock") {
			rel, _ := filepath.Rel(s.gitDir(), p)
			branches[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if packed, err := os.ReadFile(filepath.Join(s.gitDir(), "packed-refs")); err == nil {
		for _, line := range strings.Split(string(packed), "\n") {
			if f := strings.Fields(line); len(f) == 2 && strings.HasPrefix(f[1], "refs/heads/") {
				branches[f[1]] = true
			}
		}
	}
	if len(branches) == 1 {
		for b := range branches {
			return b
		}
	}
	return "refs/heads/rewind"
}

// moveAside moves everything of a corrupt store but the lock and the record
// to <store>.corrupt-<time>/.
func (s *Store) moveAside() (string, error) {
	// A directory of its own, even for a second store moved aside in the
	// same second.
	aside := fmt.Sprintf("%s.corrupt-%s", s.Dir, time.Now().UTC().Format("20060102T150405Z"))
	for n := 2; ; n++ {
		err := os.Mkdir(aside, 0o700)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || n > 100 {
			return "", err
		}
		aside = fmt.Sprintf("%s.corrupt-%s-%d", s.Dir, time.Now().UTC().Format("20060102T150405Z"), n)
	}
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		switch e.Name() {
		case filepath.Base(s.lockFile()), filepath.Base(s.ownerFile()):
			continue
		}
		if err := os.Rename(filepath.Join(s.Dir, e.Name()), filepath.Join(aside, e.Name())); err != nil {
			return "", err
		}
	}
	return aside, nil
}

const errBadHEAD = "HEAD is not a ref or a commit id"

// corruption checks the repository: "" when git reads it, else what proves it
// corrupt. A failure that proves nothing (git missing or killed, a timeout, an
// error git reports about something else) is returned as an error.
func (s *Store) corruption(ctx context.Context) (string, error) {
	_, err := s.git().Run(ctx, "for-each-ref", "--count=1", refPrefix)
	if err == nil {
		return "", nil
	}
	var ge *gitexec.Error
	if ctx.Err() != nil || !errors.As(err, &ge) || ge.ExitCode != 128 {
		return "", fmt.Errorf("checking the store %s: %w (the store was left as it is)", s.Dir, err)
	}
	// git ran and gave up on the repository: find the proof in its files.
	if why := s.structureDamage(ctx); why != "" {
		return why, nil
	}
	return "", fmt.Errorf("checking the store %s: %w (the store was left as it is)", s.Dir, err)
}

// structureDamage looks at what git needs to open a repository: a HEAD naming
// a ref or a commit id, the objects and refs directories, and a config git
// can parse. It returns what is wrong, or "".
func (s *Store) structureDamage(ctx context.Context) string {
	head, err := os.ReadFile(filepath.Join(s.gitDir(), "HEAD"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "" // unreadable for another reason: proves nothing
	}
	h := strings.TrimSpace(string(head))
	if !(strings.HasPrefix(h, "ref: refs/") || len(h) >= 40 && isHex(h)) {
		return errBadHEAD
	}
	for _, d := range []string{"objects", "refs"} {
		if fi, err := os.Stat(filepath.Join(s.gitDir(), d)); errors.Is(err, os.ErrNotExist) || err == nil && !fi.IsDir() {
			return d + "/ is missing"
		}
	}
	_, err = s.git().Run(ctx, "config", "--file", filepath.Join(s.gitDir(), "config"), "--list")
	var ge *gitexec.Error
	if errors.As(err, &ge) && ge.ExitCode == 128 && strings.Contains(ge.Stderr, "bad config") {
		return "its config cannot be parsed"
	}
	return ""
}

// indexDamaged reports whether err is git failing on the store's index, a
// cache of stat data: one git cannot read, or one naming objects the store no
// longer has (crucible's procedure's git gc --prune=now may delete objects
// only rewind's index names). Capture then deletes it, with a warning, and
// reads the work tree afresh; no extra call checks it beforehand.
func indexDamaged(ctx context.Context, err error) (string, bool) {
	var ge *gitexec.Error
	if ctx.Err() == nil && errors.As(err, &ge) && ge.ExitCode > 0 && indexDamage().MatchString(ge.Stderr) {
		return firstLine(ge.Stderr), true
	}
	return "", false
}

// indexDamage matches what git says of an index it cannot use.
var indexDamage = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`index file|bad signature|bad index|invalid object|error building trees|unable to read|cache entry`)
})

func firstLine(s string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return l
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

// writeAtomic replaces path with data, whole or not at all: a temporary file in
// the same directory, every error checked, fsync, rename, fsync of the
// directory. On any failure (a full disk) the old file is left as it was and
// the temporary file removed.
func writeAtomic(path string, data []byte, mode os.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".rewind-tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
			err = fmt.Errorf("write %s: %w", path, err)
		}
	}()
	n, err := tmp.Write(data)
	if err != nil {
		return err
	}
	if n != len(data) {
		return io.ErrShortWrite
	}
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return err
	}
	return nil
}

// ErrInterrupted means a restore was interrupted; the *InterruptedError says
// how to finish or undo it.
var ErrInterrupted = errors.New("a restore was interrupted")

// InterruptedError is the marker an interrupted restore left.
type InterruptedError struct {
	Target, Safety string   // short ids
	Reason         string   //
	Files          []string // the restore's --file paths; none for a whole restore
	// Rewind is how the hints run rewind ("rewind" when empty): the command
	// line adds the -C and --store a hint pasted in another directory needs
	// to reach the same work tree and store.
	Rewind string
}

func (e *InterruptedError) Error() string {
	what := "a restore"
	if len(e.Files) > 0 {
		what = "a restore of " + strings.Join(e.Files, ", ")
	}
	return fmt.Sprintf("%s to checkpoint %s (%s) was interrupted; the work tree may be half restored", what, e.Target, e.Reason)
}

func (e *InterruptedError) Unwrap() error { return ErrInterrupted }

// Hints says how to finish or undo the interrupted restore: finishing it is
// the same restore again, with its --file paths, written from the work tree's
// top (":/PATH") so that the command works from any directory.
func (e *InterruptedError) Hints() []string {
	var files strings.Builder
	for _, f := range e.Files {
		files.WriteString(" --file " + gitexec.ShellQuote(":/"+f))
	}
	rewind := e.Rewind
	if rewind == "" {
		rewind = "rewind"
	}
	return []string{
		fmt.Sprintf("finish it: %s checkpoint restore %s%s --yes", rewind, e.Target, files.String()),
		fmt.Sprintf("or undo it: %s checkpoint restore %s --yes (the safety checkpoint taken before it)", rewind, e.Safety),
	}
}

// RestoreFailedError is a restore that failed once it had begun to write
// the work tree: its marker stays, as an interrupted one's does, and Hints
// says how to finish or undo it, as for an interrupted one.
type RestoreFailedError struct {
	Err     error
	Restore InterruptedError
}

// Error says that the restore failed and what stopped it: the reason
// alone (git's message, a path left) would not tell that the work tree
// may be half restored.
func (e *RestoreFailedError) Error() string {
	return fmt.Sprintf("the restore to checkpoint %s (%s) failed after it began to write; the work tree may be half restored: %v", e.Restore.Target, e.Restore.Reason, e.Err)
}

func (e *RestoreFailedError) Unwrap() error   { return e.Err }
func (e *RestoreFailedError) Hints() []string { return e.Restore.Hints() }

type restoreMarker struct {
	target, safety, reason string
	files                  []string
}

func (m *restoreMarker) err() error {
	return &InterruptedError{Target: m.target, Safety: m.safety, Reason: m.reason, Files: m.files}
}

// markRestore writes the marker of a restore about to write the work tree:
// its target, its safety checkpoint and its --file paths (quoted, one a line:
// any name round-trips), so the next command can say how to finish or undo
// exactly this restore.
func (s *Store) markRestore(target, safety *Checkpoint, files []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "target %s\nsafety %s\nreason %s\nstarted %s\n", target.Short(), safety.Short(), target.Reason, time.Now().UTC().Format(time.RFC3339))
	for _, f := range files {
		fmt.Fprintf(&b, "file %s\n", strconv.Quote(f))
	}
	return writeAtomic(s.restoreMarker(), []byte(b.String()), 0o600)
}

// interruptedRestore reads the marker an unfinished restore left, or nil.
func (s *Store) interruptedRestore() (*restoreMarker, error) {
	data, err := os.ReadFile(s.restoreMarker())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	m := &restoreMarker{}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, " ")
		switch k {
		case "target":
			m.target = v
		case "safety":
			m.safety = v
		case "reason":
			m.reason = v
		case "file":
			if f, err := strconv.Unquote(v); err == nil {
				m.files = append(m.files, f)
			}
		}
	}
	return m, nil
}

// Interrupted returns the *InterruptedError of an unfinished restore, or nil.
func (s *Store) Interrupted() error {
	m, err := s.interruptedRestore()
	if err != nil || m == nil {
		return err
	}
	return m.err()
}
