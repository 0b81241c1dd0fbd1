package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
	"golang.org/x/sys/unix"
)

// RestoreOptions steer a restore.
type RestoreOptions struct {
	Files       []string // restore only these paths (files or directories), relative to the work tree
	DryRun      bool
	MaxFileSize int64 // for the safety checkpoint; <= 0: DefaultMaxFileSize
}

// Restored says what a restore did, or would do.
type Restored struct {
	Target  *Checkpoint
	Safety  *Checkpoint // nil for a dry run
	Write   []string    // paths written (added, changed, type changed)
	Remove  []string    // paths removed
	HeadNow string      // the project's HEAD now, when it differs from the checkpoint's
	// ProjectBranch is the project's branch as the restore found it ("" when
	// HEAD is detached), and ProjectHasHead whether the work tree was in a
	// git repository with a HEAD then.
	ProjectBranch  string
	ProjectHasHead bool
	Kept           []Skipped // paths left as they are, and why (the rule, or what no checkpoint holds)
	// Failed are the kept paths the restore was asked to write and could not
	// (a directory it cannot look into, a file named by --file that is
	// ignored now and holds what no checkpoint does): the restore is not
	// complete.
	Failed []Skipped
	Mkdir  []string // directories the checkpoint had without files, made
	Rmdir  []string // empty directories the checkpoint did not have, removed
	Chmod  []string // files and directories (ending in "/") whose bits change, beyond those written
}

// Restore brings the work tree back to the checkpoint ref names, exactly: after
// a safety checkpoint, files the checkpoint lacks are removed and the others
// written. Files neither state holds (ignored, excluded, oversize) are never
// touched, nor is any .git.
func (s *Store) Restore(ctx context.Context, ref string, opt RestoreOptions) (*Restored, error) {
	files, err := s.relPaths(opt.Files)
	if err != nil {
		return nil, err
	}
	existed := s.Exists()
	unlock, err := s.begin(ctx, false, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.restore(ctx, ref, opt, files, existed, false)
}

// restore is Restore under the lock. A store that fails it before anything
// was changed (its list, or its safety checkpoint) is checked, as Create
// does, and, repaired or started anew (healed), the restore runs once more.
func (s *Store) restore(ctx context.Context, ref string, opt RestoreOptions, files []string, existed, healed bool) (*Restored, error) {
	heal := func(err error) (retry bool, _ error) {
		if healed {
			return false, nil
		}
		return s.healAfter(ctx, err, existed)
	}
	cps, err := s.List(ctx)
	if retry, herr := heal(err); herr != nil {
		return nil, herr
	} else if retry {
		return s.restore(ctx, ref, opt, files, existed, true)
	}
	if err != nil {
		return nil, err
	}
	target, err := Resolve(cps, ref)
	if err != nil {
		return nil, err
	}
	// A half-done restore leaves the tree in no checkpoint's state: only a
	// whole restore (which makes it some checkpoint's exactly) or the same
	// restore again (which finishes it) may follow it. Another --file restore
	// would hide it.
	if m, err := s.interruptedRestore(); err != nil {
		return nil, err
	} else if m != nil && len(files) > 0 && !opt.DryRun && (m.target != target.Short() || !slices.Equal(m.files, files)) {
		return nil, m.err()
	}
	res := &Restored{Target: target}
	max := opt.MaxFileSize
	if max <= 0 {
		max = DefaultMaxFileSize
	}

	// A --file restore lists the tree below its paths (a typo must fail
	// before the safety checkpoint); a whole one learns the target from its
	// diff with the state now.
	var listed map[string]string
	if len(files) > 0 {
		if listed, err = s.treeEntries(ctx, target.Tree, files); err != nil {
			return nil, err
		}
		if err := s.checkHeld(target, listed, files); err != nil {
			return nil, err
		}
	}
	// The writes come from a scratch index holding only them (checkout-index
	// writes from an index; a whole tree's would cost a full index write).
	staged := s.git()
	staged.IndexFile = s.restoreIndex()
	os.Remove(staged.IndexFile) // a leftover of a restore killed here; the store lock is held
	defer os.Remove(staged.IndexFile)
	// prepare works out the plan from the state now and the target's view;
	// for a restore that writes, it then reads every object to write and
	// fills the scratch index. None of it touches the work tree: it runs
	// beside the safety checkpoint's commit, ref and manifest, before the
	// first change.
	var plan *restorePlan
	var writes *restoreWrites
	prepare := func(cur *capture, view *targetView) (err error) {
		planned := time.Now()
		if plan, err = s.plan(ctx, target, cur, view, files); err != nil {
			return err
		}
		gitexec.TraceStep("restore plan", planned)
		if opt.DryRun {
			return nil
		}
		defer gitexec.TraceStep("objects to write read, and staged", time.Now())
		writes, err = s.prepareWrites(ctx, staged, target, view, plan.write)
		return err
	}
	// The state now, as the rule holds it: the safety checkpoint (a dry run
	// only looks). Its diff with the target, and prepare, start once its
	// capture is done, beside its commit.
	var cur *capture
	var view *targetView
	var viewErr, prepareErr error
	if opt.DryRun {
		cur, err = s.capture(ctx, max)
		if retry, herr := heal(err); herr != nil {
			return nil, herr
		} else if retry {
			return s.restore(ctx, ref, opt, files, existed, true)
		}
		if err != nil {
			return nil, err
		}
		s.keepImport(ctx, cur)
		if view, viewErr = s.viewTarget(ctx, target, cur, files, listed); viewErr == nil {
			prepareErr = prepare(cur, view)
		}
	} else {
		reason := "pre-restore-safety"
		if len(files) > 0 {
			reason = "pre-restore-safety-file"
		}
		var viewed chan struct{} // (create calls viewing in this goroutine)
		viewing := func(cap *capture) {
			viewed = make(chan struct{})
			go func() {
				defer close(viewed)
				if view, viewErr = s.viewTarget(ctx, target, cap, files, listed); viewErr == nil {
					prepareErr = prepare(cap, view)
				}
			}()
		}
		made, err := s.create(ctx, CreateOptions{Reason: reason, Source: "checkpoint", MaxFileSize: max, Keep: len(cps) + 1, captured: viewing}, slices.Clip(cps))
		if viewed != nil {
			<-viewed // on an error too: nothing outlives the restore
		}
		if retry, herr := heal(err); herr != nil {
			return nil, herr
		} else if retry {
			return s.restore(ctx, ref, opt, files, existed, true)
		}
		if err != nil {
			return nil, fmt.Errorf("safety checkpoint: %w", err)
		}
		res.Safety, cur = made.Checkpoint, made.capture
		// Finishing an interrupted restore: its safety checkpoint, not this
		// one (a half-restored tree), is what undoes it.
		if m, _ := s.interruptedRestore(); m != nil && m.target == target.Short() {
			if first, err := Resolve(cps, m.safety); err == nil {
				res.Safety = first
			}
		}
	}
	// (the capture read the project's HEAD)
	res.ProjectBranch, res.ProjectHasHead = cur.held.branch, cur.held.head != ""
	if head := cur.held.head; head != "" && target.Head != "" && head != target.Head {
		res.HeadNow = head
	}
	if viewErr != nil {
		return nil, viewErr
	}
	if prepareErr != nil {
		return nil, prepareErr
	}
	res.Write, res.Remove, res.Kept, res.Failed = plan.write, plan.remove, plan.kept, plan.failed
	res.Mkdir, res.Rmdir = plan.mkdir, plan.rmdir
	for _, c := range plan.chmod {
		name := c.path
		if c.isDir {
			name += "/"
		}
		res.Chmod = append(res.Chmod, name)
	}
	for _, k := range res.Kept {
		s.warn("kept %s as it is: %s", k.Path, k.Why)
	}
	if opt.DryRun {
		return res, nil
	}
	written := time.Now()
	defer gitexec.TraceStep("restore writes", written)
	interrupted, err := s.interruptedRestore()
	if err != nil {
		return nil, err
	}
	if err := s.markRestore(target, res.Safety, files); err != nil {
		// Nothing was changed: no restore is under way (but an
		// interrupted one, whose marker stays).
		if interrupted == nil {
			os.Remove(s.restoreMarker())
		}
		return nil, err
	}
	if err := s.apply(ctx, staged, view, plan, writes, target, cur, files); err != nil {
		return nil, &RestoreFailedError{Err: err, Restore: InterruptedError{Target: target.Short(), Safety: res.Safety.Short(), Reason: target.Reason, Files: files}}
	}
	if err := os.Remove(s.restoreMarker()); err != nil {
		return nil, err
	}
	// The safety checkpoint wrote the manifest with itself last: List's order
	// unless a procedure's row (by its time) comes after it.
	if slices.ContainsFunc(cps, func(c *Checkpoint) bool { return c.Procedure }) {
		cps, _ = s.List(ctx)
		return res, s.writeManifest(cps)
	}
	return res, nil
}

// restorePlan is what a restore writes, removes and leaves alone.
type restorePlan struct {
	write, remove []string
	kept          []Skipped
	failed        []Skipped // kept paths it was asked to write and cannot
	mkdir         []string  // the checkpoint's directories without files, missing now
	newDirs       []string  // the checkpoint's directories that are none now, which its writes make
	rmdir         []string  // empty directories now that the checkpoint did not have
	chmod         []permChange
	// heldDirs are the checkpoint's directories whose bits the restore sets:
	// those that hold what the rule holds both before the restore and after
	// it (so that its undo, which sees only the second, sets them back), and
	// those it makes.
	heldDirs []string
	recorded map[string]bool // the directories held now, whose bits the safety checkpoint recorded
}

// plan decides, by the rule, what a restore to target does from the state cur.
func (s *Store) plan(ctx context.Context, target *Checkpoint, cur *capture, v *targetView, files []string) (*restorePlan, error) {
	// A file the checkpoint skipped (over the size limit, unreadable, in a
	// directory it could not read) was there when it was taken: the
	// checkpoint knows nothing of its content and never deletes it.
	wasSkipped := skippedBy(target.Skipped)
	p := &restorePlan{}
	var added, removals []string
	for _, c := range v.changes {
		switch {
		case c.Status == "D" && wasSkipped(c.Path):
		case c.Status == "D":
			removals = append(removals, c.Path)
		case c.Status == "A":
			added = append(added, c.Path)
		default:
			p.write = append(p.write, c.Path)
		}
	}
	// Never write a path ignored now...
	ignored, err := s.ignoredNow(ctx, cur.held, added, false)
	if err != nil {
		return nil, err
	}
	asked := map[string]bool{}
	for _, f := range files {
		asked[f] = true
	}
	for _, a := range added {
		_, err := os.Lstat(filepath.Join(s.WorkTree, a))
		switch {
		case !ignored[a]:
			p.write = append(p.write, a)
		case asked[a] && os.IsNotExist(err):
			// Named by --file, and nothing there: the user asks for it back.
			p.write = append(p.write, a)
		case asked[a]:
			k := Skipped{Path: a, Why: "it is ignored now, and what is there is in no checkpoint"}
			p.kept, p.failed = append(p.kept, k), append(p.failed, k)
		default:
			p.kept = append(p.kept, Skipped{Path: a, Why: "the checkpoint holds it, but it is ignored now"})
		}
	}
	// ...nor touch one the checkpoint's own rules ignore, now that it is
	// untracked (its .gitignore files may be stricter than today's): neither
	// delete it, nor write one that the restored rules would ignore right
	// after (it would be in no checkpoint then, and its undo could not touch
	// it). A file the project tracks is held whatever the rules say.
	ruleFiles, err := s.ignoreEntries(ctx, target, v, files)
	if err != nil {
		return nil, err
	}
	rules, err := s.rulesOf(ctx, target, cur.held, ruleFiles)
	if err != nil {
		return nil, err
	}
	if err := s.excludesAsRestored(ctx, target, cur, files, rules); err != nil {
		return nil, err
	}
	ignoredThen := func(q string) bool { return !cur.held.tracked[q] && rules.ignores(q, false) }
	// (The sources outside the work tree, which the restore leaves as they
	// are, count with the checkpoint's: a .gitignore of now may be what
	// takes a path back from info/exclude.)
	why := func(q, own, outer string) string {
		switch root := rules.repoOf(q); {
		case rules.ownIgnores(q, false):
			return own
		case root != "":
			return outer + ", with the info/exclude and core.excludesFile of the repository " + root
		}
		return outer + ", with the project's ignore files outside the work tree"
	}
	for _, r := range removals {
		if ignoredThen(r) {
			p.kept = append(p.kept, Skipped{Path: r, Why: why(r, "the checkpoint's own ignore rules ignore it",
				"the checkpoint's ignore rules ignore it")})
		} else {
			p.remove = append(p.remove, r)
		}
	}
	writes := p.write[:0]
	for _, w := range p.write {
		if ignoredThen(w) && !asked[w] {
			p.kept = append(p.kept, Skipped{Path: w, Why: why(w, "the checkpoint holds it, but its own ignore rules ignore it now that it is untracked",
				"the checkpoint holds it, but its ignore rules ignore it now")})
		} else {
			writes = append(writes, w)
		}
	}
	p.write = writes
	sort.Strings(p.write)
	var blocked, failed []Skipped
	// An empty directory in the way may go when the safety checkpoint
	// records it (all of them, when it records none), so that the undo
	// makes it again; and, inside the one a file replaces, when the
	// checkpoint's rules do not ignore it (the restore keeps those, as it
	// keeps a file they ignore).
	freeDir := func(d string, inside bool) bool {
		if inside && rules.ignores(d, true) {
			return false
		}
		if cur.meta == nil {
			return true
		}
		_, ok := slices.BinarySearch(cur.meta.dirs, d)
		return ok
	}
	p.write, blocked, failed = s.inTheWay(p.write, p.remove, cur.inTree, freeDir)
	for _, b := range blocked {
		if asked[b.Path] {
			failed = append(failed, b) // named by --file, and not written
		} else {
			p.kept = append(p.kept, b)
		}
	}
	p.kept = append(p.kept, failed...)
	p.failed = append(p.failed, failed...)
	if target.meta != nil {
		var missing []string
		for _, d := range target.meta.dirs {
			if !underAny(d, files) {
				continue
			}
			// Missing (below a file or a symlink, too: looked at through
			// the parents opened without following one), or a file the
			// restore removes.
			st, err := lstatBeneath(s.WorkTree, d)
			if err != nil || (!dirStatted(st) && slices.Contains(p.remove, d)) {
				missing = append(missing, d)
			}
		}
		ignored, err := s.ignoredNow(ctx, cur.held, missing, true)
		if err != nil {
			return nil, err
		}
		for _, d := range missing {
			// Nor one that the rules after the restore ignore: git judged
			// it by what is there, a symlink, a file or nothing, which a
			// pattern for directories (c/) does not match, and
			// info/exclude or core.excludesFile, which the restore leaves
			// as they are, may hold one. (As for the empty directories
			// its undo would take away, the patterns alone decide.)
			if !ignored[d] && !rules.ignores(d, true) {
				p.mkdir = append(p.mkdir, d)
			}
		}
	}
	// The checkpoint's directories that are none now: the parents of the
	// files it writes, or its recorded ones.
	made := map[string]bool{}
	for _, w := range p.write {
		for d := path.Dir(w); d != "." && !made[d]; d = path.Dir(d) {
			made[d] = true
		}
	}
	for d := range v.metaDirs {
		made[d] = true
	}
	for d := range made {
		if v.curDirs[d] && !v.deletedDirs[d] {
			delete(made, d) // a directory now, holding what the rule holds
		}
	}
	dirList := sortedKeys(made)
	missing := make([]bool, len(dirList))
	forEach(len(dirList), func(i int) {
		// Through its parents opened without following a symlink: a
		// directory of the name at a symlinked parent's target is not
		// this one, which the writes make (and then give its bits).
		st, err := lstatBeneath(s.WorkTree, dirList[i])
		missing[i] = err != nil || !dirStatted(st)
	})
	for i, d := range dirList {
		if missing[i] {
			p.newDirs = append(p.newDirs, d) // the writes make it
		}
	}
	// An empty directory now that the checkpoint did not have (nor ignored)
	// goes, so that a restore and its undo are exact.
	// Only one that holds nothing else (ignored files stay, so does it).
	if target.meta != nil && cur.meta != nil {
		var cand []string
		for _, d := range cur.meta.dirs {
			if !v.hasDir(d) && underAny(d, files) && !rules.ignores(d, true) {
				cand = append(cand, d)
			}
		}
		empty := map[string]bool{}
		for i := len(cand) - 1; i >= 0; i-- { // deepest first: cur.meta.dirs is sorted
			des, err := os.ReadDir(filepath.Join(s.WorkTree, cand[i]))
			ok := err == nil
			for _, de := range des {
				if !de.IsDir() || !empty[cand[i]+"/"+de.Name()] {
					ok = false
				}
			}
			empty[cand[i]] = ok
		}
		for _, d := range cand {
			if empty[d] {
				p.rmdir = append(p.rmdir, d)
			}
		}
	}
	p.heldDirs, p.recorded = s.heldDirs(target, cur, v, p, rules, files)
	p.chmod = s.permChanges(v, p, target, cur, true)
	sort.Slice(p.kept, func(i, j int) bool { return p.kept[i].Path < p.kept[j].Path })
	return p, nil
}

// heldDirs lists the checkpoint's directories whose bits a restore sets (see
// restorePlan.heldDirs), and those of them whose bits the safety checkpoint
// recorded. Held before: above a file held now, an empty directory held now,
// or one the restore makes. Not held after: when the restore brings back
// ignore rules that differ, a directory they ignore that holds no tracked
// file, unless the checkpoint recorded it as held.
func (s *Store) heldDirs(target *Checkpoint, cur *capture, v *targetView, p *restorePlan, rules *targetRules, files []string) (dirs []string, recorded map[string]bool) {
	if target.meta == nil {
		return nil, nil
	}
	before := maps.Clone(v.curDirs)
	if cur.meta != nil {
		for _, d := range cur.meta.dirs {
			for ; d != "." && !before[d]; d = path.Dir(d) {
				before[d] = true
			}
		}
	}
	recorded = maps.Clone(before)
	for _, d := range p.mkdir {
		before[d] = true
	}
	for _, d := range p.newDirs {
		before[d] = true
	}
	ignoredAfter := func(string) bool { return false }
	if v.rulesChange(target) {
		tracked := map[string]bool{}
		for f := range cur.held.tracked {
			if i := strings.LastIndexByte(f, '/'); i > 0 {
				tracked[f[:i]] = true
			}
		}
		tracked = withParents(tracked)
		ignoredAfter = func(d string) bool { return rules.ignores(d, true) && !tracked[d] && !v.metaDirs[d] }
	}
	// The directories its writes make are the restore's, a --file one's too
	// (the parents of its paths): they get their bits, not the umask's.
	makes := map[string]bool{}
	for _, d := range p.newDirs {
		makes[d] = true
	}
	for d := range before {
		if v.hasDir(d) && (underAny(d, files) || makes[d]) && !ignoredAfter(d) {
			dirs = append(dirs, d)
		}
	}
	sort.Strings(dirs)
	return dirs, recorded
}

// underAny reports whether p lies in one of the restore's --file paths (any
// path when there are none).
func underAny(p string, files []string) bool {
	if len(files) == 0 {
		return true
	}
	for _, f := range files {
		if within(p, f) {
			return true
		}
	}
	return false
}

// entryID is the object id of an --index-info line "<mode> <id>\t<path>".
func entryID(entry string) string {
	meta, _, _ := strings.Cut(entry, "\t")
	_, id, _ := strings.Cut(meta, " ")
	return id
}

// treeEntries lists the files of a tree, below prefixes when any are given, as
// update-index --index-info lines ("<mode> <id>\t<path>") by path.
func (s *Store) treeEntries(ctx context.Context, tree string, prefixes []string) (map[string]string, error) {
	out, err := s.git().Run(ctx, lsTree(tree, prefixes)...)
	if err != nil {
		return nil, err
	}
	entries := map[string]string{}
	for _, rec := range splitNul(out) {
		// "<mode> SP <type> SP <id> TAB <path>"
		meta, p, ok := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 3 {
			return nil, fmt.Errorf("ls-tree %s: unexpected line %q", tree, rec)
		}
		entries[p] = f[0] + " " + f[2] + "\t" + p
	}
	return entries, nil
}

func lsTree(tree string, prefixes []string, opts ...string) []string {
	args := append([]string{"ls-tree", "-r", "-z", "--full-tree"}, opts...)
	args = append(args, tree)
	if len(prefixes) > 0 {
		args = append(args, "--")
		for _, p := range prefixes {
			args = append(args, ":(literal)"+p)
		}
	}
	return args
}

// inTheWay drops from write the paths whose writing would destroy something
// the current state (the safety checkpoint) does not hold: a file there that
// was skipped (over the size limit, unreadable), a directory still holding
// uncaptured files (ignored ones) once the removals are done, or an empty
// directory that is not free to go (freeDir), or an uncaptured file or
// symlink where the checkpoint has a directory. Writing the file would
// delete them; rewind keeps them and says so. It
// never follows a symlink: a parent that is one, and that the restore
// removes, frees everything below it.
func (s *Store) inTheWay(write, remove []string, inTree sortedPaths, freeDir func(d string, inside bool) bool) (kept []string, left, failed []Skipped) {
	removed := map[string]bool{}
	for _, p := range remove {
		removed[p] = true
	}
	// What is there now is free to replace when the restore removes it, or
	// when the safety checkpoint holds it (a file it rewrites); what is in a
	// directory the checkpoint has as a file must go by the removals.
	free := func(rel string) bool { return removed[rel] || inTree.has(rel) }
	isRemoved := func(rel string) bool { return removed[rel] }
	for _, p := range write {
		why, below, broken := "", false, false
		for i := 0; i < len(p) && why == "" && !below; i++ {
			if p[i] != '/' {
				continue
			}
			d := p[:i]
			fi, err := os.Lstat(filepath.Join(s.WorkTree, d))
			switch {
			case os.IsNotExist(err):
				below = true // nothing there: all below is free
			case err != nil:
				why, broken = "cannot look at "+d+": "+errText(err), true
			case fi.IsDir():
			case removed[d]:
				below = true // a file or symlink the restore removes first
			case inTree.has(d):
				why = fmt.Sprintf("the checkpoint has a directory at %s, where a file or symlink is now that this restore does not replace (restore %s with it)", d, d)
			default:
				why = fmt.Sprintf("the checkpoint has a directory at %s, but the file there is in no checkpoint", d)
			}
		}
		if why == "" && !below {
			why, broken = s.blocks(p, free, isRemoved, freeDir)
		}
		switch {
		case broken:
			failed = append(failed, Skipped{Path: p, Why: why})
		case why != "":
			left = append(left, Skipped{Path: p, Why: why})
		default:
			kept = append(kept, p)
		}
	}
	return kept, left, failed
}

// blocks says why what is at rel (its parents are directories) cannot be
// replaced, or "" when it can; broken when it cannot even be looked at.
func (s *Store) blocks(rel string, free, removed func(string) bool, freeDir func(string, bool) bool) (why string, broken bool) {
	full := filepath.Join(s.WorkTree, rel)
	fi, err := os.Lstat(full)
	switch {
	case os.IsNotExist(err), free(rel):
		return "", false
	case err != nil:
		return "cannot look at it: " + errText(err), true
	case !fi.IsDir():
		return "the checkpoint holds it, but the current version is in no checkpoint (over the size limit, unreadable or not a file)", false
	}
	filepath.WalkDir(full, func(p string, d os.DirEntry, err error) error {
		if why != "" {
			return filepath.SkipAll
		}
		if err != nil {
			why, broken = "cannot look into the directory there: "+errText(err), true
			return nil
		}
		r, _ := filepath.Rel(s.WorkTree, p)
		r = filepath.ToSlash(r)
		if d.IsDir() {
			if !freeDir(r, r != rel) && emptyDir(p) {
				why = fmt.Sprintf("the checkpoint has a file there, but the directory holds the empty directory %s, which the restore leaves as it is", r)
			}
			return nil
		}
		if !removed(r) {
			why = fmt.Sprintf("the checkpoint has a file there, but the directory holds %s, which the restore leaves as it is", r)
		}
		return nil
	})
	return why, broken
}

// emptyDir reports whether the directory dir holds nothing.
func emptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	return err == io.EOF
}

// checkHeld refuses --file paths that neither the checkpoint nor the work tree
// holds: most likely a typo. It runs before the safety checkpoint, so a typo
// leaves no checkpoint behind.
func (s *Store) checkHeld(target *Checkpoint, entries map[string]string, files []string) error {
	for _, f := range files {
		held := entries[f] != ""
		for p := range entries {
			if held {
				break
			}
			held = strings.HasPrefix(p, f+"/")
		}
		if _, err := os.Lstat(filepath.Join(s.WorkTree, f)); !held && err != nil {
			return fmt.Errorf("%s: neither checkpoint %s nor the current work tree holds it", f, target.Short())
		}
	}
	return nil
}

// apply carries out a plan. Removals go first, so a directory the checkpoint
// has as a file (or the reverse) can be written, then the empty directories
// it did not have; directories those emptied go too, unless the checkpoint
// has them. Then the writes, checked one
// by one (a write git could not make fails the restore, never silently), the
// checkpoint's empty directories, and the permission bits it recorded.
func (s *Store) apply(ctx context.Context, staged gitexec.Shadow, v *targetView, p *restorePlan, w *restoreWrites, target *Checkpoint, cur *capture, files []string) error {
	defer v.cur.closeTreeLookup() // (changedSince's)
	emptied := map[string]bool{}
	var changed []string // files changed since the safety checkpoint read them: left as they are
	for i, r := range p.remove {
		if i%256 == 0 || i == len(p.remove)-1 {
			s.progress("removing files", i+1, len(p.remove))
		}
		full, err := s.inside(r)
		if err != nil {
			return err
		}
		if fi, err := os.Lstat(full); err == nil && s.changedSince(v.cur, r, fi) {
			changed = append(changed, r)
			continue
		}
		beforeRemove(r)
		if err := removeBeneath(s.WorkTree, r); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", r, err)
		}
		for d := path.Dir(r); d != "." && !v.hasDir(d); d = path.Dir(d) {
			emptied[d] = true
		}
	}
	// Empty directories the checkpoint did not have, deepest first, before the
	// writes: one may stand where the checkpoint has a file. Their parents
	// may be emptied too (a directory a restore made holds only those and
	// files it removes, in its undo).
	for i := len(p.rmdir) - 1; i >= 0; i-- {
		if full, err := s.inside(p.rmdir[i]); err == nil {
			if fi, err := os.Lstat(full); err == nil && fi.IsDir() {
				rmdirBeneath(s.WorkTree, p.rmdir[i]) // only when empty
			}
		}
		for d := path.Dir(p.rmdir[i]); d != "." && !v.hasDir(d); d = path.Dir(d) {
			emptied[d] = true
		}
	}
	var byDepth []string
	for d := range emptied {
		byDepth = append(byDepth, d)
	}
	if len(files) > 0 && len(byDepth) > 0 {
		// A --file restore lists only its paths: ask the tree which of these
		// directories it has.
		out, err := s.git().Run(ctx, append([]string{"ls-tree", "-z", "--name-only", "--full-tree", target.Tree, "--"}, literal(byDepth)...)...)
		if err != nil {
			return err
		}
		for _, d := range splitNul(out) {
			delete(emptied, d)
		}
		byDepth = byDepth[:0]
		for d := range emptied {
			byDepth = append(byDepth, d)
		}
	}
	sort.Slice(byDepth, func(i, j int) bool { return strings.Count(byDepth[i], "/") > strings.Count(byDepth[j], "/") })
	for _, d := range byDepth {
		rmdirBeneath(s.WorkTree, d) // only when empty
	}
	// Without recorded bits (an older checkpoint), a file rewritten in place
	// keeps its bits beyond the executable one.
	oldPerms := map[string]os.FileMode{}
	if target.meta == nil {
		for _, w := range p.write {
			if fi, err := os.Lstat(filepath.Join(s.WorkTree, w)); err == nil && fi.Mode().IsRegular() {
				oldPerms[w] = fi.Mode().Perm()
			}
		}
	}
	if target.meta != nil {
		// git writes files with the umask's bits and the recorded ones are
		// set after: until then a 0600 secret must not be 0644. (The process
		// umask; nothing else creates files meanwhile.)
		old := unix.Umask(0o077)
		defer unix.Umask(old)
	}
	sort.Strings(changed)
	unwritten, below, made, err := s.write(ctx, staged, v, w, len(p.write), changed)
	if err != nil {
		return err
	}
	changed = append(changed, unwritten...)
	for _, d := range p.mkdir {
		// Never through a symlink: what is there now decides, after the
		// removals.
		beforeMkdir(d)
		if err := mkdirBeneath(s.WorkTree, d, 0o700); err != nil {
			s.warn("did not make the directory %s: %v", d, err)
		}
	}
	sort.Strings(changed)
	left := leftError(changed, below, made)
	if err := s.setPerms(v, p, target, cur, oldPerms, slices.Sorted(slices.Values(append(slices.Clip(changed), made...)))); err != nil {
		if left != nil {
			return fmt.Errorf("%w; %v", err, left)
		}
		return err
	}
	return left
}

// leftError is the error of a restore that left files as they are (see
// write), nil when it left none.
func leftError(changed, below, made []string) error {
	var why []string
	if len(made) > 0 {
		why = append(why, fmt.Sprintf("restore could not write %s: a file, a symlink or a directory with files in it was made there, or in its way, while the restore wrote, and is left as it is", strings.Join(made, ", ")))
	}
	if len(changed) > 0 {
		why = append(why, fmt.Sprintf("restore left %s as it is: changed after the safety checkpoint read it, its content in no checkpoint", strings.Join(changed, ", ")))
	}
	if len(below) > 0 {
		why = append(why, fmt.Sprintf("restore did not write %s, below a file it left", strings.Join(below, ", ")))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("%s (restore again: its safety checkpoint holds what is there now; or undo with the safety checkpoint)", strings.Join(why, "; "))
}

// restoreWrites are a restore's writes, worked out before the first change:
// the files written back into the file that is there (rewrite), with their
// content, and the paths checkout-index writes from the scratch index.
type restoreWrites struct {
	rewrite  []rewrite
	checkout []string
}

// rewrite is a file whose content a restore writes into the file that is
// there (see inPlace).
type rewrite struct {
	path string
	data []byte
	perm os.FileMode
}

// prepareWrites reads every object the restore writes (a missing one fails
// it before anything is changed), keeping the content of the files it
// writes in place, and stages the others in the scratch index g.
//
// A file is written in place when the one there is a regular file the
// project's alone, with the bits the checkpoint recorded (inPlace): most of
// a restore's writes are files changed since the checkpoint. That spares
// checkout-index its deletion and creation of each (a deletion costs more
// than the write on a file system that discards what it frees), the scratch
// index, and the next capture a second look at each directory whose entries
// were replaced. The content written is the blob's bytes, as checkout-index
// writes them: the store's attributes turn every conversion off.
func (s *Store) prepareWrites(ctx context.Context, g gitexec.Shadow, target *Checkpoint, v *targetView, write []string) (*restoreWrites, error) {
	w := &restoreWrites{}
	content := map[string][]byte{}
	var ids []string
	for _, p := range write {
		e := v.entries[p]
		id := entryID(e)
		ids = append(ids, id)
		if perm, ok := inPlacePerm(target, p, e); ok {
			if st, err := lstatBeneath(s.WorkTree, p); err == nil && inPlace(&st, perm) {
				w.rewrite = append(w.rewrite, rewrite{path: p, perm: perm})
				content[id] = nil
				continue
			}
		}
		w.checkout = append(w.checkout, p)
	}
	err := parallel(
		func() error { return s.readObjects(ctx, ids, content, heldBytesMax) },
		func() error { return stage(ctx, g, v.entries, w.checkout) },
	)
	if err != nil {
		return nil, err
	}
	// Content past heldBytesMax in all was not kept: those are checked out.
	var late []string
	kept := w.rewrite[:0]
	for _, r := range w.rewrite {
		if r.data = content[entryID(v.entries[r.path])]; r.data == nil {
			late = append(late, r.path)
		} else {
			kept = append(kept, r)
		}
	}
	w.rewrite = kept
	if err := stage(ctx, g, v.entries, late); err != nil {
		return nil, err
	}
	w.checkout = append(w.checkout, late...)
	return w, nil
}

// inPlacePerm is the bits a file of entry e must have for a restore to
// write it in place: those the checkpoint recorded for a regular file. A
// checkpoint without recorded bits (an older one) has its files checked out.
func inPlacePerm(target *Checkpoint, p, e string) (os.FileMode, bool) {
	if target.meta == nil || !strings.HasPrefix(e, "100") {
		return 0, false
	}
	return target.meta.filePerm(p, strings.HasPrefix(e, "100755 ")), true
}

// inPlace reports whether a restore may write into the file of st a content
// that must end with bits perm: a regular file with one link (another link
// may be outside the work tree, and checkout-index would leave it as it
// is), owned by rewind's user (a new file would be), with exactly those bits
// (a 0644 file must not hold a 0600 secret's content even for a moment).
func inPlace(st *unix.Stat_t, perm os.FileMode) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && st.Nlink == 1 && int(st.Uid) == os.Geteuid() &&
		os.FileMode(st.Mode&0o7777) == perm
}

// write makes the restore's writes: the files in place first, then through
// checkout-index those it writes from the scratch index and any file that
// was no longer fit to be written in place (changed since prepareWrites
// looked: it is staged now).
//
// A file changed since the safety checkpoint read it is not written
// (unwritten), nor one where something was made meanwhile (made), nor one
// below either or below a file the removals left (left, in order): its
// directory cannot be made there (below).
func (s *Store) write(ctx context.Context, staged gitexec.Shadow, v *targetView, w *restoreWrites, total int, left []string) (unwritten, below, made []string, err error) {
	done := new(atomic.Int64)
	var late []string
	partial := map[string]bool{} // written in place in part: the restore's own change
	var mu sync.Mutex
	forEach(len(w.rewrite), func(i int) {
		written, touched := s.rewriteInPlace(w.rewrite[i], v.cur)
		if written {
			s.progress("writing files", int(done.Add(1)), total)
			return
		}
		mu.Lock()
		late = append(late, w.rewrite[i].path)
		if touched {
			partial[w.rewrite[i].path] = true
		}
		mu.Unlock()
	})
	checkout := w.checkout
	if len(late) > 0 {
		sort.Strings(late)
		if err := stage(ctx, staged, v.entries, late); err != nil {
			return nil, nil, nil, err
		}
		checkout = append(slices.Clip(checkout), late...)
	}
	checkout, made, unwritten, unremoved, removeErr := s.unlinkWrites(checkout, v.cur, partial)
	stays := slices.Sorted(slices.Values(slices.Concat(left, made, unwritten, unremoved)))
	checkout = slices.DeleteFunc(checkout, func(p string) bool {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, found := slices.BinarySearch(stays, d); found {
				below = append(below, p)
				return true
			}
		}
		return false
	})
	madeSince, err := s.checkout(ctx, staged, v.entries, checkout, done, total)
	if err != nil {
		return nil, nil, nil, err
	}
	if removeErr != nil {
		return nil, nil, nil, removeErr
	}
	return unwritten, below, slices.Sorted(slices.Values(append(made, madeSince...))), nil
}

// beforeInPlace runs before a restore opens a file to write it in place.
// (A test changes the file or a parent there meanwhile.)
var beforeInPlace = func(string) {}

// beforeMkdir runs before a restore makes a directory the checkpoint had
// without files. (A test makes a parent a symlink there.)
var beforeMkdir = func(string) {}

// beforeRemove runs before a restore removes a file, after it checked its
// path and the file. (A test makes a parent a symlink there, or changes
// another file the restore removes next.)
var beforeRemove = func(string) {}

// inPlaceWrite writes a file's content over the one it has. (A test has it
// fail midway, as a full disk does.)
var inPlaceWrite = func(f *os.File, data []byte) error {
	_, err := f.WriteAt(data, 0)
	return err
}

// rewriteInPlace writes r's content into the file there, if that is still a
// file inPlace allows (looked at through the open descriptor: never through
// a symlink) and the one the safety checkpoint read (cur). It reports
// written false, having written nothing, when it is not; a write that
// fails midway reports written false and touched true, and checkout-index
// writes the file anew.
func (s *Store) rewriteInPlace(r rewrite, cur *capture) (written, touched bool) {
	beforeInPlace(r.path)
	// Opened a name at a time, each without following a symlink: a parent
	// that is one (or was swapped for one since prepareWrites looked) fails
	// the open, never leads it outside the work tree.
	f, err := openBeneath(s.WorkTree, r.path, os.O_WRONLY|syscallNoFollow)
	if err != nil {
		return false, false
	}
	defer f.Close()
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil || !inPlace(&st, r.perm) {
		return false, false
	}
	if fi, err := f.Stat(); err != nil || s.changedSince(cur, r.path, fi) {
		return false, false // unlinkWrites leaves it
	}
	if err := inPlaceWrite(f, r.data); err != nil {
		return false, true
	}
	written = f.Truncate(int64(len(r.data))) == nil && f.Close() == nil
	return written, !written
}

// openBeneath opens the file rel (slash-separated, below root) with flag,
// opening each directory on the way by its name in the one above without
// following a symlink, and the file itself without following one either.
func openBeneath(root, rel string, flag int) (*os.File, error) {
	dir, name, err := openParentBeneath(root, rel)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Openat(dir, name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	unix.Close(dir)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, filepath.FromSlash(rel))), nil
}

// hashBeneath gives the blob id of the file rel (below root, reached as
// openBeneath reaches it): a regular file's content, read as a stream,
// when it is the file whose stat data is want (but its ctime) before and
// after the read, and still the one at its name after it (the caller may
// remove it by name): never a FIFO or a device opened, nor another file put
// in its place meanwhile. Or a symlink's target.
func hashBeneath(root, rel string, want statKey, sha256Format bool) ([]byte, error) {
	dir, name, err := openParentBeneath(root, rel)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dir)
	h := objectHash(sha256Format)
	if want.mode&unix.S_IFMT == unix.S_IFLNK {
		// A symlink is never changed in place, only replaced: what is read
		// is one symlink's target, which the caller then removes or
		// replaces by its name, as it judged it.
		buf := make([]byte, unix.PathMax+1)
		n, err := unix.Readlinkat(dir, name, buf)
		if err != nil {
			return nil, err
		}
		io.WriteString(h, objectHeader(packBlob, n))
		h.Write(buf[:n])
		return h.Sum(nil), nil
	}
	notIt := fmt.Errorf("%s: not the file looked at", rel)
	atName := func() error { // the file at the name is want's
		var st unix.Stat_t
		if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG || uint64(st.Dev) != want.dev || uint64(st.Ino) != want.ino {
			return notIt
		}
		return nil
	}
	if err := atName(); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	opened := func() error { // the file open is want
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		got := keyOf(fi)
		got.ctime, want.ctime = 0, 0
		if got != want {
			return notIt
		}
		return nil
	}
	if err := opened(); err != nil {
		return nil, err
	}
	beforeHashRead(rel)
	io.WriteString(h, objectHeader(packBlob, int(want.size)))
	if n, err := io.Copy(h, io.LimitReader(f, int64(want.size)+1)); err != nil {
		return nil, err
	} else if uint64(n) != want.size {
		return nil, fmt.Errorf("%s: changed while read", rel)
	}
	if err := opened(); err != nil {
		return nil, err
	}
	if err := atName(); err != nil {
		return nil, err
	}
	return h.Sum(nil), nil
}

// beforeHashRead runs when hashBeneath has opened a file and is about to
// read it. (A test changes the file, or the name, meanwhile.)
var beforeHashRead = func(string) {}

// openParentBeneath opens the directory that holds rel (slash-separated,
// below root) as openBeneath opens it, and returns it with rel's last name.
func openParentBeneath(root, rel string) (dir int, name string, err error) {
	names, err := namesBeneath(rel)
	if err != nil {
		return -1, "", err
	}
	dir, err = walkBeneath(root, rel, names[:len(names)-1], 0)
	return dir, names[len(names)-1], err
}

// namesBeneath splits rel (slash-separated) into its names, each a name
// below the one before it.
func namesBeneath(rel string) ([]string, error) {
	names := strings.Split(rel, "/")
	for _, n := range names {
		if n == "" || n == "." || n == ".." {
			return nil, fmt.Errorf("%s: not a path below the work tree", rel)
		}
	}
	return names, nil
}

// walkBeneath opens the directory names (the first names of rel) below
// root, as dirOpen says, a name at a time in the one above, never following
// a symlink (a symlink on the way fails it: symlinkOnWay); with perm, it
// makes each name missing first (mkdirBeneath).
func walkBeneath(root, rel string, names []string, perm uint32) (int, error) {
	dir, err := unix.Open(root, dirOpen|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for i, n := range names {
		if perm != 0 {
			if err := unix.Mkdirat(dir, n, perm); err != nil && err != unix.EEXIST {
				unix.Close(dir)
				return -1, err
			}
		}
		next, err := unix.Openat(dir, n, dirOpen|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			var st unix.Stat_t
			if unix.Fstatat(dir, n, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				if at := strings.Join(names[:i+1], "/"); at != rel {
					err = symlinkOnWay(fmt.Sprintf("%s: its parent %s is a symlink; not following it", rel, at))
				} else {
					err = symlinkOnWay(rel + " is a symlink; not following it")
				}
			}
		}
		unix.Close(dir)
		if err != nil {
			return -1, err
		}
		dir = next
	}
	return dir, nil
}

// removeBeneath removes the file, symlink or empty directory rel (below
// root) as os.Remove removes a path, in its parent opened as openBeneath
// opens it. The restore's removals check their path first (inside), but a
// parent made a symlink after that, by another writer of the work tree,
// would have os.Remove of the path follow it out of the work tree; here it
// fails the removal.
func removeBeneath(root, rel string) error {
	dir, name, err := openParentBeneath(root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	err = unix.Unlinkat(dir, name, 0)
	if err == nil {
		return nil
	}
	// As os.Remove: unlink of a directory fails differently on each
	// system, rmdir of a file fails with ENOTDIR everywhere.
	rmErr := unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
	if rmErr == nil {
		return nil
	}
	if rmErr != unix.ENOTDIR {
		err = rmErr
	}
	return err
}

// rmdirBeneath removes the directory rel below root when it is empty, as
// removeBeneath removes it; a failure leaves it.
func rmdirBeneath(root, rel string) error {
	dir, name, err := openParentBeneath(root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}

// unlinkWrites deletes the files and symlinks checkout-index is about to
// write anew, side by side: it deletes each before writing it, one after
// another, and on a file system that discards what it frees a deletion
// costs more than the write (100 files: 15 ms one after another, 8 ms side
// by side). Never through a symlinked parent (inside). A deletion that
// fails (but for a file gone meanwhile) leaves the path (unremoved) and is
// the error, once the rest is written.
//
// The plan writes a file over a directory only once its removals leave
// nothing but empty directories there (inTheWay), which go now (checkout-
// index writes no file over a directory): a directory holding anything
// else was made since, by someone else, and is taken out of the writes
// (made) and left as it is. So is a file or symlink at a path where the
// safety checkpoint (cur) found none: the plan leaves what no checkpoint
// holds out of its writes.
//
// A file changed since the safety checkpoint read it, but for one the
// restore wrote in part (partial), is left as it is too (changed).
func (s *Store) unlinkWrites(write []string, cur *capture, partial map[string]bool) (kept, made, changed, unremoved []string, err error) {
	const (
		unlinked   = iota // deleted, or nothing there: checkout-index writes it
		madeHere          // made since the safety checkpoint looked
		editedHere        // changed since the safety checkpoint read it
		failedHere        // its deletion failed
	)
	state := make([]uint8, len(write))
	var mu sync.Mutex
	fail := func(i int, e error) {
		state[i] = failedHere
		mu.Lock()
		if err == nil {
			err = fmt.Errorf("restore could not remove %s to write it: %s", write[i], errText(e))
		}
		mu.Unlock()
	}
	// More workers than CPUs: a deletion mostly waits on the device.
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(16, len(write)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(write); i = int(next.Add(1)) - 1 {
				full, err := s.inside(write[i])
				if err != nil {
					continue // (its directory cannot be made: made)
				}
				switch fi, err := os.Lstat(full); {
				case err != nil:
				case fi.IsDir():
					if gone, err := removeEmptyTree(s.WorkTree, write[i]); err != nil {
						fail(i, err)
					} else if !gone {
						state[i] = madeHere
					}
				case partial[write[i]]:
					s.unlinkWrite(i, write[i], fail)
				case !cur.inTree.has(write[i]):
					state[i] = madeHere
				case s.changedSince(cur, write[i], fi):
					state[i] = editedHere
				default:
					s.unlinkWrite(i, write[i], fail)
				}
			}
		})
	}
	wg.Wait()
	for i, w := range write {
		switch state[i] {
		case madeHere:
			made = append(made, w)
		case editedHere:
			changed = append(changed, w)
		case failedHere:
			unremoved = append(unremoved, w)
		default:
			kept = append(kept, w)
		}
	}
	return kept, made, changed, unremoved, err
}

// unlinkWrite deletes write i, rel, for unlinkWrites, telling fail of a
// failure.
func (s *Store) unlinkWrite(i int, rel string, fail func(int, error)) {
	if err := removeBeneath(s.WorkTree, rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		fail(i, err)
	}
}

// removeEmptyTree removes the directory rel (below root) when nothing but
// directories is at and below it, deepest first, each as rmdirBeneath
// removes it (symlinks not followed; anything it cannot read counts as
// more). It reports whether rel is gone: a file made below meanwhile keeps
// its directories; a removal that fails otherwise is the error.
func removeEmptyTree(root, rel string) (gone bool, err error) {
	var dirs []string
	only := true
	full := filepath.Join(root, filepath.FromSlash(rel))
	filepath.WalkDir(full, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			only = false
			return fs.SkipAll
		}
		r, _ := filepath.Rel(root, p)
		dirs = append(dirs, filepath.ToSlash(r))
		return nil
	})
	if !only {
		return false, nil
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		err := rmdirBeneath(root, dirs[i])
		switch {
		case err == nil, errors.Is(err, fs.ErrNotExist):
		case errors.Is(err, unix.ENOTEMPTY), errors.Is(err, unix.EEXIST):
			return false, nil
		default:
			return false, err
		}
	}
	return true, nil
}

// stage fills the scratch index g writes from with the paths to write.
func stage(ctx context.Context, g gitexec.Shadow, entries map[string]string, write []string) error {
	if len(write) == 0 {
		return nil
	}
	var info bytes.Buffer
	for _, w := range write {
		e, ok := entries[w]
		if !ok {
			return fmt.Errorf("restore: %s is not in the checkpoint", w)
		}
		info.WriteString(e)
		info.WriteByte(0)
	}
	_, err := g.RunInput(ctx, &info, "update-index", "--add", "-z", "--index-info")
	return err
}

// checkout writes paths from the scratch index g (see stage), then checks
// each is there, looked at through its parent opened as openBeneath opens
// it; each counts towards done of total written. It returns the paths it
// did not write because something was made there, or in their way, since
// unlinkWrites removed what was (made).
//
// checkout-index runs without --force, which would delete what is there,
// a file someone made a moment ago with all else: it reports a path where
// something is as "already exists", and creates each file with O_EXCL
// (refusedWrites reads both). It dies where a directory it needs is a file
// or a symlink: the directories are made first (mkdirBeneath), and the
// writes below one that cannot be made for that reason are made.
func (s *Store) checkout(ctx context.Context, g gitexec.Shadow, entries map[string]string, write []string, done *atomic.Int64, total int) (made []string, err error) {
	beforeCheckout(write)
	dirMade := map[string]bool{".": true} // each directory, made or not
	for _, w := range write {
		d := path.Dir(w)
		if _, tried := dirMade[d]; tried {
			continue
		}
		// (a directory there now needs nothing: one swapped since for a
		// symlink or a file makes checkout-index fail, not follow it)
		if st, err := lstatBeneath(s.WorkTree, d); err == nil && dirStatted(st) {
			dirMade[d] = true
			continue
		}
		err := mkdirBeneath(s.WorkTree, d, 0o777)
		if err != nil && !errors.Is(err, unix.ENOTDIR) {
			return nil, fmt.Errorf("restore could not make the directory %s: %s", d, errText(err))
		}
		dirMade[d] = err == nil
	}
	write = slices.DeleteFunc(slices.Clone(write), func(w string) bool {
		if !dirMade[path.Dir(w)] {
			made = append(made, w)
			return true
		}
		return false
	})
	if len(write) == 0 {
		return made, nil
	}
	if _, err := g.RunInput(ctx, s.countPaths("writing files", nulJoin(write), total, done), "checkout-index", "-z", "--stdin"); err != nil {
		refused, ok := refusedWrites(err, write)
		if !ok {
			return nil, err
		}
		for p := range refused {
			made = append(made, p)
		}
		write = slices.DeleteFunc(write, func(w string) bool { return refused[w] })
	}
	for _, w := range write {
		st, err := lstatBeneath(s.WorkTree, w)
		kind := st.Mode & unix.S_IFMT
		if err != nil || kind == unix.S_IFDIR || (kind == unix.S_IFLNK) != strings.HasPrefix(entries[w], "120000 ") {
			why := "it is not there afterwards"
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				why = errText(err)
			}
			return nil, fmt.Errorf("restore could not write %s: %s", w, why)
		}
	}
	return made, nil
}

// lstatBeneath is lstat of rel (below root) in its parent opened as
// openBeneath opens it: a parent made a symlink fails it.
func lstatBeneath(root, rel string) (unix.Stat_t, error) {
	var st unix.Stat_t
	dir, name, err := openParentBeneath(root, rel)
	if err != nil {
		return st, err
	}
	defer unix.Close(dir)
	return st, unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW)
}

// dirStatted reports whether st (of lstatBeneath) is a directory's.
func dirStatted(st unix.Stat_t) bool { return st.Mode&unix.S_IFMT == unix.S_IFDIR }

// beforeCheckout runs before a restore makes the directories of the paths
// checkout-index writes. (A test makes files there meanwhile.)
var beforeCheckout = func([]string) {}

// refusedWrites are the paths of write that checkout-index, failing with
// err, reported as already there and did not write; ok is false when err
// is anything else too.
func refusedWrites(err error, write []string) (refused map[string]bool, ok bool) {
	var gitErr *gitexec.Error
	if !errors.As(err, &gitErr) || gitErr.ExitCode != 1 {
		return nil, false
	}
	writes := map[string]bool{}
	for _, w := range write {
		if strings.Contains(w, "\n") {
			return nil, false // git's lines do not tell its name
		}
		writes[w] = true
	}
	refused = map[string]bool{}
	for _, line := range strings.Split(strings.TrimSuffix(gitErr.Stderr, "\n"), "\n") {
		p, found := strings.CutSuffix(line, " already exists, no checkout")
		// (or made between git's look and its O_EXCL create)
		for _, prefix := range []string{"error: unable to create file ", "error: unable to create symlink "} {
			if rest, ok := strings.CutPrefix(line, prefix); ok && !found {
				p, found = strings.CutSuffix(rest, ": File exists")
			}
		}
		if !found || !writes[p] {
			return nil, false
		}
		refused[p] = true
	}
	return refused, len(refused) > 0
}

// permChange is a file or directory whose permission bits a restore sets.
type permChange struct {
	path  string
	want  os.FileMode
	isDir bool
}

// permChanges lists the bits the checkpoint recorded that differ from what is
// on disk, for what the restore may touch: files it writes (unless preview:
// their bits are set after the write), files the safety checkpoint holds and
// the restore does not leave alone, whose bits differ between now and then
// (the two records tell which), and the directories of plan.heldDirs. Nothing
// through a symlink, nothing ignored or kept. An older checkpoint, without
// recorded bits, sets none.
func (s *Store) permChanges(v *targetView, p *restorePlan, target *Checkpoint, cur *capture, preview bool) []permChange {
	tm := target.meta
	if tm == nil {
		return nil
	}
	var out []permChange
	differs := func(rel string, want os.FileMode, isDir bool) {
		full, err := s.inside(rel) // never through a symlink
		if err != nil {
			return
		}
		fi, err := os.Lstat(full)
		if err != nil || fi.IsDir() != isDir || (!isDir && !fi.Mode().IsRegular()) || fi.Mode().Perm() == want {
			return
		}
		out = append(out, permChange{rel, want, isDir})
	}
	exec := func(e string) bool { return strings.HasPrefix(e, "100755 ") }
	regular := func(e string) bool { return strings.HasPrefix(e, "100") }
	kept := map[string]bool{}
	for _, k := range p.kept {
		kept[k.Path] = true
	}
	written := map[string]bool{}
	for _, w := range p.write {
		written[w] = true
		if e := v.entries[w]; regular(e) && !preview {
			differs(w, tm.filePerm(w, exec(e)), false)
		}
	}
	// The files both hold: those whose recorded bits differ, or every one
	// when the usual bits do.
	var check []string
	if cur.meta.base != tm.base {
		check = append(check, cur.inTree...)
	} else {
		for k := range tm.perms {
			check = append(check, k)
		}
		for k := range cur.meta.perms {
			check = append(check, k)
		}
	}
	sort.Strings(check)
	seen := map[string]bool{}
	for _, c := range check {
		if seen[c] || written[c] || kept[c] || !cur.inTree.has(c) || strings.HasSuffix(c, "/") {
			continue
		}
		seen[c] = true
		if e, ok := v.entry(c); ok && regular(e) && cur.meta.filePerm(c, exec(e)) != tm.filePerm(c, exec(e)) {
			differs(c, tm.filePerm(c, exec(e)), false)
		}
	}
	// A directory the safety checkpoint recorded with the bits the target
	// wants is left as it is (it read them a moment ago): only the others,
	// and those the restore makes, are looked at.
	made := map[string]bool{}
	for _, d := range p.mkdir {
		made[d] = true
	}
	for _, d := range p.newDirs {
		made[d] = true
	}
	for _, d := range p.heldDirs {
		if made[d] || !p.recorded[d] || cur.meta.dirPerm(d) != tm.dirPerm(d) {
			differs(d, tm.dirPerm(d), true)
		}
	}
	return out
}

// setPerms gives files and directories the bits the checkpoint recorded, after
// the writes. Without recorded bits (an older checkpoint), a file rewritten in
// place keeps its bits beyond the executable one (oldPerms). The files the
// restore left as they are (left, in order) keep their bits too.
func (s *Store) setPerms(v *targetView, p *restorePlan, target *Checkpoint, cur *capture, oldPerms map[string]os.FileMode, left []string) error {
	isLeft := func(p string) bool { _, found := slices.BinarySearch(left, p); return found }
	changes := slices.DeleteFunc(s.permChanges(v, p, target, cur, false), func(c permChange) bool { return isLeft(c.path) })
	for w, old := range oldPerms {
		if isLeft(w) {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(s.WorkTree, w)); err == nil && fi.Mode().IsRegular() {
			if want := old&^0o111 | fi.Mode().Perm()&0o111; want != fi.Mode().Perm() {
				changes = append(changes, permChange{w, want, false})
			}
		}
	}
	// Every change is made, a failure of one or not: a file left without
	// its bits has those it was written with (0600 under the umask above).
	failures := map[string]error{}
	for _, c := range changes {
		beforeChmod(c.path)
		if err := chmodBeneath(s.WorkTree, c.path, c.want, c.isDir); err != nil {
			if !strings.HasPrefix(err.Error(), c.path+":") {
				err = fmt.Errorf("%s: %w", c.path, err)
			}
			failures[c.path] = err
		}
	}
	failed := slices.Sorted(maps.Keys(failures))
	var first error
	if len(failed) > 0 {
		first = failures[failed[0]]
	}
	switch {
	case len(failed) == 1:
		return fmt.Errorf("restore the permissions of %w", first)
	case len(failed) > 1:
		return fmt.Errorf("restore the permissions of %s (the first: %w)", namesAndMore(failed, 10), first)
	}
	return nil
}

// namesAndMore is the first max of names, and how many more there are.
func namesAndMore(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}

// beforeChmod runs before a restore sets the bits of a file or directory,
// after permChanges looked at it. (A test makes it, or a parent, a symlink
// there meanwhile.)
var beforeChmod = func(string) {}

// chmodBeneath gives the file or directory rel (below root) the bits want,
// in its parent opened as openBeneath opens it, and never through a symlink
// put in its place since permChanges looked (chmodNoFollow): os.Chmod of the
// path would follow either out of the work tree and set the bits of what a
// symlink names there.
func chmodBeneath(root, rel string, want os.FileMode, isDir bool) error {
	dir, name, err := openParentBeneath(root, rel)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	return chmodNoFollow(dir, name, uint32(want.Perm()), isDir)
}

// permKind is nil when a file of the mode st_mode is what a change of bits
// expects there (a directory, or a regular file), else why it is left.
func permKind(mode uint32, isDir bool) error {
	switch kind := mode & unix.S_IFMT; {
	case isDir && kind == unix.S_IFDIR, !isDir && kind == unix.S_IFREG:
		return nil
	case kind == unix.S_IFLNK:
		return errors.New("a symlink is there now, not followed")
	case isDir:
		return errors.New("no longer a directory")
	default:
		return errors.New("no longer a regular file")
	}
}

// symlinkOnWay is walkBeneath's error for a symlink where it needs a
// directory: errors.Is finds ENOTDIR in it, as in its error for a file
// there.
type symlinkOnWay string

func (e symlinkOnWay) Error() string        { return string(e) }
func (e symlinkOnWay) Is(target error) bool { return target == unix.ENOTDIR }

// mkdirBeneath makes the directory rel (below root) and the missing ones
// above it, as os.MkdirAll does, each in its parent opened as openBeneath
// opens it: a directory on the way made a symlink fails it, where
// os.MkdirAll would follow it and make directories out of the work tree.
func mkdirBeneath(root, rel string, perm os.FileMode) error {
	names, err := namesBeneath(rel)
	if err != nil {
		return err
	}
	dir, err := walkBeneath(root, rel, names, uint32(perm.Perm()))
	if err == nil {
		unix.Close(dir)
	}
	return err
}

func literal(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = ":(literal)" + p
	}
	return out
}

// inside checks that a path from a tree stays inside the work tree: no parent
// of it may be a symlink (a restore must never follow one out of the tree).
func (s *Store) inside(rel string) (string, error) {
	full := filepath.Join(s.WorkTree, rel)
	for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
		if fi, err := os.Lstat(filepath.Join(s.WorkTree, d)); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("%s: its parent %s is a symlink; not following it", rel, d)
		}
	}
	return full, nil
}

// relPaths turns --file arguments into clean paths relative to the work tree.
func (s *Store) relPaths(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		abs := p
		if !filepath.IsAbs(p) {
			abs = filepath.Join(s.WorkTree, p)
		}
		rel, err := filepath.Rel(s.WorkTree, filepath.Clean(abs))
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			return nil, fmt.Errorf("%w: %s is outside the work tree %s", ErrBadPath, p, s.WorkTree)
		}
		if rel == "." {
			return nil, fmt.Errorf("%w: %s is the whole work tree; restore without --file", ErrBadPath, p)
		}
		out = append(out, filepath.ToSlash(rel))
	}
	return out, nil
}

// ErrBadPath is a --file argument that is not a path in the work tree.
var ErrBadPath = errors.New("bad path")
