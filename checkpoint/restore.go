package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
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
	Kept    []Skipped   // paths left as they are: writing them would destroy what no checkpoint holds
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
	unlock, err := s.begin(ctx, false)
	if err != nil {
		return nil, err
	}
	defer unlock()
	cps, err := s.List(ctx)
	if err != nil {
		return nil, err
	}
	target, err := Resolve(cps, ref)
	if err != nil {
		return nil, err
	}
	res := &Restored{Target: target}
	if _, head := s.projectHead(ctx); head != "" && target.Head != "" && head != target.Head {
		res.HeadNow = head
	}
	max := opt.MaxFileSize
	if max <= 0 {
		max = DefaultMaxFileSize
	}

	// Every path the restore may write is captured by the safety checkpoint even
	// when it is ignored now, so the undo gives back what it holds.
	entries, err := s.treeEntries(ctx, target.Tree, files)
	if err != nil {
		return nil, err
	}
	if err := s.checkHeld(target, entries, files); err != nil {
		return nil, err
	}
	force := make([]string, 0, len(entries))
	for p := range entries {
		force = append(force, p)
	}
	sort.Strings(force)
	var current string
	if opt.DryRun {
		cap, err := s.capture(ctx, max, force...)
		if err != nil {
			return nil, err
		}
		current = cap.tree
	} else {
		reason := "pre-restore-safety"
		if len(files) > 0 {
			reason = "pre-restore-safety-file"
		}
		made, err := s.create(ctx, CreateOptions{Reason: reason, Source: "checkpoint", MaxFileSize: max, Keep: len(cps) + 1, force: force})
		if err != nil {
			return nil, fmt.Errorf("safety checkpoint: %w", err)
		}
		res.Safety = made.Checkpoint
		current = made.Checkpoint.Tree
		// Finishing an interrupted restore: its safety checkpoint, not this
		// one (a half-restored tree), is what undoes it.
		if m, _ := s.interruptedRestore(); m != nil {
			if first, err := Resolve(cps, m.safety); err == nil {
				res.Safety = first
			}
		}
	}

	changes, err := s.changedPaths(ctx, current, target.Tree, files...)
	if err != nil {
		return nil, err
	}
	// A file the checkpoint skipped (over the size limit, unreadable) was there
	// when it was taken: the checkpoint knows nothing of its content and never
	// deletes it.
	skipped := map[string]bool{}
	for _, sk := range target.Skipped {
		skipped[sk.Path] = true
	}
	for _, c := range changes {
		if c.Status == "D" && skipped[c.Path] {
			continue
		}
		if c.Status == "D" {
			res.Remove = append(res.Remove, c.Path)
		} else {
			res.Write = append(res.Write, c.Path)
		}
	}
	if res.Write, res.Kept, err = s.inTheWay(ctx, current, res.Write, res.Remove); err != nil {
		return nil, err
	}
	for _, k := range res.Kept {
		s.warn("kept %s as it is: %s", k.Path, k.Why)
	}
	if opt.DryRun {
		return res, nil
	}

	if err := s.markRestore(target, res.Safety, files); err != nil {
		return nil, err
	}
	if err := s.apply(ctx, entries, res.Remove, res.Write); err != nil {
		return nil, err
	}
	if err := os.Remove(s.restoreMarker()); err != nil {
		return nil, err
	}
	cps, _ = s.List(ctx)
	return res, s.writeManifest(cps)
}

// treePaths lists the paths of a tree, below prefixes when any are given.
func (s *Store) treePaths(ctx context.Context, tree string, prefixes []string) ([]string, error) {
	out, err := s.git().Run(ctx, lsTree(tree, prefixes, "--name-only")...)
	if err != nil {
		return nil, err
	}
	return splitNul(out), nil
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

// inTheWay drops from write the paths whose writing would destroy something the
// current state (the safety checkpoint) does not hold: a file there that was
// skipped (over the size limit, unreadable), a directory still holding
// uncaptured files (ignored ones) once the removals are done, or an uncaptured
// file where the checkpoint has a directory. git checkout-index --force would
// delete them; rewind keeps them and says so.
func (s *Store) inTheWay(ctx context.Context, current string, write, remove []string) (kept []string, left []Skipped, err error) {
	if len(write) == 0 {
		return write, nil, nil
	}
	held := map[string]bool{}
	paths, err := s.treePaths(ctx, current, nil)
	if err != nil {
		return nil, nil, err
	}
	for _, p := range paths {
		held[p] = true
	}
	removed := map[string]bool{}
	for _, p := range remove {
		removed[p] = true
	}
	// blocks reports why the thing at rel (a file or directory) cannot be
	// replaced, or "" when it can.
	blocks := func(rel string) string {
		full := filepath.Join(s.WorkTree, rel)
		fi, err := os.Lstat(full)
		switch {
		case err != nil, removed[rel], held[rel]:
			return ""
		case !fi.IsDir():
			return "the checkpoint holds it, but the current version is in no checkpoint (over the size limit, unreadable or ignored)"
		}
		why := ""
		filepath.WalkDir(full, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || why != "" {
				return nil
			}
			r, _ := filepath.Rel(s.WorkTree, p)
			if r = filepath.ToSlash(r); !removed[r] && !held[r] {
				why = fmt.Sprintf("the checkpoint has a file there, but the directory holds %s, which is in no checkpoint", r)
			}
			return nil
		})
		return why
	}
	for _, p := range write {
		why := blocks(p)
		for d := path.Dir(p); why == "" && d != "."; d = path.Dir(d) {
			if fi, err := os.Lstat(filepath.Join(s.WorkTree, d)); err == nil && !fi.IsDir() {
				why = blocks(d)
			}
		}
		if why != "" {
			left = append(left, Skipped{Path: p, Why: why})
			continue
		}
		kept = append(kept, p)
	}
	return kept, left, nil
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

// apply removes and writes paths of the work tree. Removals go first, so a
// directory the checkpoint has as a file (or the reverse) can be written.
func (s *Store) apply(ctx context.Context, entries map[string]string, remove, write []string) error {
	dirs := map[string]bool{}
	for _, p := range remove {
		full, err := s.inside(p)
		if err != nil {
			return err
		}
		if err := os.Remove(full); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
		for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	// Empty directories left behind go too, deepest first; a directory that still
	// holds anything (an ignored file, say) stays.
	var byDepth []string
	for d := range dirs {
		byDepth = append(byDepth, d)
	}
	sort.Slice(byDepth, func(i, j int) bool { return strings.Count(byDepth[i], "/") > strings.Count(byDepth[j], "/") })
	for _, d := range byDepth {
		os.Remove(filepath.Join(s.WorkTree, d))
	}
	if len(write) == 0 {
		return nil
	}
	// git records only whether a file is executable: a file rewritten in place
	// keeps its other permission bits (a 0600 secret stays 0600).
	perms := map[string]os.FileMode{}
	for _, p := range write {
		if fi, err := os.Lstat(filepath.Join(s.WorkTree, p)); err == nil && fi.Mode().IsRegular() {
			perms[p] = fi.Mode().Perm()
		}
	}
	defer func() {
		for p, old := range perms {
			full := filepath.Join(s.WorkTree, p)
			if fi, err := os.Lstat(full); err == nil && fi.Mode().IsRegular() {
				if want := old&^0o111 | fi.Mode().Perm()&0o111; want != fi.Mode().Perm() {
					os.Chmod(full, want)
				}
			}
		}
	}()
	// A scratch index holding only the files to write: checkout-index writes
	// from an index, and a whole tree's would cost a full index write.
	g := s.git()
	g.IndexFile = s.restoreIndex()
	os.Remove(g.IndexFile) // a leftover of a restore killed here; the store lock is held
	defer os.Remove(g.IndexFile)
	var info bytes.Buffer
	for _, p := range write {
		e, ok := entries[p]
		if !ok {
			return fmt.Errorf("restore: %s is not in the checkpoint", p)
		}
		info.WriteString(e)
		info.WriteByte(0)
	}
	if _, err := g.RunInput(ctx, &info, "update-index", "--add", "-z", "--index-info"); err != nil {
		return err
	}
	_, err := g.RunInput(ctx, nulJoin(write), "checkout-index", "--force", "-z", "--stdin")
	return err
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
