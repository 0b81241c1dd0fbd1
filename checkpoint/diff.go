package checkpoint

import (
	"context"
)

// Diff compares the checkpoint ref names with the checkpoint ref2 names, or with
// the current work tree when ref2 is "". With format "stat" or "patch" it also
// returns git's --stat or --patch text. A file one side skipped is not
// reported as added or deleted.
func (s *Store) Diff(ctx context.Context, ref, ref2, format string) (from *Checkpoint, to *Checkpoint, changes []Change, text string, err error) {
	cps, err := s.List(ctx)
	if err != nil {
		return nil, nil, nil, "", err
	}
	if from, err = Resolve(cps, ref); err != nil {
		return nil, nil, nil, "", err
	}
	toTree := ""
	var toSkipped []Skipped
	if ref2 != "" {
		if to, err = Resolve(cps, ref2); err != nil {
			return nil, nil, nil, "", err
		}
		toTree, toSkipped = to.Tree, to.Skipped
	} else {
		// The work tree's state as a checkpoint would hold it; capturing
		// updates the store's index, so it runs under the lock.
		if err := s.refuseForeign("comparing with the work tree"); err != nil {
			return nil, nil, nil, "", err
		}
		unlock, err := s.lock(ctx)
		if err != nil {
			return nil, nil, nil, "", err
		}
		cap, err := s.capture(ctx, DefaultMaxFileSize)
		if err == nil {
			s.keepImport(ctx, cap)
		}
		unlock()
		if err != nil {
			return nil, nil, nil, "", err
		}
		toTree, toSkipped = cap.tree, cap.skipped
	}
	all, err := s.changedPaths(ctx, from.Tree, toTree)
	if err != nil {
		return nil, nil, nil, "", err
	}
	changes, unknown := knownChanges(all, from.Skipped, toSkipped)
	if format == "stat" || format == "patch" {
		args := []string{"diff-tree", "-r", "--no-renames", "--no-ext-diff", "--no-textconv", "--no-color", "--" + format, from.Tree, toTree, "--"}
		out, err := s.git().Run(ctx, append(args, unknown...)...)
		if err != nil {
			return nil, nil, nil, "", err
		}
		text = string(out)
	}
	return from, to, changes, text, nil
}

// Show returns a checkpoint and the paths changed against the checkpoint taken
// before it (every path, for the first).
func (s *Store) Show(ctx context.Context, ref string) (*Checkpoint, *Checkpoint, []Change, error) {
	cps, err := s.List(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	c, err := Resolve(cps, ref)
	if err != nil {
		return nil, nil, nil, err
	}
	// The one before it in the list (checkpoints crucible's procedure made
	// share a Seq with the rewind checkpoint before them).
	var prev *Checkpoint
	for i, p := range cps {
		if p == c && i > 0 {
			prev = cps[i-1]
		}
	}
	prevTree := ""
	var prevSkipped []Skipped
	if prev != nil {
		prevTree, prevSkipped = prev.Tree, prev.Skipped
	}
	all, err := s.changedPaths(ctx, prevTree, c.Tree)
	if err != nil {
		return nil, nil, nil, err
	}
	changes, _ := knownChanges(all, prevSkipped, c.Skipped)
	return c, prev, changes, nil
}

// knownChanges drops from all the changes a skip explains: a file one side
// skipped (over its size limit, unreadable, in a directory it could not read)
// was there, its content unknown, so the other side holding it makes it
// neither added nor deleted. unknown holds their exclude pathspecs.
func knownChanges(all []Change, fromSkipped, toSkipped []Skipped) (changes []Change, unknown []string) {
	skippedFrom, skippedTo := skippedBy(fromSkipped), skippedBy(toSkipped)
	for _, c := range all {
		if (c.Status == "A" && skippedFrom(c.Path)) || (c.Status == "D" && skippedTo(c.Path)) {
			unknown = append(unknown, ":(exclude,literal)"+c.Path)
			continue
		}
		changes = append(changes, c)
	}
	return changes, unknown
}

// Files counts the paths a checkpoint holds.
func (s *Store) Files(ctx context.Context, c *Checkpoint) (int, error) {
	out, err := s.git().Run(ctx, "ls-tree", "-r", "-z", "--name-only", c.Tree)
	if err != nil {
		return 0, err
	}
	return len(splitNul(out)), nil
}
