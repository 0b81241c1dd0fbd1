package checkpoint

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rewind-cli/rewind/gitexec"
)

// targetView is what a restore knows of its target's tree. A whole restore
// never lists the target: the state now (the safety checkpoint's tree) and the
// target share everything but what diff-tree reports between them, so the
// cost is that of the differing paths, not of the tree. A --file restore lists
// the tree below its paths (a pathspec-limited diff cannot answer for the
// directories above them).
type targetView struct {
	changes []Change          // the files that differ (A added, M modified, T type changed, D deleted)
	entries map[string]string // update-index --index-info lines of the files to write from: the differing ones, or (--file) every file below the paths
	listed  bool              // entries lists every file of the tree below the --file paths

	// Directories, for a whole restore: those of the state now's tree
	// (parents of its files), the trees the target adds and those it drops.
	curDirs, addedDirs, deletedDirs map[string]bool
	// For a --file restore: the directories of entries.
	listedDirs map[string]bool
	metaDirs   map[string]bool // the target's recorded directories without files

	deleted map[string]bool // files the target does not have that the state now's tree has
	// curIgnoreFiles are the .gitignore files and .rewindignore held now.
	curIgnoreFiles []string
	cur            *capture
	root           string // the work tree
}

// hasDir reports whether d is a directory of the target: a parent of one of
// its files, or one it recorded without files.
func (v *targetView) hasDir(d string) bool {
	if v.metaDirs[d] {
		return true
	}
	if v.listed {
		return v.listedDirs[d]
	}
	return (v.curDirs[d] && !v.deletedDirs[d]) || v.addedDirs[d]
}

// entry returns the target's index-info line for the file p. For a whole
// restore, a file the diff does not name is the state now's, whose mode the
// disk gives (the safety checkpoint just read it from there); only its mode
// is filled in.
func (v *targetView) entry(p string) (string, bool) {
	if e, ok := v.entries[p]; ok || v.listed {
		return e, ok
	}
	if v.deleted[p] || !v.cur.inTree.has(p) {
		return "", false
	}
	fi, err := os.Lstat(filepath.Join(v.root, p))
	switch {
	case err != nil:
		return "", false
	case fi.Mode()&os.ModeSymlink != 0:
		return "120000 -\t" + p, true
	case !fi.Mode().IsRegular():
		return "", false
	case fi.Mode()&0o100 != 0:
		return "100755 -\t" + p, true
	}
	return "100644 -\t" + p, true
}

// viewTarget compares the state now with the target (below files, when any
// are given; listed is then the tree below them, from treeEntries).
func (s *Store) viewTarget(ctx context.Context, target *Checkpoint, cur *capture, files []string, listed map[string]string) (*targetView, error) {
	v := &targetView{
		entries: map[string]string{}, deleted: map[string]bool{}, metaDirs: map[string]bool{},
		addedDirs: map[string]bool{}, deletedDirs: map[string]bool{},
		cur: cur, root: s.WorkTree,
	}
	if target.meta != nil {
		for _, d := range target.meta.dirs {
			v.metaDirs[d] = true
		}
	}
	args := []string{"diff-tree", "-r", "-t", "-z", "--raw", "--no-abbrev", "--no-renames", cur.tree, target.Tree, "--"}
	out, err := s.treeGit().Run(ctx, append(args, literal(files)...)...)
	if err != nil {
		return nil, err
	}
	raw, err := parseRawDiff(out)
	if err != nil {
		return nil, fmt.Errorf("diff-tree %s %s: %w", cur.tree, target.Tree, err)
	}
	for _, r := range raw {
		oldTree, newTree := r.oldMode == "040000", r.newMode == "040000"
		switch {
		case oldTree || newTree:
			// A directory on one side (a file may stand on the other:
			// it has its own line).
			if oldTree && !newTree {
				v.deletedDirs[r.path] = true
			}
			if newTree && !oldTree {
				v.addedDirs[r.path] = true
			}
		case r.status == "D":
			v.deleted[r.path] = true
			v.changes = append(v.changes, Change{Status: "D", Path: r.path})
		default:
			v.entries[r.path] = r.newMode + " " + r.newID + "\t" + r.path
			v.changes = append(v.changes, Change{Status: r.status, Path: r.path})
		}
	}
	if len(files) > 0 {
		v.entries, v.listed = listed, true
		v.listedDirs = map[string]bool{}
		for e := range listed {
			for d := path.Dir(e); d != "." && !v.listedDirs[d]; d = path.Dir(d) {
				v.listedDirs[d] = true
			}
		}
	}
	// One pass over the files held now (the only cost here that grows with
	// the tree): their directories, and the ignore files among them.
	direct := map[string]bool{}
	for _, f := range cur.inTree {
		if i := strings.LastIndexByte(f, '/'); i > 0 {
			direct[f[:i]] = true
		}
		if strings.HasSuffix(f, "ignore") && isIgnoreFile(f) {
			v.curIgnoreFiles = append(v.curIgnoreFiles, f)
		}
	}
	v.curDirs = withParents(direct)
	return v, nil
}

// isIgnoreFile reports whether a path is one rulesOf reads.
func isIgnoreFile(p string) bool { return p == ".rewindignore" || path.Base(p) == ".gitignore" }

// withParents returns the directories and every directory above them.
func withParents(dirs map[string]bool) map[string]bool {
	all := make(map[string]bool, len(dirs))
	for d := range dirs {
		for ; d != "." && !all[d]; d = path.Dir(d) {
			all[d] = true
		}
	}
	return all
}

// rawChange is one line of diff-tree --raw.
type rawChange struct {
	oldMode, newMode string
	newID            string
	status           string
	path             string
}

// parseRawDiff reads diff-tree -z --raw --no-renames output: for each path
// ":<old mode> <new mode> <old id> <new id> <status>" NUL "<path>" NUL.
func parseRawDiff(out []byte) ([]rawChange, error) {
	var changes []rawChange
	for len(out) > 0 {
		head, rest, ok := bytes.Cut(out, []byte{0})
		if !ok {
			return nil, fmt.Errorf("unexpected end of output after %q", head)
		}
		p, rest, ok := bytes.Cut(rest, []byte{0})
		if !ok {
			return nil, fmt.Errorf("no path after %q", head)
		}
		f := strings.Fields(strings.TrimPrefix(string(head), ":"))
		if !bytes.HasPrefix(head, []byte(":")) || len(f) != 5 || len(f[4]) == 0 || len(p) == 0 {
			return nil, fmt.Errorf("unexpected line %q", head)
		}
		changes = append(changes, rawChange{oldMode: f[0], newMode: f[1], newID: f[3], status: f[4][:1], path: string(p)})
		out = rest
	}
	return changes, nil
}

// ignoreEntries returns the target's .gitignore files and .rewindignore, as
// rulesOf reads them from entries, without listing the tree: for a whole
// restore, those the state now holds (which the target has too unless the
// diff deleted them) and those the diff adds; for a --file restore, those
// below its paths and in the directories above them, the only ones that
// decide for what it touches.
func (s *Store) ignoreEntries(ctx context.Context, target *Checkpoint, v *targetView, files []string) (map[string]string, error) {
	var names []string
	if v.listed {
		above := map[string]bool{".rewindignore": true}
		for _, f := range files {
			for d := path.Dir(f); ; d = path.Dir(d) {
				if d == "." {
					above[".gitignore"] = true
					break
				}
				above[d+"/.gitignore"] = true
			}
		}
		names = sortedKeys(above)
	} else {
		for _, p := range v.curIgnoreFiles {
			if !v.deleted[p] {
				names = append(names, p)
			}
		}
	}
	entries := map[string]string{}
	for p, e := range v.entries {
		if isIgnoreFile(p) {
			entries[p] = e
		}
	}
	sort.Strings(names)
	// A few hundred paths an ls-tree, so that no command line grows long.
	for len(names) > 0 {
		n := min(len(names), 256)
		out, err := s.git().Run(ctx, append([]string{"ls-tree", "-z", "--full-tree", target.Tree, "--"}, literal(names[:n])...)...)
		if err != nil {
			return nil, err
		}
		names = names[n:]
		for _, rec := range splitNul(out) {
			meta, p, ok := strings.Cut(rec, "\t")
			f := strings.Fields(meta)
			if !ok || len(f) != 3 {
				return nil, fmt.Errorf("ls-tree %s: unexpected line %q", target.Tree, rec)
			}
			if f[1] == "blob" {
				entries[p] = f[0] + " " + f[2] + "\t" + p
			}
		}
	}
	return entries, nil
}

// rulesChange reports whether the target's ignore rules may differ from those
// of now: a .gitignore or the .rewindignore differs, or the nested
// repositories do.
func (v *targetView) rulesChange(target *Checkpoint) bool {
	for _, c := range v.changes {
		if isIgnoreFile(c.Path) {
			return true
		}
	}
	if target.meta != nil && v.cur.held != nil {
		var now []string
		for _, r := range v.cur.held.repos {
			if r != "" {
				now = append(now, r)
			}
		}
		sort.Strings(now)
		return strings.Join(now, "\x00") != strings.Join(target.meta.repos, "\x00")
	}
	return false
}

// treeGit runs git commands that read only objects, with an index that does
// not exist: diff-tree reads the index at its start, which costs as much as
// the diff itself at 100,000 files and tells it nothing.
func (s *Store) treeGit() gitexec.Shadow {
	g := s.git()
	g.IndexFile = s.scratchFile("no-index") // never written
	return g
}
