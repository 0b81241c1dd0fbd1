package replay

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rewind-cli/rewind/gitexec"
)

// A restore puts a checkpoint's files back but not its commits: when the
// project's branch has moved on since the checkpoint (the crashed wave's
// commits, a partial one), redone dispatches would start from a `git status`
// full of reverse changes, an implementer that produces the same content would
// have nothing to commit, and one that commits with `git add -A` would commit
// the reverse of the crashed wave under its own task. So a replay's confirmed
// restore also moves the branch back to the commit the checkpoint recorded,
// when that is a plain move back: the recorded commit is an ancestor of HEAD,
// on the same branch, and none of the commits that leave the branch is on its
// upstream. Anything else is refused (ErrHeadRefused) unless --keep-head.

// HeadMove is the branch move a replay's restore will make.
type HeadMove struct {
	Branch  string       // the branch moved (short name)
	From    string       // HEAD now, full id
	To      string       // the commit the checkpoint recorded, full id
	Leaving []LogCommit  // commits that leave the branch, newest first
	Undo    string       // the command that brings the old HEAD back
	Refused *HeadRefusal // non-nil: the move cannot be made (the replay refuses)
}

// LogCommit is a commit as the plan names it.
type LogCommit struct {
	ID      string
	Subject string
}

// ErrHeadRefused is wrapped by *HeadRefusal.
var ErrHeadRefused = errors.New("the branch cannot be moved back to the checkpoint's commit")

// HeadRefusal says why the branch cannot be moved back, naming the commits.
type HeadRefusal struct {
	Message string
}

func (r *HeadRefusal) Error() string { return r.Message }
func (r *HeadRefusal) Unwrap() error { return ErrHeadRefused }

// maxNamed is how many commits a refusal or a note names before "and N more".
const maxNamed = 10

// PlanHeadMove works out, reading the project through the read-only runner,
// how the branch must move for a restore of a checkpoint that recorded
// branch and head. It returns nil when nothing moves: the checkpoint recorded
// no HEAD, the work tree is not in a repository with commits, or HEAD is still
// the recorded commit. A move that cannot be made is returned with Refused set.
func PlanHeadMove(ctx context.Context, dir, checkpointBranch, checkpointHead string) (*HeadMove, error) {
	if checkpointHead == "" {
		return nil, nil
	}
	p := gitexec.Project{Dir: dir}
	out, err := p.Run(ctx, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	head := strings.TrimSpace(string(out))
	if err != nil || head == "" {
		return nil, nil // not a repository, or no commit yet: nothing to move
	}
	if head == checkpointHead {
		return nil, nil
	}
	m := &HeadMove{From: head, To: checkpointHead, Undo: gitexec.BranchMove{From: head}.Undo()}
	refuse := func(format string, a ...any) (*HeadMove, error) {
		m.Refused = &HeadRefusal{Message: fmt.Sprintf(format, a...)}
		return m, nil
	}
	out, err = p.Run(ctx, "branch", "--show-current")
	if err != nil {
		return nil, fmt.Errorf("read the project's branch: %w", err)
	}
	m.Branch = strings.TrimSpace(string(out))
	switch {
	case m.Branch == "":
		return refuse("HEAD is detached at %s, and the checkpoint recorded commit %s: rewind moves only a branch back", short(head), short(checkpointHead))
	case checkpointBranch != "" && checkpointBranch != m.Branch:
		return refuse("the checkpoint recorded commit %s on branch %s, and HEAD is on branch %s (%s)", short(checkpointHead), checkpointBranch, m.Branch, short(head))
	}
	if _, err := p.Run(ctx, "cat-file", "-e", checkpointHead+"^{commit}"); err != nil {
		return refuse("the checkpoint's commit %s is not in the repository (history rewritten and pruned?); branch %s is at %s", short(checkpointHead), m.Branch, short(head))
	}
	// The recorded commit is an ancestor of HEAD when no commit is reachable
	// from it that is not reachable from HEAD.
	out, err = p.Run(ctx, "rev-list", "--max-count=1", checkpointHead, "^"+head, "--")
	if err != nil {
		return nil, fmt.Errorf("compare HEAD with the checkpoint's commit: %w", err)
	}
	if strings.TrimSpace(string(out)) != "" {
		return refuse("the checkpoint's commit %s is not in the history of branch %s (at %s): history was rewritten, or the checkpoint belongs to another line of work", short(checkpointHead), m.Branch, short(head))
	}
	if m.Leaving, err = logCommits(ctx, p, head, "^"+checkpointHead); err != nil {
		return nil, err
	}
	// A work tree below the repository's top level is all a restore puts back:
	// moving the branch past changes elsewhere would leave those files as the
	// old HEAD had them, under an index that says otherwise.
	if outside, err := changedOutside(ctx, p, checkpointHead, head); err != nil {
		return nil, err
	} else if len(outside) > 0 {
		return refuse("the commits that would leave branch %s (%s) change files outside the work tree, which the restore does not put back: %s",
			m.Branch, NameCommits(m.Leaving), strings.Join(outside, ", "))
	}

	// Commits already on the branch's upstream were pushed: moving back past
	// them would rewrite shared history.
	out, err = p.Run(ctx, "for-each-ref", "--format=%(upstream)", "refs/heads/"+m.Branch)
	if err != nil {
		return nil, fmt.Errorf("read branch %s's upstream: %w", m.Branch, err)
	}
	upstream := strings.TrimSpace(string(out))
	if upstream == "" {
		return m, nil
	}
	if _, err := p.Run(ctx, "rev-parse", "--verify", "--quiet", upstream+"^{commit}"); err != nil {
		return m, nil // configured but never fetched: nothing is known to be pushed
	}
	unpushed, err := logCommits(ctx, p, head, "^"+checkpointHead, "^"+upstream)
	if err != nil {
		return nil, err
	}
	local := map[string]bool{}
	for _, c := range unpushed {
		local[c.ID] = true
	}
	var pushed []LogCommit
	for _, c := range m.Leaving {
		if !local[c.ID] {
			pushed = append(pushed, c)
		}
	}
	if len(pushed) > 0 {
		return refuse("moving branch %s back to the checkpoint's commit %s would drop %s already on its upstream %s (pushed: moving back would rewrite shared history): %s",
			m.Branch, short(checkpointHead), plural(len(pushed), "commit"), strings.TrimPrefix(upstream, "refs/remotes/"), NameCommits(pushed))
	}
	return m, nil
}

// changedOutside lists (up to maxNamed) the paths that differ between two
// commits outside the directory the project runner works in, when that is
// below the repository's top level.
func changedOutside(ctx context.Context, p gitexec.Project, from, to string) ([]string, error) {
	out, err := p.Run(ctx, "rev-parse", "--show-prefix")
	if err != nil {
		return nil, fmt.Errorf("read the work tree's place in the repository: %w", err)
	}
	prefix := strings.TrimSpace(string(out))
	if prefix == "" {
		return nil, nil
	}
	out, err = p.Run(ctx, "diff-tree", "-r", "-z", "--name-only", "--no-renames", from, to, "--")
	if err != nil {
		return nil, fmt.Errorf("list the files the move would change: %w", err)
	}
	var outside []string
	for _, path := range strings.Split(string(out), "\x00") {
		if path != "" && !strings.HasPrefix(path, prefix) && len(outside) < maxNamed {
			outside = append(outside, path)
		}
	}
	return outside, nil
}

// logCommits lists the commits of a rev-list range, newest first.
func logCommits(ctx context.Context, p gitexec.Project, revs ...string) ([]LogCommit, error) {
	out, err := p.Run(ctx, append([]string{"log", "-z", "--format=%H %s"}, append(revs, "--")...)...)
	if err != nil {
		return nil, fmt.Errorf("list the commits that leave the branch: %w", err)
	}
	return ParseLogCommits(out), nil
}

// ParseLogCommits reads `git log -z --format='%H %s'` output: NUL-ended
// records of an id, a space and the subject.
func ParseLogCommits(out []byte) []LogCommit {
	var cs []LogCommit
	for _, rec := range strings.Split(string(out), "\x00") {
		id, subject, _ := strings.Cut(strings.TrimLeft(rec, "\n"), " ")
		if id != "" {
			cs = append(cs, LogCommit{ID: id, Subject: subject})
		}
	}
	return cs
}

// NameCommits names commits on one line: "363f1236 (task 4: wip), c109ddfb
// (task 3: client)", the first maxNamed of them.
func NameCommits(cs []LogCommit) string {
	var parts []string
	for i, c := range cs {
		if i == maxNamed {
			parts = append(parts, fmt.Sprintf("and %d more", len(cs)-maxNamed))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", short(c.ID), c.Subject))
	}
	return strings.Join(parts, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// renderHeadMove adds the dry run's section on the branch move, when there is one.
func renderHeadMove(b *strings.Builder, r Report) {
	m := r.Head
	if m == nil {
		return
	}
	fmt.Fprintf(b, "\n## Branch to move back\n")
	if m.Refused != nil {
		fmt.Fprintf(b, "Refused: %s. The replay stops here (exit 4); --keep-head restores the files and leaves the branch where it is.\n", m.Refused.Message)
		return
	}
	fmt.Fprintf(b, "Branch %s moves back from %s to %s, the commit checkpoint %s recorded.\n", m.Branch, short(m.From), short(m.To), r.Plan.Restore.Reason)
	fmt.Fprintf(b, "Commits that leave the branch (%d):\n", len(m.Leaving))
	for _, c := range m.Leaving {
		fmt.Fprintf(b, "- %s %s\n", short(c.ID), c.Subject)
	}
	fmt.Fprintf(b, "The old HEAD stays reachable (reflog, ORIG_HEAD); to bring it back: %s\n", m.Undo)
}
