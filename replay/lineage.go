package replay

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rewind-cli/rewind/gitexec"
)

// A mutating dispatch and its replays are verified together. The newest
// attempt's own commit is the evidence first; failing that, a commit an
// earlier attempt of the same lineage made counts, if it is still in HEAD's
// history and everything it changed is in the work tree as it left it. That
// is the redo whose work was already there: an agent that wrote the same
// content as the crashed attempt, on a branch that kept the crashed attempt's
// commit (--keep-head), had nothing to commit, yet its task is done.

// FileChange is one path a commit changed, as `git diff-tree -r` reports it:
// the path's mode and blob after the commit ("000000" and an all-zero blob
// when the commit deleted it).
type FileChange struct {
	Path string // relative to the repository's top level
	Mode string // "100644", "100755", "120000", "160000"; "000000" when deleted
	Blob string
}

// LineageEvidence is what the lineage rule reads besides the history.
type LineageEvidence struct {
	Top     string                                    // the repository's top level: where FileChange paths start
	Changes func(commit string) ([]FileChange, error) // the paths a commit changed
}

// commitLineage verifies a mutating dispatch by its newest attempt a and, when
// a's own commit is missing, by the commits of the earlier attempts of its
// lineage whose changes are all still in the work tree.
func (v *Verification) commitLineage(d Dispatch, a Attempt) (bool, string) {
	ok, detail := v.commit(a)
	if ok || v.Lineage == nil || v.Lineage.Changes == nil {
		return ok, detail
	}
	for i := len(d.Attempts) - 1; i >= 0; i-- {
		earlier := d.Attempts[i]
		if earlier.Seq == a.Seq {
			continue
		}
		for _, ev := range v.commitsFor(earlier) {
			if v.Lineage.present(ev.commit.ID) {
				return true, fmt.Sprintf("%s (seq %d, replayed by seq %d), and its changes are in the work tree", ev.why, earlier.Seq, a.Seq)
			}
		}
	}
	return false, detail
}

// present reports whether everything commit changed is in the work tree as
// the commit left it. Anything that cannot be read or compared (a merge, a
// submodule, an unreadable file) counts as not present: the dispatch is then
// redone, never wrongly kept.
func (l *LineageEvidence) present(commit string) bool {
	changes, err := l.Changes(commit)
	if err != nil {
		return false
	}
	for _, c := range changes {
		if !l.inWorkTree(c) {
			return false
		}
	}
	return true
}

func (l *LineageEvidence) inWorkTree(c FileChange) bool {
	p := filepath.Join(l.Top, filepath.FromSlash(c.Path))
	fi, err := os.Lstat(p)
	if strings.Trim(c.Mode, "0") == "" {
		return errors.Is(err, fs.ErrNotExist) // deleted by the commit, and still gone
	}
	if err != nil {
		return false
	}
	var content []byte
	switch c.Mode {
	case "100644", "100755":
		if !fi.Mode().IsRegular() {
			return false
		}
		content, err = os.ReadFile(p)
	case "120000":
		if fi.Mode()&fs.ModeSymlink == 0 {
			return false
		}
		var target string
		target, err = os.Readlink(p)
		content = []byte(target)
	default:
		return false // a submodule: its content is not in this tree
	}
	return err == nil && BlobID(content, len(c.Blob)) == c.Blob
}

// BlobID is git's id of a blob holding content, in the object format whose ids
// have idLen hex digits (40: SHA-1, 64: SHA-256). It is the id of the bytes as
// they are: a path under a clean filter or end-of-line conversion hashes
// differently from what git stored, and then counts as changed.
func BlobID(content []byte, idLen int) string {
	var h hash.Hash
	if idLen == 64 {
		h = sha256.New()
	} else {
		h = sha1.New()
	}
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write(content)
	return hex.EncodeToString(h.Sum(nil))
}

// ProjectLineage reads the lineage rule's evidence from the project's
// repository through the read-only runner; nil when dir is not in a repository.
func ProjectLineage(ctx context.Context, dir string) *LineageEvidence {
	p := gitexec.Project{Dir: dir}
	out, err := p.Run(ctx, "rev-parse", "--show-toplevel")
	top := strings.TrimSpace(string(out))
	if err != nil || top == "" {
		return nil
	}
	return &LineageEvidence{Top: top, Changes: func(commit string) ([]FileChange, error) {
		parents, err := p.Run(ctx, "rev-list", "--parents", "--max-count=1", commit, "--")
		if err != nil {
			return nil, err
		}
		if len(strings.Fields(string(parents))) > 2 {
			return nil, fmt.Errorf("commit %s is a merge", short(commit))
		}
		out, err := p.Run(ctx, "diff-tree", "-r", "-z", "--no-commit-id", "--root", "--no-renames", commit, "--")
		if err != nil {
			return nil, err
		}
		return ParseDiffTree(out)
	}}
}

// ParseDiffTree reads `git diff-tree -r -z --no-renames` output: per path
// ":<old mode> <new mode> <old blob> <new blob> <status>" NUL <path> NUL.
func ParseDiffTree(out []byte) ([]FileChange, error) {
	var changes []FileChange
	fields := bytes.Split(out, []byte{0})
	for i := 0; i < len(fields); i++ {
		head := string(fields[i])
		if head == "" {
			continue
		}
		meta := strings.Fields(strings.TrimPrefix(head, ":"))
		if !strings.HasPrefix(head, ":") || len(meta) != 5 || i+1 >= len(fields) || len(fields[i+1]) == 0 {
			return nil, fmt.Errorf("diff-tree: unexpected record %q", head)
		}
		i++
		changes = append(changes, FileChange{Path: string(fields[i]), Mode: meta[1], Blob: meta[3]})
	}
	return changes, nil
}
