package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rewind-cli/rewind/gitexec"
)

// refPrefix holds one ref per checkpoint, named by its sequence number.
const refPrefix = "refs/rewind/checkpoints/"

// Checkpoint is one recorded snapshot.
type Checkpoint struct {
	ID     string    // the commit id
	Seq    int       // the creation order
	Reason string    //
	Source string    // the skill or command that took it
	Time   time.Time // when it was taken (UTC)
	Tree   string
	// Procedure marks a checkpoint of crucible's checkpoint procedure: a
	// commit on the store's HEAD, or a row of checkpoint-manifest.md (rewind's
	// own have a ref each, named by Seq).
	Procedure bool
	orphan    bool   // a row naming a commit on neither HEAD nor a ref: prune pins it
	Branch    string // the project's branch then, when the work tree is a git repository
	Head      string // the project's HEAD then
	Skipped   []Skipped

	meta *meta // what git cannot record (meta.go); nil for older checkpoints
}

// Short is the 8-character id crucible shows.
func (c *Checkpoint) Short() string { return c.ID[:8] }

// ErrBadLabel means a reason or source would break the manifest table.
var ErrBadLabel = errors.New("invalid checkpoint label")

// CheckLabel refuses reasons and sources that are empty, multi-line, hold a
// "|" (they are columns of checkpoint-manifest.md) or are not valid UTF-8 (git
// would store them, but no REF typed later could name them again).
func CheckLabel(what, v string) error {
	switch {
	case strings.TrimSpace(v) == "":
		return fmt.Errorf("%w: the %s is empty", ErrBadLabel, what)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: the %s %q is not valid UTF-8", ErrBadLabel, what, v)
	case strings.ContainsRune(v, 0):
		return fmt.Errorf("%w: the %s %q holds a NUL byte", ErrBadLabel, what, v)
	case strings.ContainsAny(v, "|\n\r"):
		return fmt.Errorf("%w: the %s %q holds a '|' or a line break", ErrBadLabel, what, v)
	case strings.TrimSpace(v) != v:
		return fmt.Errorf("%w: the %s %q starts or ends with spaces", ErrBadLabel, what, v)
	}
	return nil
}

// List returns every checkpoint, oldest first: rewind's own (one ref each
// under refs/rewind/checkpoints/, in their sequence) and those crucible's
// procedure made (commits on the store's HEAD whose message is "<reason> |
// <timestamp> | <source>", in their history's order), merged by time; at equal
// times the procedure's come first. A procedure commit takes the Seq of the
// rewind checkpoint before it (0 for none), so the newest checkpoint's Seq
// plus one is always the next free sequence number.
func (s *Store) List(ctx context.Context) ([]*Checkpoint, error) {
	if !s.Exists() {
		return nil, nil
	}
	var own, theirs []*Checkpoint
	err := parallel(
		func() (err error) { own, err = s.listOwn(ctx); return err },
		func() (err error) { theirs, err = s.listProcedure(ctx); return err },
	)
	if err != nil {
		return nil, err
	}
	rows, named, err := s.manifestRows(ctx, own, theirs)
	if err != nil {
		return nil, err
	}
	if named != nil {
		// The procedure evicts a checkpoint by dropping its row: a commit of
		// its on HEAD that no row names any more is one it evicted.
		kept := theirs[:0]
		for _, c := range theirs {
			if named(c.ID) {
				kept = append(kept, c)
			}
		}
		theirs = kept
	}
	theirs = mergeByTime(theirs, rows)
	if len(theirs) == 0 {
		return own, nil
	}
	cps := make([]*Checkpoint, 0, len(own)+len(theirs))
	seq := 0
	for len(own) > 0 || len(theirs) > 0 {
		if len(theirs) > 0 && (len(own) == 0 || !theirs[0].Time.After(own[0].Time)) {
			theirs[0].Seq = seq
			cps, theirs = append(cps, theirs[0]), theirs[1:]
			continue
		}
		seq = own[0].Seq
		cps, own = append(cps, own[0]), own[1:]
	}
	return cps, nil
}

// mergeByTime merges two lists, each in its own order, by time; at equal
// times a's come first.
func mergeByTime(a, b []*Checkpoint) []*Checkpoint {
	if len(b) == 0 {
		return a
	}
	out := make([]*Checkpoint, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		if len(a) > 0 && (len(b) == 0 || !a[0].Time.After(b[0].Time)) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// manifestRows reads the rows of checkpoint-manifest.md that crucible's
// procedure wrote and no commit message already gives: a row naming a commit
// of the procedure under another reason (the procedure records HEAD when
// nothing changed since, and its commit fails), or a commit not on the
// store's HEAD. Such a row is a checkpoint with the row's reason, timestamp
// and source and the commit's tree. Rows naming rewind's own commits are a
// cache of its refs and never read (an evicted checkpoint stays evicted), nor
// are rows naming no commit in the store (crucible's prune drops them too).
//
// named reports whether a row names a commit id; it is nil without a
// manifest (a missing one says nothing of what the procedure evicted).
func (s *Store) manifestRows(ctx context.Context, own, theirs []*Checkpoint) (out []*Checkpoint, named func(string) bool, err error) {
	data, err := os.ReadFile(s.manifestFile())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	type row struct{ hash, stamp, reason, source string }
	var rows []row
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 6 || f[0] != "" || f[5] != "" {
			continue
		}
		r := row{strings.TrimSpace(f[1]), strings.TrimSpace(f[2]), strings.TrimSpace(f[3]), strings.TrimSpace(f[4])}
		if len(r.hash) < 7 || !isHex(r.hash) || r.reason == "" {
			continue // the header, its rule, or not a row
		}
		rows = append(rows, r)
	}
	named = func(id string) bool {
		for _, r := range rows {
			if strings.HasPrefix(id, strings.ToLower(r.hash)) {
				return true
			}
		}
		return false
	}
	known := func(hash, reason string) (*Checkpoint, bool) {
		var match *Checkpoint
		for _, list := range [][]*Checkpoint{own, theirs} {
			for _, c := range list {
				if strings.HasPrefix(c.ID, strings.ToLower(hash)) {
					if c.Reason == reason || !c.Procedure {
						return c, true
					}
					match = c
				}
			}
		}
		return match, false
	}
	var unknown []row
	for _, r := range rows {
		c, same := known(r.hash, r.reason)
		switch {
		case same:
		case c != nil:
			out = append(out, &Checkpoint{ID: c.ID, Tree: c.Tree, Reason: r.reason, Source: r.source, Time: rowTime(r.stamp, c.Time), Procedure: true})
		default:
			unknown = append(unknown, r)
		}
	}
	if len(unknown) > 0 {
		var in strings.Builder
		for _, r := range unknown {
			in.WriteString(r.hash + "^{commit}\n")
		}
		found, err := s.catCommits(ctx, in.String())
		if err != nil {
			return nil, nil, err
		}
		for i, r := range unknown {
			c := found[i]
			if c == nil || c.committer == gitexec.IdentityEmail {
				continue
			}
			out = append(out, &Checkpoint{ID: c.id, Tree: c.tree, Reason: r.reason, Source: r.source, Time: rowTime(r.stamp, c.time), Procedure: true, orphan: true})
		}
	}
	return out, named, nil
}

func rowTime(stamp string, fallback time.Time) time.Time {
	if t := parseStamp(stamp); !t.IsZero() {
		return t
	}
	return fallback
}

type commitInfo struct {
	id, tree, committer string
	time                time.Time
}

// catCommits reads the commits that the lines of in name (one revision a
// line), with one git cat-file; nil for a line naming no commit.
func (s *Store) catCommits(ctx context.Context, in string) ([]*commitInfo, error) {
	out, err := s.git().RunInput(ctx, strings.NewReader(in), "cat-file", "--batch")
	if err != nil {
		return nil, err
	}
	var found []*commitInfo
	for len(out) > 0 {
		nl := bytes.IndexByte(out, '\n')
		if nl < 0 {
			break
		}
		head := strings.Fields(string(out[:nl]))
		out = out[nl+1:]
		if len(head) != 3 {
			found = append(found, nil) // "<rev> missing", "<rev> ambiguous"
			continue
		}
		size, err := strconv.Atoi(head[2])
		if err != nil || size+1 > len(out) {
			return nil, fmt.Errorf("cat-file: unexpected output %q", head)
		}
		body := string(out[:size])
		out = out[size+1:]
		c := &commitInfo{id: head[0]}
		hdr, _, _ := strings.Cut(body, "\n\n")
		for _, l := range strings.Split(hdr, "\n") {
			k, v, _ := strings.Cut(l, " ")
			switch k {
			case "tree":
				c.tree = v
			case "committer":
				if lt, gt := strings.LastIndexByte(v, '<'), strings.LastIndexByte(v, '>'); lt >= 0 && gt > lt {
					c.committer = v[lt+1 : gt]
					if f := strings.Fields(v[gt+1:]); len(f) > 0 {
						if sec, err := strconv.ParseInt(f[0], 10, 64); err == nil {
							c.time = time.Unix(sec, 0).UTC()
						}
					}
				}
			}
		}
		found = append(found, c)
	}
	return found, nil
}

// listOwn lists rewind's checkpoints, by sequence: from the files when the
// refs and the commit cache tell them all (refcache.go), else from git, and
// then the cache is written again.
func (s *Store) listOwn(ctx context.Context) ([]*Checkpoint, error) {
	if cps, ok := s.listOwnFromFiles(); ok {
		return cps, nil
	}
	out, err := s.git().Run(ctx, "for-each-ref", "--format=%(refname)%00%(objectname)%00%(tree)%00%(contents)%00", refPrefix)
	if err != nil {
		return nil, err
	}
	var cps []*Checkpoint
	commits := map[string]cachedCommit{}
	fields := bytes.Split(out, []byte{0})
	for i := 0; i+3 < len(fields); i += 4 {
		ref := strings.TrimLeft(string(fields[i]), "\n")
		commit := cachedCommit{tree: string(fields[i+2]), contents: string(fields[i+3])}
		if c, ok := ownCheckpoint(ref, string(fields[i+1]), commit); ok {
			cps = append(cps, c)
			commits[c.ID] = commit
		}
	}
	s.commits = commits
	s.writeCommitCache(commits)
	sort.Slice(cps, func(a, b int) bool { return cps[a].Seq < cps[b].Seq })
	return cps, nil
}

// listOwnFromFiles is listOwn without git, when it can be: every ref read
// from the files and every commit they name in the commit cache.
func (s *Store) listOwnFromFiles() ([]*Checkpoint, bool) {
	commits := s.readCommitCache()
	if commits == nil {
		return nil, false
	}
	refs, ok := s.ownRefs()
	if !ok {
		return nil, false
	}
	var cps []*Checkpoint
	for ref, id := range refs {
		commit, ok := commits[id]
		if !ok {
			return nil, false
		}
		if c, ok := ownCheckpoint(ref, id, commit); ok {
			cps = append(cps, c)
		}
	}
	s.commits = commits
	sort.Slice(cps, func(a, b int) bool { return cps[a].Seq < cps[b].Seq })
	return cps, true
}

// ownCheckpoint is the checkpoint ref names, at commit id; ok is false for
// a ref rewind did not write.
func ownCheckpoint(ref, id string, commit cachedCommit) (*Checkpoint, bool) {
	seq, err := strconv.Atoi(strings.TrimPrefix(ref, refPrefix))
	if err != nil {
		return nil, false
	}
	c := &Checkpoint{ID: id, Seq: seq, Tree: commit.tree}
	parseMessage(c, commit.contents)
	return c, true
}

// listProcedure lists the checkpoints crucible's procedure committed on the
// store's HEAD, oldest first. A commit whose first line is not "<reason> |
// <timestamp> | <source>" is not a checkpoint. The timestamp is read as
// RFC 3339, or as the procedure writes it ("2026-03-24 12:45:30") in local
// time; else the commit's date stands for it.
func (s *Store) listProcedure(ctx context.Context) ([]*Checkpoint, error) {
	if !s.headBorn() {
		return nil, nil
	}
	out, err := s.git().Run(ctx, "log", "-z", "--no-show-signature", "--format=%H%x00%T%x00%ct%x00%B", "HEAD", "--")
	if err != nil {
		return nil, err
	}
	var cps []*Checkpoint
	fields := bytes.Split(out, []byte{0})
	for i := 0; i+3 < len(fields); i += 4 {
		c := &Checkpoint{ID: strings.TrimLeft(string(fields[i]), "\n"), Tree: string(fields[i+1]), Procedure: true}
		msg := string(fields[i+3])
		if len(strings.SplitN(firstLine(msg), " | ", 3)) != 3 {
			continue
		}
		parseMessage(c, msg)
		if c.Time.IsZero() {
			if sec, err := strconv.ParseInt(string(fields[i+2]), 10, 64); err == nil {
				c.Time = time.Unix(sec, 0).UTC()
			}
		}
		cps = append(cps, c)
	}
	for i, j := 0, len(cps)-1; i < j; i, j = i+1, j-1 {
		cps[i], cps[j] = cps[j], cps[i]
	}
	return cps, nil
}

// headBorn reports whether the store's HEAD names a commit: rewind's own HEAD
// is an unborn branch, so only a store the procedure committed to has one.
// Read from the files, sparing a git call on every list.
func (s *Store) headBorn() bool {
	data, err := os.ReadFile(filepath.Join(s.gitDir(), "HEAD"))
	if err != nil {
		return false
	}
	head := strings.TrimSpace(string(data))
	ref, ok := strings.CutPrefix(head, "ref: ")
	if !ok {
		return isHex(head) && len(head) >= 40
	}
	if _, err := os.Stat(filepath.Join(s.gitDir(), filepath.FromSlash(ref))); err == nil {
		return true
	}
	packed, err := os.ReadFile(filepath.Join(s.gitDir(), "packed-refs"))
	return err == nil && bytes.Contains(packed, []byte(" "+ref+"\n"))
}

// ProjectBranch is the project's current branch ("" when HEAD is detached)
// and whether the work tree is in a git repository with a HEAD.
func (s *Store) ProjectBranch(ctx context.Context) (string, bool) {
	branch, head := s.projectHead(ctx)
	return branch, head != ""
}

// message is a checkpoint's commit message.
func message(c *Checkpoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s | %s | %s\n", c.Reason, c.Time.Format(time.RFC3339), c.Source)
	var trailers []string
	if c.Branch != "" {
		trailers = append(trailers, "Rewind-Branch: "+c.Branch)
	}
	if c.Head != "" {
		trailers = append(trailers, "Rewind-Head: "+c.Head)
	}
	for _, sk := range c.Skipped {
		trailers = append(trailers, "Rewind-Skipped: "+strconv.Quote(sk.Path)+" "+sk.Why)
	}
	trailers = append(trailers, c.meta.trailers()...)
	if len(trailers) > 0 {
		b.WriteString("\n" + strings.Join(trailers, "\n") + "\n")
	}
	return b.String()
}

func parseMessage(c *Checkpoint, msg string) {
	lines := strings.Split(msg, "\n")
	parts := strings.SplitN(lines[0], " | ", 3)
	if len(parts) == 3 {
		c.Reason, c.Source = parts[0], parts[2]
		c.Time = parseStamp(parts[1])
	} else {
		c.Reason = lines[0]
	}
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ": ")
		if !ok || parseMetaTrailer(&c.meta, k, v) {
			continue
		}
		switch k {
		case "Rewind-Branch":
			c.Branch = v
		case "Rewind-Head":
			c.Head = v
		case "Rewind-Skipped":
			if q, err := strconv.QuotedPrefix(v); err == nil {
				p, _ := strconv.Unquote(q)
				c.Skipped = append(c.Skipped, Skipped{Path: p, Why: strings.TrimSpace(v[len(q):])})
			}
		}
	}
}

// stampLayouts are the timestamps read in checkpoint messages and manifest
// rows: rewind's RFC 3339, and crucible's procedure's local times (its
// example is "2026-03-24 12:45:30").
var stampLayouts = []string{"2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02"}

// procedureStamp is how a procedure checkpoint's time is written back to
// checkpoint-manifest.md: as the procedure writes it.
const procedureStamp = "2006-01-02 15:04:05"

// parseStamp reads a timestamp of a message or a manifest row; the zero time
// when it is none of stampLayouts. Times without a zone are local (TZ).
func parseStamp(v string) time.Time {
	v = strings.TrimSpace(v)
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t.UTC()
	}
	for _, layout := range stampLayouts {
		if t, err := time.ParseInLocation(layout, v, time.Local); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// CreateOptions are the inputs of a checkpoint.
type CreateOptions struct {
	Reason      string
	Source      string
	MaxFileSize int64 // <= 0: DefaultMaxFileSize
	Keep        int   // checkpoints kept of each budget after this one (<= 0: 50; see evict)
	// OnlyIfChanged records nothing when the tree is the newest checkpoint's
	// (a hook after a tool call that changed nothing): Created.NotTaken.
	OnlyIfChanged bool
	// CountChanges fills Created.Changed, at the cost of one more git
	// process (a diff-tree against the newest checkpoint's tree): only
	// --json prints the count.
	CountChanges bool

	// captured, when set, is given the capture before the commit is made:
	// what depends on it alone (a restore's diff with its target) starts
	// beside the commit and the ref.
	captured func(*capture)
}

// Created says what Create did.
type Created struct {
	Checkpoint *Checkpoint
	Files      int
	Changed    int         // paths changed against the newest earlier checkpoint (with CountChanges)
	Unchanged  *Checkpoint // the newest earlier checkpoint when its tree is the same
	Duplicate  bool        // same reason, source and tree within a second: nothing recorded
	NotTaken   bool        // OnlyIfChanged and the tree is Unchanged's: nothing recorded
	Evicted    []*Checkpoint

	capture *capture // what the rule held (a restore asks it)
}

// Create snapshots the work tree.
func (s *Store) Create(ctx context.Context, opt CreateOptions) (*Created, error) {
	if err := CheckLabel("reason", opt.Reason); err != nil {
		return nil, err
	}
	if err := CheckLabel("source", opt.Source); err != nil {
		return nil, err
	}
	begun := time.Now()
	// The health check waits: the list of checkpoints the capture runs beside
	// reads the same refs, and fails where git gives up on the repository.
	// Only a failed checkpoint then has the store checked, and taken once more
	// when it was repaired or started anew. (A git process less on every
	// checkpoint.)
	existed := s.Exists()
	unlock, err := s.begin(ctx, true, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	gitexec.TraceStep("lock", begun)
	res, err := s.create(ctx, opt, nil)
	if retry, herr := s.healAfter(ctx, err, existed); herr != nil {
		return nil, herr
	} else if retry {
		return s.create(ctx, opt, nil)
	}
	return res, err
}

// healAfter is the health check of a store an operation found failing (err)
// before it changed anything: a store that fails the check is the error to
// report; retry says the store was repaired or started anew, and the
// operation may run once more.
func (s *Store) healAfter(ctx context.Context, err error, existed bool) (retry bool, _ error) {
	if err == nil || !existed || ctx.Err() != nil {
		return false, nil
	}
	s.cacheWrites.Wait() // before the store may be moved aside
	return s.heal(ctx)
}

// begin starts a mutating operation: it takes the lock and creates the store,
// or checks its health (with checkHealth). With refuseInterrupted, an
// unfinished restore stops it: only a restore may run on a half-restored work
// tree.
func (s *Store) begin(ctx context.Context, refuseInterrupted, checkHealth bool) (func(), error) {
	if err := s.refuseForeign("changing the store"); err != nil {
		return nil, err
	}
	unlock, err := s.lock(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.ensure(ctx, checkHealth); err != nil {
		unlock()
		return nil, err
	}
	if refuseInterrupted {
		if m, err := s.interruptedRestore(); err != nil || m != nil {
			unlock()
			if err != nil {
				return nil, err
			}
			return nil, m.err()
		}
	}
	return unlock, nil
}

// create is Create under the lock. cps, when not nil, is the list of
// checkpoints as the caller just read it under the lock (else it is read
// beside the capture).
func (s *Store) create(ctx context.Context, opt CreateOptions, cps []*Checkpoint) (*Created, error) {
	max := opt.MaxFileSize
	if max <= 0 {
		max = DefaultMaxFileSize
	}
	// The capture (which reads the project's HEAD too) and the list of
	// checkpoints are independent (the capture writes only the store's
	// index).
	var cap *capture
	err := parallel(
		func() (err error) {
			defer gitexec.TraceStep("capture", time.Now())
			cap, err = s.capture(ctx, max)
			return err
		},
		func() (err error) {
			if cps != nil {
				return nil
			}
			defer gitexec.TraceStep("list of checkpoints", time.Now())
			cps, err = s.List(ctx)
			return err
		},
	)
	if cap != nil {
		// once the ref of its tree is there (or will not be)
		defer s.releaseImport(ctx, cap)
	}
	if err != nil {
		return nil, err
	}
	for _, sk := range cap.skipped {
		s.warn("skipped %s: %s", sk.Path, sk.Why)
	}
	if opt.captured != nil {
		opt.captured(cap)
	}
	now := s.now()
	res := &Created{Files: cap.files, capture: cap}
	var against string // the tree to count the changes against
	if len(cps) > 0 {
		newest := cps[len(cps)-1]
		if newest.Tree == cap.tree && sameMeta(newest.meta, cap.meta) {
			if newest.Reason == opt.Reason && newest.Source == opt.Source && now.Sub(newest.Time) < time.Second && now.Sub(newest.Time) >= 0 {
				res.Checkpoint, res.Duplicate = newest, true
				return res, nil
			}
			res.Unchanged = newest
			if opt.OnlyIfChanged {
				res.Checkpoint, res.NotTaken = newest, true
				return res, nil
			}
		} else {
			against = newest.Tree
		}
	} else {
		res.Changed = cap.files
	}

	// The commit and the count of changes (when asked) are independent: side
	// by side.
	c := &Checkpoint{Reason: opt.Reason, Source: opt.Source, Time: now, Tree: cap.tree, Skipped: cap.skipped,
		Branch: cap.held.branch, Head: cap.held.head, meta: cap.meta}
	err = parallel(
		func() (err error) {
			c.ID, err = s.writeCommit(c.Tree, message(c), now)
			return err
		},
		func() error {
			if against == "" || !opt.CountChanges {
				return nil
			}
			changed, err := s.changedPaths(ctx, against, cap.tree)
			res.Changed = len(changed)
			return err
		})
	if err != nil {
		return nil, err
	}
	c.Seq = 1
	if len(cps) > 0 {
		c.Seq = cps[len(cps)-1].Seq + 1
	}
	cps = append(cps, c)
	res.Checkpoint = c
	keep := opt.Keep
	if keep <= 0 {
		keep = 50
	}
	// The ref and the eviction it brings are one transaction (one git
	// process). Create-only: it fails rather than move a ref that already
	// exists.
	gone := evictable(cps, keep)
	if err := s.updateRefs(ctx, c, gone, cap.imported.commit); err != nil {
		if len(gone) == 0 {
			return nil, err
		}
		// The eviction may be what failed: the checkpoint alone, and the
		// eviction for the next one to retry, not a failure of this one.
		if err := s.updateRefs(ctx, c, nil, cap.imported.commit); err != nil {
			return nil, err
		}
		s.warn("could not evict old checkpoints (the next checkpoint retries): %v", err)
		gone = nil
	}
	res.Evicted = gone
	kept := without(cps, gone)
	s.rememberCommit(c, message(c), kept)
	defer gitexec.TraceStep("manifest", time.Now())
	if err := s.writeManifest(kept); err != nil {
		s.warn("could not write the store's checkpoint-manifest.md (the next checkpoint retries): %v", err)
	}
	return res, nil
}

// updateRefs creates the ref of c (when not nil) and deletes those of gone,
// all or none; importRef moves to imported, when not "" (see keepImport).
func (s *Store) updateRefs(ctx context.Context, c *Checkpoint, gone []*Checkpoint, imported string) error {
	var b strings.Builder
	if c != nil {
		fmt.Fprintf(&b, "create %s %s\n", refName(c.Seq), c.ID)
	}
	if imported != "" {
		fmt.Fprintf(&b, "update %s %s\n", importRef, imported)
	}
	for _, g := range gone {
		fmt.Fprintf(&b, "delete %s %s\n", refName(g.Seq), g.ID)
	}
	if b.Len() == 0 {
		return nil
	}
	_, err := s.git().RunInput(ctx, strings.NewReader(b.String()), "update-ref", "--no-deref", "--stdin")
	return err
}

func refName(seq int) string { return fmt.Sprintf("%s%010d", refPrefix, seq) }

// projectHead reads the project's branch and HEAD, when the work tree is in a
// git repository with commits.
func (s *Store) projectHead(ctx context.Context) (branch, head string) {
	// One process: the commit, then the ref HEAD names ("HEAD" itself when
	// detached). A HEAD without commits makes it fail.
	if noRepository(s.WorkTree) {
		return "", ""
	}
	var lines []string
	if out, ok := plainRevParse(s.WorkTree); ok {
		if lines = strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 6 {
			return "", "" // no commit yet
		}
		lines = lines[4:]
	} else {
		out, err := gitexec.Project{Dir: s.WorkTree}.Run(ctx, "rev-parse", "HEAD", "--symbolic-full-name", "HEAD")
		if err != nil {
			return "", ""
		}
		lines = strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	if len(lines) != 2 || !isHex(lines[0]) {
		return "", ""
	}
	branch, _ = strings.CutPrefix(lines[1], "refs/heads/")
	if branch == lines[1] {
		branch = "" // detached
	}
	return branch, lines[0]
}

// SourceHook is the source of the checkpoints an agent's hook takes after
// each tool call (rewind hook post-tool-use).
const SourceHook = "hook"

// Budget names the eviction budget a checkpoint counts against. Hook
// checkpoints come after every tool call and restores' safety checkpoints
// with every restore: counted with the pipelines' boundary checkpoints, a
// busy session of either would push every boundary out. So each kind keeps
// its own newest N.
func (c *Checkpoint) Budget() string {
	switch {
	case c.Source == SourceHook:
		return "hook"
	case c.Source == "checkpoint" && strings.HasPrefix(c.Reason, "pre-restore-safety"):
		return "safety"
	}
	return "boundary"
}

// evict deletes the refs of all but the newest keep of rewind's own
// checkpoints of each budget (hook, safety, boundary: see Budget; their
// objects are freed by the next prune) and rewrites the manifest. Checkpoints
// crucible's procedure made are the procedure's: they are never evicted, nor
// counted.
func (s *Store) evict(ctx context.Context, cps []*Checkpoint, keep int) ([]*Checkpoint, error) {
	gone := evictable(cps, keep)
	if err := s.updateRefs(ctx, nil, gone, ""); err != nil {
		return nil, err
	}
	return gone, s.writeManifest(without(cps, gone))
}

// evictable is what evict removes of cps (oldest first): all but the newest
// keep of each budget, never the procedure's.
func evictable(cps []*Checkpoint, keep int) []*Checkpoint {
	kept := map[string]int{}
	var gone []*Checkpoint
	for i := len(cps) - 1; i >= 0; i-- {
		c := cps[i]
		if c.Procedure {
			continue
		}
		if kept[c.Budget()]++; kept[c.Budget()] > keep {
			gone = append(gone, c)
		}
	}
	slices.Reverse(gone)
	return gone
}

// without is cps less gone.
func without(cps, gone []*Checkpoint) []*Checkpoint {
	if len(gone) == 0 {
		return cps
	}
	var left []*Checkpoint
	for _, c := range cps {
		if !slices.Contains(gone, c) {
			left = append(left, c)
		}
	}
	return left
}

// writeManifest rewrites checkpoint-manifest.md from the checkpoints:
// crucible's rows, oldest first, the procedure's with their timestamps as the
// procedure writes them. It is a cache; the refs and the store's HEAD are the
// truth.
//
// Rows of rewind's checkpoints alone are written whole but without an fsync
// (milliseconds of waiting on every checkpoint): every checkpoint writes them
// again from the refs, which git itself writes without one (core.fsync's
// default). The procedure's rows tell which of its commits it evicted, which
// nothing else records: a manifest holding them is made durable.
func (s *Store) writeManifest(cps []*Checkpoint) error {
	var b strings.Builder
	durable := false
	for _, c := range cps {
		stamp := c.Time.Format(time.RFC3339)
		if c.Procedure {
			stamp = c.Time.In(time.Local).Format(procedureStamp)
			durable = true
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", c.Short(), stamp, c.Reason, c.Source)
	}
	if !durable {
		return writeCache(s.manifestFile(), []byte(b.String()))
	}
	return writeAtomic(s.manifestFile(), []byte(b.String()), 0o600)
}

// emptyTree is git's id of the empty tree, the "before" of a first checkpoint.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// changedPaths lists the changes between two trees ("" for the empty tree).
func (s *Store) changedPaths(ctx context.Context, from, to string, prefixes ...string) ([]Change, error) {
	if from == "" {
		from = emptyTree
	}
	args := []string{"diff-tree", "-r", "-z", "--no-renames", "--no-ext-diff", "--no-textconv", "--name-status", from, to, "--"}
	for _, p := range prefixes {
		args = append(args, ":(literal)"+p)
	}
	out, err := s.treeGit().Run(ctx, args...)
	if err != nil {
		return nil, err
	}
	f := splitNul(out)
	var changes []Change
	for i := 0; i+1 < len(f); i += 2 {
		changes = append(changes, Change{Status: f[i][:1], Path: f[i+1]})
	}
	return changes, nil
}

// Change is one path that differs between two states: A added, M modified,
// T type changed, D deleted.
type Change struct {
	Status string
	Path   string
}

// Prune evicts all but the newest keep checkpoints and packs the store,
// returning the size of the store's repository before and after. Where there
// is no store it does nothing (it never creates one). (On a tiny
// store, packing can cost more than the evicted objects freed.)
func (s *Store) Prune(ctx context.Context, keep int) (evicted []*Checkpoint, before, after int64, err error) {
	if !s.Exists() {
		return nil, 0, 0, nil // nothing to prune: a prune never makes a store
	}
	unlock, err := s.begin(ctx, true, true)
	if err != nil {
		return nil, 0, 0, err
	}
	defer unlock()
	before = diskUsage(s.gitDir())
	cps, err := s.List(ctx)
	if err != nil {
		return nil, 0, 0, err
	}
	if evicted, err = s.evict(ctx, cps, keep); err != nil {
		return nil, 0, 0, err
	}
	if err := s.pinOrphans(ctx, cps); err != nil {
		return evicted, before, 0, err
	}
	// The objects only an index names are kept too: rewind's (through a ref to
	// its tree, which also keeps them from the procedure's git gc) and the
	// procedure's (git's default index, which repack and prune read when
	// GIT_INDEX_FILE names it).
	out, err := s.git().Run(ctx, "write-tree")
	if err != nil {
		return evicted, before, 0, err
	}
	if _, err := s.git().Run(ctx, "update-ref", "--no-deref", indexTreeRef, strings.TrimSpace(string(out))); err != nil {
		return evicted, before, 0, err
	}
	if err := s.compactIndex(ctx); err != nil {
		return evicted, before, 0, err
	}
	s.releaseImports() // a pack with a .keep would be left as it is
	g := s.git()
	g.IndexFile = s.procedureIndex()
	// repack and prune rather than gc: both run as rewind's direct children, so
	// they die with it (gc's own children would not), and no gc.pid lock can
	// outlive a killed prune.
	// On a terminal, git's own counts are shown (git draws them only for a
	// terminal, which RunProgress gives it); else the phase alone.
	steps := []struct {
		name           string
		quiet, counted []string
	}{
		{"repacking objects", []string{"repack", "-a", "-d", "-q"}, []string{"repack", "-a", "-d"}},
		{"deleting unreachable objects", []string{"prune", "--expire=now"}, []string{"prune", "--expire=now", "--progress"}},
	}
	for _, step := range steps {
		s.progress(step.name, 0, 0)
		var err error
		if s.Progress != nil {
			_, err = g.RunProgress(ctx, s.gitProgress(step.name), step.counted...)
		} else {
			_, err = g.Run(ctx, step.quiet...)
		}
		if err != nil {
			return evicted, before, 0, err
		}
	}
	// A commit-graph (the procedure's git gc writes one) would still name the
	// commits just deleted, which git fsck reports as errors: it is a cache,
	// and git gc writes it again.
	info := filepath.Join(s.gitDir(), "objects", "info")
	for _, p := range []string{filepath.Join(info, "commit-graph"), filepath.Join(info, "commit-graphs")} {
		if err := os.RemoveAll(p); err != nil {
			return evicted, before, 0, err
		}
	}
	return evicted, before, diskUsage(s.gitDir()), nil
}

// pinPrefix holds a ref for each commit that only a row of
// checkpoint-manifest.md names (the procedure's, on no branch), so that a
// prune keeps every checkpoint rewind lists.
const pinPrefix = "refs/rewind/pinned/"

// pinOrphans makes pinPrefix hold exactly the orphans among cps.
func (s *Store) pinOrphans(ctx context.Context, cps []*Checkpoint) error {
	want := map[string]bool{}
	for _, c := range cps {
		if c.orphan {
			want[c.ID] = true
		}
	}
	out, err := s.git().Run(ctx, "for-each-ref", "--format=%(refname)", pinPrefix)
	if err != nil {
		return err
	}
	var b strings.Builder
	for _, ref := range strings.Fields(string(out)) {
		if id := strings.TrimPrefix(ref, pinPrefix); want[id] {
			delete(want, id)
		} else {
			fmt.Fprintf(&b, "delete %s\n", ref)
		}
	}
	for id := range want {
		fmt.Fprintf(&b, "update %s%s %s\n", pinPrefix, id, id)
	}
	if b.Len() == 0 {
		return nil
	}
	_, err = s.git().RunInput(ctx, strings.NewReader(b.String()), "update-ref", "--stdin")
	return err
}

// indexTreeRef names the tree of rewind's index as the last prune found it,
// so that no prune (rewind's or the procedure's git gc) deletes the objects
// the index names.
const indexTreeRef = "refs/rewind/index-tree"

// Size is the store's size on disk in bytes (see diskUsage).
func (s *Store) Size() int64 { return diskUsage(s.Dir) }
