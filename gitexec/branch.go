package gitexec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

// ProjectBranch is the one runner that writes the user's repository, and it
// does exactly one thing: move the current branch back to an ancestor of its
// HEAD (MoveBack). replay uses it, after the user confirmed the restore of a
// checkpoint, to put the branch back on the commit that checkpoint recorded, so
// redone work starts from a clean `git status`. Everything else stays with the
// read-only Project runner.
//
// What the move writes, and nothing more: the branch ref (compare-and-swap
// against the HEAD the caller saw), ORIG_HEAD (the old HEAD, as git reset
// leaves it), the reflog of the branch and of HEAD (kept even where
// core.logAllRefUpdates is off, so the old HEAD stays reachable), and the index
// (read from the target commit's tree). The work tree is never touched: the
// restore has already put the checkpoint's files in place.
type ProjectBranch struct {
	Dir string // a directory inside the repository
}

// BranchMove is a move of the current branch back to an ancestor of HEAD.
type BranchMove struct {
	Branch string // the branch moved (short name)
	From   string // HEAD before the move, full id
	To     string // the commit the branch points at after it, full id
}

// Undo is the command that brings the old HEAD back: the branch and the index
// as they were, the work tree left as it is.
func (m BranchMove) Undo() string { return "git reset --mixed " + m.From }

// Errors MoveBack refuses with, before writing anything.
var (
	ErrNotAncestor = errors.New("the target is not an ancestor of HEAD")
	ErrHeadMoved   = errors.New("HEAD is not the commit the move was planned from")
	ErrNotOnBranch = errors.New("HEAD is not on the branch the move was planned for")
)

// MoveBack moves branch from HEAD (which must be from, and branch must be what
// HEAD points at) back to to, an ancestor of from. from and to are full commit
// ids. message is the reflog message.
func (b ProjectBranch) MoveBack(ctx context.Context, branch, from, to, message string) (*BranchMove, error) {
	if !isObjectID(from) || !isObjectID(to) {
		return nil, fmt.Errorf("move %s back: %q and %q must be full commit ids", branch, from, to)
	}
	if from == to {
		return nil, fmt.Errorf("move %s back: it is already at %s", branch, to)
	}
	if branch == "" || strings.HasPrefix(branch, "-") || strings.ContainsAny(branch, " \t\n\x00") {
		return nil, fmt.Errorf("move back: invalid branch name %q", branch)
	}
	ref := "refs/heads/" + branch
	out, err := b.git(ctx, nil, "symbolic-ref", "-q", "HEAD")
	if got := strings.TrimSpace(string(out)); err != nil || got != ref {
		return nil, fmt.Errorf("move %s back: HEAD is %s: %w", branch, orDetached(got), ErrNotOnBranch)
	}
	out, err = b.git(ctx, nil, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if got := strings.TrimSpace(string(out)); err != nil || got != from {
		return nil, fmt.Errorf("move %s back: HEAD is %s, not %s: %w", branch, orNone(got), from, ErrHeadMoved)
	}
	if _, err := b.git(ctx, nil, "merge-base", "--is-ancestor", to, from); err != nil {
		var gerr *Error
		if errors.As(err, &gerr) && gerr.ExitCode == 1 {
			return nil, fmt.Errorf("move %s back to %s: %w", branch, to, ErrNotAncestor)
		}
		return nil, err
	}

	// One ref transaction: the branch moves only if it still points at from
	// (a commit made since the check is never lost), and ORIG_HEAD records the
	// old HEAD, as git reset does. core.logAllRefUpdates=true makes git write the
	// reflog of the branch and of HEAD even where the user turned it off: that
	// reflog is what keeps the old HEAD reachable.
	txn := fmt.Sprintf("update %s\x00%s\x00%s\x00update ORIG_HEAD\x00%s\x00\x00", ref, to, from, from)
	if _, err := b.git(ctx, strings.NewReader(txn), "-c", "core.logAllRefUpdates=true",
		"update-ref", "-z", "--stdin", "-m", message); err != nil {
		return nil, err
	}
	// The index becomes the target's tree: what `git reset --mixed` does, without
	// its refresh (which would read, and run the filters of, every changed file).
	// --reset keeps the stat data of entries the move does not change and drops
	// unmerged ones; without -u, read-tree never writes the work tree. git status
	// afterwards shows exactly how the restored files differ from the commit.
	if _, err := b.git(ctx, nil, "read-tree", "--reset", to); err != nil {
		return nil, fmt.Errorf("moved %s back from %s to %s, but the index was not reset (run git reset --mixed -q %s): %w", branch, from, to, to, err)
	}
	return &BranchMove{Branch: branch, From: from, To: to}, nil
}

// git runs one of MoveBack's git commands in the project, with the caller's
// environment minus GIT_* (as every runner) and the project's overrides.
func (b ProjectBranch) git(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	env := scrubbedEnv("GIT_TERMINAL_PROMPT=0", "GIT_NO_LAZY_FETCH=1", "LC_ALL=C")
	return output(ctx, b.Dir, env, stdin, append(projectOverrides(), args...))
}

// isObjectID reports whether s is a full SHA-1 or SHA-256 object id in lower-case hex.
func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

func orDetached(ref string) string {
	if ref == "" {
		return "detached"
	}
	return ref
}

func orNone(id string) string {
	if id == "" {
		return "unborn"
	}
	return id
}
