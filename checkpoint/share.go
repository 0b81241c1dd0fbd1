package checkpoint

// This file makes a store's checkpoints and runs portable, with git as the
// distributed engine: a run (the files of a pipeline's dispatch and scratch
// directories) is kept as a commit under refs/rewind/runs/<session>; a git
// bundle carries the runs and every checkpoint to another machine; push and
// pull share them through any git remote, under refs namespaced by the
// project's id (ProjectID), so every clone of the project finds them.
//
// Checkpoint commits record no absolute path (their trailers hold paths
// relative to the work tree, the project's branch and HEAD), so they move
// between stores unchanged: the same commit id everywhere. Only their refs
// are per store (refs/rewind/checkpoints/<seq>, a store's own sequence), so a
// checkpoint that arrives is given the next free sequence number here, and
// one the store has already (the same commit id) is not added twice.
// Remotes name checkpoints by commit id: two machines never fight over a
// name, and the only refs that can conflict are runs, whose commits chain
// (each export's parent is the previous one), so an update is a fast-forward
// or a conflict that is reported and never overwritten.

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/rewind-cli/rewind/gitexec"
)

// RunPrefix holds one ref per exported run, named by its session.
const RunPrefix = "refs/rewind/runs/"

// projectPrefix is where a remote keeps each project's checkpoints and runs:
// refs/rewind/projects/<project id>/{checkpoints/<commit id>,runs/<session>}.
const projectPrefix = "refs/rewind/projects/"

// incomingPrefix holds what a fetch brought, under a name of its own per
// operation, until it is accepted or dropped.
const incomingPrefix = "refs/rewind/incoming/"

// ErrNoProjectID means the work tree has no commit to name the project by.
var ErrNoProjectID = errors.New("the project has no commit to name it by")

// ErrBadSession means a session cannot name a run's ref.
var ErrBadSession = errors.New("invalid run session")

// ErrBadRemote means a remote or bundle path could be taken for an option.
var ErrBadRemote = errors.New("invalid remote")

// ProjectID names the project the same way in every clone, on every machine:
// the root commit reached from HEAD through first parents (a history with
// several roots, unrelated histories merged, is named by its main line's);
// for a work tree below the repository's top level, followed by "-" and a
// hash of its path in the repository.
// roots is the number of root commits HEAD reaches. A work tree outside a git
// repository, or one without a commit, has no id (ErrNoProjectID).
func ProjectID(ctx context.Context, workTree string) (id string, roots int, err error) {
	p := gitexec.Project{Dir: workTree}
	if _, err := p.Run(ctx, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err != nil {
		return "", 0, fmt.Errorf("%w: %s is not in a git repository with a commit", ErrNoProjectID, workTree)
	}
	out, err := p.Run(ctx, "rev-list", "--first-parent", "--max-parents=0", "HEAD", "--")
	if err != nil {
		return "", 0, err
	}
	first := strings.Fields(string(out))
	if len(first) != 1 {
		return "", 0, fmt.Errorf("%w: git rev-list found %d first-parent roots", ErrNoProjectID, len(first))
	}
	all, err := p.Run(ctx, "rev-list", "--max-parents=0", "HEAD", "--")
	if err != nil {
		return "", 0, err
	}
	id = first[0]
	// A work tree below the repository's top level (one project of a
	// monorepo) is a project of its own: its checkpoints hold only its
	// files, and another directory's restored into it would replace them.
	prefix, err := p.Run(ctx, "rev-parse", "--show-prefix")
	if err != nil {
		return "", 0, err
	}
	if rel := strings.TrimSuffix(strings.TrimSpace(string(prefix)), "/"); rel != "" {
		sum := sha256.Sum256([]byte(rel))
		id += "-" + hex.EncodeToString(sum[:])[:12]
	}
	return id, len(strings.Fields(string(all))), nil
}

// CheckSession refuses a session that cannot name a ref (or a directory).
func CheckSession(session string) error {
	ok := session != "" && len(session) <= 64 && session[0] != '.' && session[0] != '-' &&
		!strings.Contains(session, "..") && !strings.HasSuffix(session, ".lock") && !strings.HasSuffix(session, ".")
	for _, r := range session {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("%w: %q (letters, digits, '_', '-' and '.', at most 64)", ErrBadSession, session)
	}
	return nil
}

// CheckRemote refuses a remote URL or bundle path git could take for an
// option, and an empty one.
func CheckRemote(what, v string) error {
	switch {
	case v == "":
		return fmt.Errorf("%w: the %s is empty", ErrBadRemote, what)
	case strings.HasPrefix(v, "-"):
		return fmt.Errorf("%w: the %s %q starts with '-' (git would take it for an option)", ErrBadRemote, what, v)
	case strings.ContainsAny(v, "\x00\n"):
		return fmt.Errorf("%w: the %s %q holds a NUL or a line break", ErrBadRemote, what, v)
	}
	return nil
}

// RunFile is one file of a run as the store keeps it: a path relative to the
// run's root, executable or not, and its content.
type RunFile struct {
	Path string
	Exec bool
	Data []byte
}

// SavedRun says what SaveRun did.
type SavedRun struct {
	ID      string // the run's commit
	Parent  string // the commit the ref named before ("" for a new run)
	Updated bool   // false: the ref named the same content already
}

// SaveRun records files as the run of session: a commit under
// refs/rewind/runs/<session> whose parent is the run's previous commit, so
// that every later export is a fast-forward of the earlier ones. The same
// content as the ref's commit records nothing new. The commit date is the
// store's now, so --now makes run ids reproducible.
func (s *Store) SaveRun(ctx context.Context, session string, files []RunFile, title string) (*SavedRun, error) {
	if err := CheckSession(session); err != nil {
		return nil, err
	}
	unlock, err := s.begin(ctx, false, true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	tree, err := s.writeRunTree(ctx, files)
	if err != nil {
		return nil, err
	}
	ref := RunPrefix + session
	parent, err := s.resolveRef(ctx, ref)
	if err != nil {
		return nil, err
	}
	if parent != "" {
		out, err := s.git().Run(ctx, "rev-parse", "--verify", "--quiet", parent+"^{tree}")
		if err != nil {
			return nil, err
		}
		if strings.TrimSpace(string(out)) == tree {
			return &SavedRun{ID: parent, Parent: parent}, nil
		}
	}
	now := s.now()
	g := s.git()
	g.Date = now
	args := []string{"commit-tree", tree}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	msg := fmt.Sprintf("%s | %s | run\n", title, now.Format(time.RFC3339))
	out, err := g.RunInput(ctx, strings.NewReader(msg), args...)
	if err != nil {
		return nil, err
	}
	id := strings.TrimSpace(string(out))
	old := parent
	if old == "" {
		old = strings.Repeat("0", len(id))
	}
	if _, err := g.Run(ctx, "update-ref", "--no-deref", ref, id, old); err != nil {
		return nil, err
	}
	return &SavedRun{ID: id, Parent: parent, Updated: true}, nil
}

// writeRunTree stores files as blobs and a tree, through an index of its
// own (never rewind's or the procedure's), and returns the tree's id.
func (s *Store) writeRunTree(ctx context.Context, files []RunFile) (string, error) {
	var info strings.Builder
	seen := map[string]bool{}
	for _, f := range files {
		if f.Path == "" || strings.HasPrefix(f.Path, "/") || seen[f.Path] || strings.ContainsAny(f.Path, "\x00\n") {
			return "", fmt.Errorf("run file %q: not a relative path, or given twice", f.Path)
		}
		seen[f.Path] = true
		out, err := s.git().RunInput(ctx, bytes.NewReader(f.Data), "hash-object", "-w", "--no-filters", "--stdin")
		if err != nil {
			return "", err
		}
		mode := "100644"
		if f.Exec {
			mode = "100755"
		}
		fmt.Fprintf(&info, "%s %s\t%s\n", mode, strings.TrimSpace(string(out)), f.Path)
	}
	index := s.scratchFile(fmt.Sprintf("run-index-%d", os.Getpid()))
	os.Remove(index)
	defer os.Remove(index)
	g := s.git()
	g.IndexFile = index
	if _, err := g.RunInput(ctx, strings.NewReader(info.String()), "update-index", "--add", "--index-info"); err != nil {
		return "", err
	}
	out, err := g.Run(ctx, "write-tree")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// resolveRef is the commit ref names, or "" when there is no such ref.
func (s *Store) resolveRef(ctx context.Context, ref string) (string, error) {
	out, err := s.git().Run(ctx, "for-each-ref", "--format=%(objectname)", ref)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Fields(string(out)) {
		return l, nil
	}
	return "", nil
}

// Runs lists the runs the store holds: session -> commit.
func (s *Store) Runs(ctx context.Context) (map[string]string, error) {
	runs := map[string]string{}
	if !s.Exists() {
		return runs, nil
	}
	out, err := s.git().Run(ctx, "for-each-ref", "--format=%(refname) %(objectname)", RunPrefix)
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if ref, id, ok := strings.Cut(l, " "); ok {
			runs[strings.TrimPrefix(ref, RunPrefix)] = id
		}
	}
	return runs, nil
}

// RunHistory lists a run's earlier commits, newest first, at most max of
// them (each export's parent is the one before it).
func (s *Store) RunHistory(ctx context.Context, commit string, max int) ([]string, error) {
	return runHistory(ctx, s.git(), commit, max)
}

// RunFiles reads the files a run's commit holds.
func (s *Store) RunFiles(ctx context.Context, commit string) ([]RunFile, error) {
	return runFiles(ctx, s.git(), commit)
}

func runHistory(ctx context.Context, g gitexec.Shadow, commit string, max int) ([]string, error) {
	out, err := g.Run(ctx, "rev-list", "--first-parent", fmt.Sprintf("--max-count=%d", max+1), commit, "--")
	if err != nil {
		return nil, err
	}
	ids := strings.Fields(string(out))
	if len(ids) > 0 {
		ids = ids[1:]
	}
	return ids, nil
}

func runFiles(ctx context.Context, g gitexec.Shadow, commit string) ([]RunFile, error) {
	out, err := g.Run(ctx, "ls-tree", "-r", "-z", "--full-tree", commit+"^{commit}", "--")
	if err != nil {
		return nil, err
	}
	var files []RunFile
	var in strings.Builder
	for _, entry := range splitNul(out) {
		head, path, ok := strings.Cut(entry, "\t")
		f := strings.Fields(head)
		if !ok || len(f) != 3 || f[1] != "blob" {
			return nil, fmt.Errorf("run %s: unexpected entry %q", short8(commit), entry)
		}
		files = append(files, RunFile{Path: path, Exec: f[0] == "100755"})
		in.WriteString(f[2] + "\n")
	}
	if len(files) == 0 {
		return nil, nil
	}
	out, err = g.RunInput(ctx, strings.NewReader(in.String()), "cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	for i := range files {
		nl := bytes.IndexByte(out, '\n')
		if nl < 0 {
			return nil, fmt.Errorf("cat-file: short output")
		}
		head := strings.Fields(string(out[:nl]))
		if len(head) != 3 {
			return nil, fmt.Errorf("cat-file: %s", out[:nl])
		}
		size, err := strconv.Atoi(head[2])
		if err != nil || nl+1+size+1 > len(out) {
			return nil, fmt.Errorf("cat-file: %s", out[:nl])
		}
		files[i].Data = out[nl+1 : nl+1+size]
		out = out[nl+1+size+1:]
	}
	return files, nil
}

func short8(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// BundleRef is one ref a bundle carries.
type BundleRef struct {
	Name, ID string
}

// WriteBundle writes a git bundle to path holding the runs of sessions and
// every one of rewind's own checkpoints (their refs under
// refs/rewind/checkpoints/). The bundle is written whole or not at all: to a
// temporary file beside path, synced, then renamed.
func (s *Store) WriteBundle(ctx context.Context, path string, sessions []string) ([]BundleRef, error) {
	if err := CheckRemote("bundle path", path); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	out, err := s.git().Run(ctx, "for-each-ref", "--format=%(refname) %(objectname)", refPrefix)
	if err != nil {
		return nil, err
	}
	var refs []BundleRef
	for _, session := range sessions {
		id, err := s.resolveRef(ctx, RunPrefix+session)
		if err != nil {
			return nil, err
		}
		if id == "" {
			return nil, fmt.Errorf("the store holds no run %s", session)
		}
		refs = append(refs, BundleRef{RunPrefix + session, id})
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if name, id, ok := strings.Cut(l, " "); ok {
			refs = append(refs, BundleRef{name, id})
		}
	}
	tmp := filepath.Join(filepath.Dir(abs), ".rewind-tmp-bundle-"+nonce())
	defer os.Remove(tmp)
	args := []string{"bundle", "create", "-q", tmp}
	for _, r := range refs {
		args = append(args, r.Name)
	}
	if _, err := s.git().Run(ctx, args...); err != nil {
		return nil, err
	}
	f, err := os.Open(tmp)
	if err != nil {
		return nil, err
	}
	err = f.Sync()
	f.Close()
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, abs); err != nil {
		return nil, err
	}
	return refs, syncDir(filepath.Dir(abs))
}

// lastLine is the last line of git's stderr: its fatal error, after the
// lines that led to it.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func nonce() string {
	b := make([]byte, 6)
	rand.Read(b)
	return fmt.Sprintf("%d-%s", os.Getpid(), hex.EncodeToString(b))
}

// ErrBadBundle means a file is not a complete bundle git can read.
var ErrBadBundle = errors.New("not a usable bundle")

// Bundle is a bundle git has read whole into a throwaway repository, where
// its runs can be read before anything is written to a store.
type Bundle struct {
	Path string      // absolute
	Refs []BundleRef // as the bundle names them
	g    gitexec.Shadow
	dir  string
}

// OpenBundle checks path and reads it into a throwaway repository: git
// bundle verify reads the header and checks the prerequisites (a bundle
// rewind writes needs none), and only reading the pack whole (index-pack,
// and a fetch's connectivity check) finds a truncated or damaged one. Close
// removes the repository.
func OpenBundle(ctx context.Context, path string) (*Bundle, error) {
	if err := CheckRemote("bundle path", path); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrBadBundle, path)
	}
	dir, err := os.MkdirTemp("", "rewind-bundle-")
	if err != nil {
		return nil, err
	}
	b := &Bundle{Path: abs, dir: dir, g: gitexec.Shadow{GitDir: filepath.Join(dir, "git"), WorkTree: dir, IndexFile: filepath.Join(dir, "index"), ConfigHome: filepath.Join(dir, "home")}}
	if err := b.open(ctx); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

func (b *Bundle) open(ctx context.Context) error {
	if err := b.g.Init(ctx); err != nil {
		return err
	}
	for _, args := range [][]string{{"bundle", "verify", "-q", b.Path}, append(gitTransport(), "fetch", "--quiet", "--no-tags", "--", b.Path, "+refs/*:refs/bundle/*")} {
		if _, err := b.g.Run(ctx, args...); err != nil {
			var ge *gitexec.Error
			if errors.As(err, &ge) && ge.ExitCode > 0 {
				return fmt.Errorf("%w: %s: %s", ErrBadBundle, b.Path, lastLine(ge.Stderr))
			}
			return err
		}
	}
	out, err := b.g.Run(ctx, "bundle", "list-heads", b.Path)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if id, name, ok := strings.Cut(l, " "); ok {
			b.Refs = append(b.Refs, BundleRef{name, id})
		}
	}
	return nil
}

// Runs lists the runs the bundle carries: session -> commit.
func (b *Bundle) Runs() map[string]string {
	runs := map[string]string{}
	for _, r := range b.Refs {
		if session, ok := strings.CutPrefix(r.Name, RunPrefix); ok && CheckSession(session) == nil {
			runs[session] = r.ID
		}
	}
	return runs
}

// RunFiles reads the files a run's commit in the bundle holds.
func (b *Bundle) RunFiles(ctx context.Context, commit string) ([]RunFile, error) {
	return runFiles(ctx, b.g, commit)
}

// RunHistory lists a run's earlier commits in the bundle (see Store.RunHistory).
func (b *Bundle) RunHistory(ctx context.Context, commit string, max int) ([]string, error) {
	return runHistory(ctx, b.g, commit, max)
}

// Close removes the throwaway repository.
func (b *Bundle) Close() error { return os.RemoveAll(b.dir) }

// gitTransport allows git to reach remotes over the protocols that move
// checkpoints (file paths, ssh, https) for one command: every shadow command
// refuses all protocols (protocol.allow=never), and ext:: (which runs a
// command) stays refused.
func gitTransport() []string {
	return []string{"-c", "protocol.file.allow=always", "-c", "protocol.ssh.allow=always", "-c", "protocol.https.allow=always"}
}

// Incoming is what a fetch brought into the store, under a namespace of its
// own, until Accept takes it or Drop forgets it.
type Incoming struct {
	ns          string
	Checkpoints []IncomingCheckpoint
	Runs        map[string]string // session -> commit
}

// IncomingCheckpoint is one checkpoint a fetch brought.
type IncomingCheckpoint struct {
	ID    string
	order int // the sender's sequence number, when its ref gave one
}

// FetchBundle brings a verified bundle's runs and checkpoints into the store.
func (s *Store) FetchBundle(ctx context.Context, path string) (*Incoming, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	return s.fetch(ctx, abs, "refs/rewind/")
}

// FetchRemote brings the project's runs and checkpoints from a remote.
func (s *Store) FetchRemote(ctx context.Context, remote, project string) (*Incoming, error) {
	if err := CheckRemote("remote", remote); err != nil {
		return nil, err
	}
	return s.fetch(ctx, remote, projectPrefix+project+"/")
}

// fetch copies the refs under from in source to a fresh namespace of the store.
func (s *Store) fetch(ctx context.Context, source, from string) (*Incoming, error) {
	unlock, err := s.begin(ctx, false, true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := s.dropStaleIncoming(ctx); err != nil {
		return nil, err
	}
	in := &Incoming{ns: incomingPrefix + nonce() + "/", Runs: map[string]string{}}
	args := append(gitTransport(), "fetch", "--quiet", "--no-tags", "--", source, "+"+from+"*:"+in.ns+"*")
	if _, err := s.git().Run(ctx, args...); err != nil {
		return nil, remoteError(source, err)
	}
	out, err := s.git().Run(ctx, "for-each-ref", "--format=%(refname) %(objectname)", in.ns)
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		ref, id, ok := strings.Cut(l, " ")
		if !ok {
			continue
		}
		kind, name, _ := strings.Cut(strings.TrimPrefix(ref, in.ns), "/")
		switch kind {
		case "runs":
			if CheckSession(name) == nil {
				in.Runs[name] = id
			}
		case "checkpoints":
			order, err := strconv.Atoi(name)
			if err != nil {
				order = -1 // named by commit id: ordered by time
			}
			in.Checkpoints = append(in.Checkpoints, IncomingCheckpoint{ID: id, order: order})
		}
	}
	return in, nil
}

// dropStaleIncoming deletes what fetches of rewinds that died before
// accepting or dropping it left (their namespace names their pid, and the
// pid is gone), so that no prune keeps those objects for ever.
func (s *Store) dropStaleIncoming(ctx context.Context) error {
	out, err := s.git().Run(ctx, "for-each-ref", "--format=%(refname)", incomingPrefix)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, ref := range strings.Fields(string(out)) {
		ns, _, _ := strings.Cut(strings.TrimPrefix(ref, incomingPrefix), "/")
		pidText, _, _ := strings.Cut(ns, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 || pid != os.Getpid() && unix.Kill(pid, 0) == unix.ESRCH {
			fmt.Fprintf(&b, "delete %s\n", ref)
		}
	}
	if b.Len() == 0 {
		return nil
	}
	_, err = s.git().RunInput(ctx, strings.NewReader(b.String()), "update-ref", "--stdin")
	return err
}

// Drop deletes the refs of what a fetch brought (its objects go with the next
// prune unless something accepted names them).
func (s *Store) Drop(ctx context.Context, in *Incoming) error {
	if in == nil {
		return nil
	}
	out, err := s.git().Run(ctx, "for-each-ref", "--format=delete %(refname)", in.ns)
	if err != nil || len(bytes.TrimSpace(out)) == 0 {
		return err
	}
	_, err = s.git().RunInput(ctx, bytes.NewReader(out), "update-ref", "--stdin")
	return err
}

// RunUpdate is what accepting (or pushing) did to one run's ref.
type RunUpdate struct {
	Session string
	Old     string // "" when the ref was absent
	New     string // the incoming commit
	// Result is "new", "up to date", "fast-forward", "ahead" (the local run
	// already holds the incoming one) or "conflict" (the two diverged: the
	// ref is left as it was).
	Result string
}

// Accepted says what Accept did.
type Accepted struct {
	Added   []*Checkpoint // checkpoints new to the store, in the order given their refs
	Known   int           // incoming checkpoints the store had already
	Skipped []string      // incoming commits that are not checkpoints
	// TooOld counts incoming checkpoints older than every one the store
	// keeps (see Accept): the store would evict them at once.
	TooOld int
	Runs   []RunUpdate // by session
}

// Conflicts are the runs whose refs were left alone because they diverged.
func (a *Accepted) Conflicts() []RunUpdate {
	var out []RunUpdate
	for _, r := range a.Runs {
		if r.Result == "conflict" {
			out = append(out, r)
		}
	}
	return out
}

// Accept takes what a fetch brought: every checkpoint the store lacks gets a
// ref of its own (the next sequence numbers, in the sender's order, else by
// time), and each run's ref is created or fast-forwarded; a run that
// diverged from the store's is reported and left as it is. With allOrNothing
// (an import), a conflicting run makes Accept change nothing at all. The
// incoming refs are dropped in every case.
//
// keep is the store's budget (REWIND_KEEP): an incoming checkpoint that
// would not be among the newest keep of the store's own and the incoming
// ones, by time, is left out (TooOld). A remote keeps every checkpoint ever
// pushed; without this, each pull would bring back the ones the store
// evicted, for the next checkpoint to evict again.
func (s *Store) Accept(ctx context.Context, in *Incoming, allOrNothing bool, keep int) (*Accepted, error) {
	defer s.Drop(ctx, in)
	unlock, err := s.begin(ctx, false, true)
	if err != nil {
		return nil, err
	}
	defer unlock()
	res := &Accepted{}
	sessions := make([]string, 0, len(in.Runs))
	for session := range in.Runs {
		sessions = append(sessions, session)
	}
	sort.Strings(sessions)
	for _, session := range sessions {
		u, err := s.compareRun(ctx, session, in.Runs[session])
		if err != nil {
			return nil, err
		}
		res.Runs = append(res.Runs, u)
	}
	if allOrNothing && len(res.Conflicts()) > 0 {
		return res, nil
	}

	cps, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	have := map[string]bool{}
	for _, c := range cps {
		have[c.ID] = true
	}
	order := map[string]int{}
	for _, ic := range in.Checkpoints {
		order[ic.ID] = ic.order
	}
	out, err := s.git().Run(ctx, "for-each-ref", "--format=%(objectname)%00%(objecttype)%00%(tree)%00%(contents)%00", in.ns+"checkpoints/")
	if err != nil {
		return nil, err
	}
	type arrival struct {
		c     *Checkpoint
		order int
	}
	var arrivals []arrival
	fields := bytes.Split(out, []byte{0})
	for i := 0; i+3 < len(fields); i += 4 {
		id := strings.TrimLeft(string(fields[i]), "\n")
		if have[id] {
			res.Known++
			continue
		}
		have[id] = true
		c := &Checkpoint{ID: id, Tree: string(fields[i+2])}
		body := string(fields[i+3])
		parseMessage(c, body)
		if string(fields[i+1]) != "commit" || c.Time.IsZero() || len(strings.SplitN(firstLine(body), " | ", 3)) != 3 {
			res.Skipped = append(res.Skipped, id)
			continue
		}
		arrivals = append(arrivals, arrival{c, order[id]})
	}
	if keep > 0 {
		var times []time.Time
		for _, c := range cps {
			if !c.Procedure {
				times = append(times, c.Time)
			}
		}
		for _, a := range arrivals {
			times = append(times, a.c.Time)
		}
		if len(times) > keep {
			sort.Slice(times, func(a, b int) bool { return times[a].After(times[b]) })
			oldest := times[keep-1]
			kept := arrivals[:0]
			for _, a := range arrivals {
				if a.c.Time.Before(oldest) {
					res.TooOld++
					continue
				}
				kept = append(kept, a)
			}
			arrivals = kept
		}
	}
	sort.SliceStable(arrivals, func(a, b int) bool {
		x, y := arrivals[a], arrivals[b]
		if x.order >= 0 && y.order >= 0 {
			return x.order < y.order
		}
		if !x.c.Time.Equal(y.c.Time) {
			return x.c.Time.Before(y.c.Time)
		}
		return x.c.ID < y.c.ID
	})
	next := 1
	for _, c := range cps {
		if !c.Procedure && c.Seq >= next {
			next = c.Seq + 1
		}
	}
	var updates strings.Builder
	for _, a := range arrivals {
		a.c.Seq = next
		next++
		fmt.Fprintf(&updates, "create %s %s\n", refName(a.c.Seq), a.c.ID)
		res.Added = append(res.Added, a.c)
	}
	for i, u := range res.Runs {
		switch u.Result {
		case "new":
			fmt.Fprintf(&updates, "create %s%s %s\n", RunPrefix, u.Session, u.New)
		case "fast-forward":
			fmt.Fprintf(&updates, "update %s%s %s %s\n", RunPrefix, u.Session, u.New, u.Old)
		}
		res.Runs[i] = u
	}
	if updates.Len() > 0 {
		// One transaction: every ref is created or moved, or none is.
		if _, err := s.git().RunInput(ctx, strings.NewReader(updates.String()), "update-ref", "--stdin"); err != nil {
			return nil, err
		}
	}
	if len(res.Added) > 0 {
		all, err := s.List(ctx)
		if err != nil {
			return nil, err
		}
		if err := s.writeManifest(all); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// compareRun says what taking incoming as session's run would be.
func (s *Store) compareRun(ctx context.Context, session, incoming string) (RunUpdate, error) {
	u := RunUpdate{Session: session, New: incoming}
	old, err := s.resolveRef(ctx, RunPrefix+session)
	if err != nil {
		return u, err
	}
	u.Old = old
	switch {
	case old == "":
		u.Result = "new"
	case old == incoming:
		u.Result = "up to date"
	case s.isAncestor(ctx, old, incoming):
		u.Result = "fast-forward"
	case s.isAncestor(ctx, incoming, old):
		u.Result = "ahead"
	default:
		u.Result = "conflict"
	}
	return u, nil
}

func (s *Store) isAncestor(ctx context.Context, a, b string) bool {
	_, err := s.git().Run(ctx, "merge-base", "--is-ancestor", a, b)
	return err == nil
}

// ErrRemote means git could not reach a remote, or read from it.
var ErrRemote = errors.New("cannot use the remote")

// remoteError words git's failure to reach or read a remote (or bundle) as
// its fatal line, keeping the git error for the rest.
func remoteError(remote string, err error) error {
	var ge *gitexec.Error
	if errors.As(err, &ge) && ge.ExitCode > 0 {
		return fmt.Errorf("%w %s: %s", ErrRemote, remote, strings.TrimPrefix(firstLine(ge.Stderr), "fatal: "))
	}
	return err
}

// PushedRef is one ref a push offered the remote.
type PushedRef struct {
	Kind  string // "checkpoint" or "run"
	Name  string // the checkpoint's id, or the run's session
	Ref   string // the remote ref
	Local string // the commit offered
	// Result is "new", "up to date", "fast-forward", "conflict" (the remote's
	// ref diverged, or names a commit this store lacks: left as it is) or
	// "rejected" (the remote refused it; Why says why).
	Result string
	Why    string
}

// Push offers the remote every one of rewind's own checkpoints and every run
// of the store, under the project's namespace, with git's fast-forward rule:
// a ref that diverged on the remote is reported and never overwritten.
func (s *Store) Push(ctx context.Context, remote, project string) ([]PushedRef, error) {
	if err := CheckRemote("remote", remote); err != nil {
		return nil, err
	}
	var offered []PushedRef
	if s.Exists() {
		own, err := s.listOwn(ctx)
		if err != nil {
			return nil, err
		}
		seen := map[string]bool{}
		for _, c := range own {
			if !seen[c.ID] {
				seen[c.ID] = true
				offered = append(offered, PushedRef{Kind: "checkpoint", Name: c.ID, Local: c.ID,
					Ref: projectPrefix + project + "/checkpoints/" + c.ID})
			}
		}
		runs, err := s.Runs(ctx)
		if err != nil {
			return nil, err
		}
		sessions := make([]string, 0, len(runs))
		for session := range runs {
			sessions = append(sessions, session)
		}
		sort.Strings(sessions)
		for _, session := range sessions {
			offered = append(offered, PushedRef{Kind: "run", Name: session, Local: runs[session],
				Ref: projectPrefix + project + "/runs/" + session})
		}
	}
	if len(offered) == 0 {
		return nil, nil
	}
	args := append(gitTransport(), "push", "--porcelain", "--", remote)
	for _, r := range offered {
		args = append(args, r.Local+":"+r.Ref)
	}
	out, err := s.git().Run(ctx, args...)
	statuses := ParsePushPorcelain(out)
	if err != nil && len(statuses) == 0 {
		return nil, remoteError(remote, err)
	}
	for i, r := range offered {
		st, ok := statuses[r.Ref]
		if !ok {
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("git push reported nothing for %s", r.Ref)
		}
		offered[i].Result, offered[i].Why = st.Result, st.Why
	}
	return offered, nil
}

// PushStatus is what git push --porcelain reported for one remote ref.
type PushStatus struct {
	Result string // as PushedRef.Result
	Why    string // git's summary for a ref not taken
}

// ParsePushPorcelain reads the output of git push --porcelain: per remote
// ref, its outcome. Lines it does not understand are left out.
func ParsePushPorcelain(out []byte) map[string]PushStatus {
	res := map[string]PushStatus{}
	for _, line := range strings.Split(string(out), "\n") {
		if len(line) < 3 || line[1] != '\t' {
			continue
		}
		fields := strings.SplitN(line[2:], "\t", 2)
		if len(fields) != 2 {
			continue
		}
		_, to, ok := strings.Cut(fields[0], ":")
		if !ok || to == "" {
			continue
		}
		summary := fields[1]
		var st PushStatus
		switch line[0] {
		case '*':
			st.Result = "new"
		case '=':
			st.Result = "up to date"
		case ' ':
			st.Result = "fast-forward"
		case '!':
			st.Why = strings.TrimSpace(summary)
			if strings.HasPrefix(summary, "[rejected]") {
				st.Result = "conflict"
			} else {
				st.Result = "rejected"
			}
		case '+', '-':
			// A forced update or a deletion: rewind asks for neither.
			st.Result, st.Why = "rejected", "unexpected: "+strings.TrimSpace(summary)
		default:
			continue
		}
		res[to] = st
	}
	return res
}
