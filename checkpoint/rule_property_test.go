package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// TestRuleProperty checks the rule of what a checkpoint holds and what a
// restore touches against random histories: edits (create, modify, same-size
// rewrite with the mtime set back, delete, chmod, file, directory and symlink
// swaps, a directory made a symlink, empty directories), ignore-rule changes
// (the root .gitignore, the project's .git/info/exclude and a
// core.excludesFile outside the work tree, negations and directory patterns
// among them) and tracking changes in the project's own git, interleaved with
// checkpoints and restores. After every checkpoint its tree must be exactly
// what the project's git holds (the oracle: git ls-files, minus the default
// excludes for untracked files); after every restore each held path must be
// the checkpoint's, every ignored path untouched, anything else left named in
// the restore's note; and the undo must give back the whole tree, permission
// bits and empty directories included.
func TestRuleProperty(t *testing.T) {
	seeds, steps := 3, 120
	if os.Getenv("REWIND_SOAK") != "" {
		seeds, steps = 25, 400
	}
	seeds = envInt("REWIND_RULE_SEEDS", seeds)
	steps = envInt("REWIND_RULE_STEPS", steps)
	beyondLink := 0
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { beyondLink += ruleRound(t, seed, steps) })
	}
	// The restores must meet paths beyond a symlink (judged in the stand-in
	// work tree, by info/exclude and core.excludesFile too), or the edits
	// no longer make any.
	if beyondLink == 0 && seeds*steps >= 360 && !t.Failed() {
		t.Errorf("the restores of %d rounds of %d steps met no path beyond a symlink", seeds, steps)
	}
}

type heldEntry struct {
	kind string // "file" or "link"
	perm os.FileMode
	sum  string // content hash or link target
}

type propWorld struct {
	t  *testing.T
	r  *rand.Rand
	wt string
	s  *Store

	excludesFile string // outside the work tree; core.excludesFile names it when excludesSet
	excludesSet  bool

	beyondLink, beyondLinkKept int // paths a restore met beyond a symlink, and those of them it kept
}

func (w *propWorld) git(args ...string) string {
	w.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = w.wt
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		w.t.Fatalf("git %v: %v\n%s", args, err, errb.String())
	}
	return out.String()
}

// oracle is what the rule says a checkpoint holds now, asked of the project's
// git directly.
func (w *propWorld) oracle() map[string]heldEntry {
	held := map[string]heldEntry{}
	add := func(p string) {
		if e, ok := w.entry(p); ok {
			held[p] = e
		}
	}
	for _, p := range splitNul([]byte(w.git("ls-files", "-z", "--cached"))) {
		add(p)
	}
	for _, p := range splitNul([]byte(w.git("ls-files", "-z", "--others", "--exclude-standard"))) {
		if !propDefaultExcluded(p) {
			add(p)
		}
	}
	return held
}

// propDefaultExcluded is the default excludes the test's names can meet,
// written out by hand: a node_modules directory ("node_modules/" matches
// directories only), anything named .env (".env" matches a file or a
// directory, and all below it).
func propDefaultExcluded(p string) bool {
	parts := strings.Split(p, "/")
	for i, d := range parts {
		if d == ".env" || (d == "node_modules" && i < len(parts)-1) {
			return true
		}
	}
	return false
}

// entry describes a file or symlink at p, when there is one and no parent of
// it is a symlink.
func (w *propWorld) entry(p string) (heldEntry, bool) {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if fi, err := os.Lstat(filepath.Join(w.wt, d)); err != nil || !fi.IsDir() {
			return heldEntry{}, false
		}
	}
	full := filepath.Join(w.wt, p)
	fi, err := os.Lstat(full)
	switch {
	case err != nil:
		return heldEntry{}, false
	case fi.Mode()&fs.ModeSymlink != 0:
		l, _ := os.Readlink(full)
		return heldEntry{kind: "link", sum: l}, true
	case fi.Mode().IsRegular():
		data, _ := os.ReadFile(full)
		return heldEntry{kind: "file", perm: fi.Mode().Perm(), sum: fmt.Sprintf("%x", sha256.Sum256(data))}, true
	}
	return heldEntry{}, false
}

// everything lists the whole tree but .git: type, bits and content of every
// file, symlink and directory.
func (w *propWorld) everything() map[string]string {
	out := map[string]string{}
	filepath.WalkDir(w.wt, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(w.wt, p)
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if rel == "." {
			return nil
		}
		fi, _ := os.Lstat(p)
		switch {
		case d.IsDir():
			out[rel] = fmt.Sprintf("dir %v", fi.Mode().Perm())
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link " + l
		default:
			data, _ := os.ReadFile(p)
			out[rel] = fmt.Sprintf("file %v %x", fi.Mode().Perm(), sha256.Sum256(data))
		}
		return nil
	})
	return out
}

var (
	propDirs    = []string{"", "a", "a/b", "c", "node_modules"}
	propNames   = []string{"f1", "f2", "x.log", "keep.log", ".env", "s"}
	propIgnores = []string{"*.log", "!keep.log", "c/", "f2", "a/b/"}
	// propExcludes are the patterns written into info/exclude and the
	// core.excludesFile: negations that win or lose by git's order of the
	// sources (a .gitignore over info/exclude over core.excludesFile),
	// directory patterns, and patterns for what a checkpoint held below a
	// path that is a symlink now (s/f1, */f1/).
	propExcludes = []string{"*.log", "!keep.log", "!x.log", "!*.log", "f1", "!f1", "s", "!s", "s/", "!s/",
		"c/", "!c/", "a/b/", "!a/b/", "/f2", "!f2", "a/**/f1", "!a/b/f1", "s/f1", "*/f1/", "x.log/"}
)

// excludeLines picks some of propExcludes in a random order (the last match
// in a source decides).
func (w *propWorld) excludeLines() []string {
	var lines []string
	for _, i := range w.r.Perm(len(propExcludes)) {
		if w.r.Intn(3) == 0 {
			lines = append(lines, propExcludes[i])
		}
	}
	return lines
}

func (w *propWorld) randomPath() string {
	d := propDirs[w.r.Intn(len(propDirs))]
	n := propNames[w.r.Intn(len(propNames))]
	if d == "" {
		return n
	}
	return d + "/" + n
}

// clearParents makes every parent of p a directory, removing files and
// symlinks in the way (as a user's tool would).
func (w *propWorld) clearParents(p string) {
	var parts []string
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		parts = append([]string{d}, parts...)
	}
	for _, d := range parts {
		full := filepath.Join(w.wt, d)
		if fi, err := os.Lstat(full); err == nil && !fi.IsDir() {
			os.Remove(full)
		}
		os.Mkdir(full, 0o755)
	}
}

func (w *propWorld) edit() string {
	p := w.randomPath()
	full := filepath.Join(w.wt, p)
	fi, err := os.Lstat(full)
	exists := err == nil
	switch w.r.Intn(14) {
	case 0, 1: // write new content
		w.clearParents(p)
		if exists && fi.IsDir() {
			os.RemoveAll(full)
		}
		os.Remove(full)
		os.WriteFile(full, []byte(strings.Repeat("x", w.r.Intn(5))+fmt.Sprint(w.r.Int())), 0o644)
		return "write " + p
	case 2: // same-size rewrite, mtime set back
		if exists && fi.Mode().IsRegular() {
			data, _ := os.ReadFile(full)
			for i := range data {
				data[i] = byte('a' + w.r.Intn(26))
			}
			os.WriteFile(full, data, fi.Mode().Perm())
			os.Chtimes(full, fi.ModTime(), fi.ModTime())
			return "rewrite " + p
		}
	case 3: // delete
		if exists {
			os.RemoveAll(full)
			return "delete " + p
		}
	case 4: // chmod
		if exists && fi.Mode().IsRegular() {
			perms := []os.FileMode{0o600, 0o644, 0o700, 0o755, 0o640}
			os.Chmod(full, perms[w.r.Intn(len(perms))])
			return "chmod " + p
		}
	case 5: // file -> directory
		if exists && !fi.IsDir() {
			os.Remove(full)
			os.Mkdir(full, 0o755)
			os.WriteFile(filepath.Join(full, "f1"), []byte("inner"), 0o644)
			return "to-dir " + p
		}
	case 6: // -> symlink
		if !exists || !fi.IsDir() {
			w.clearParents(p)
			os.Remove(full)
			os.Symlink([]string{"f1", "../x", "a"}[w.r.Intn(3)], full)
			return "to-link " + p
		}
	case 7: // the ignore rules
		var lines []string
		for _, pat := range propIgnores {
			if w.r.Intn(2) == 0 {
				lines = append(lines, pat)
			}
		}
		os.WriteFile(filepath.Join(w.wt, ".gitignore"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		return "gitignore " + strings.Join(lines, " ")
	case 8: // tracking
		if e, ok := w.entry(p); ok && e.kind == "file" && w.r.Intn(2) == 0 {
			w.git("add", "-f", "--", p)
			return "track " + p
		}
		w.git("rm", "-q", "-f", "--cached", "--ignore-unmatch", "--", p)
		return "untrack " + p
	case 9: // an empty directory
		d := propDirs[1+w.r.Intn(len(propDirs)-1)] + "/e"
		w.clearParents(d + "/x")
		return "mkdir " + d
	case 10: // a directory's bits
		d := propDirs[1+w.r.Intn(len(propDirs)-1)]
		if fi, err := os.Lstat(filepath.Join(w.wt, d)); err == nil && fi.IsDir() {
			os.Chmod(filepath.Join(w.wt, d), []os.FileMode{0o700, 0o750, 0o755}[w.r.Intn(3)])
			return "chmod-dir " + d
		}
	case 11: // the project's info/exclude
		lines := w.excludeLines()
		os.WriteFile(filepath.Join(w.wt, ".git", "info", "exclude"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		return "info/exclude " + strings.Join(lines, " ")
	case 12: // core.excludesFile: named or not, and its rules
		switch n := w.r.Intn(4); {
		case n == 0 && w.excludesSet:
			w.git("config", "--unset-all", "core.excludesFile")
			w.excludesSet = false
			return "excludesFile unset"
		case n == 0:
			w.git("config", "core.excludesFile", w.excludesFile)
			w.excludesSet = true
			return "excludesFile set"
		}
		lines := w.excludeLines()
		os.WriteFile(w.excludesFile, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		return "excludesFile " + strings.Join(lines, " ")
	case 13: // a directory -> symlink: what a checkpoint held below it is beyond one now
		d := propDirs[1+w.r.Intn(len(propDirs)-1)]
		if exists && fi.IsDir() {
			d = p
		}
		if fi, err := os.Lstat(filepath.Join(w.wt, d)); err == nil && fi.IsDir() {
			os.RemoveAll(filepath.Join(w.wt, d))
			os.Symlink([]string{"f1", "../x", "a"}[w.r.Intn(3)], filepath.Join(w.wt, d))
			return "dir-to-link " + d
		}
	}
	return ""
}

type propCheckpoint struct {
	id   string
	held map[string]heldEntry
}

// ruleRound runs one round, and returns how many paths beyond a symlink its
// restores met.
func ruleRound(t *testing.T, seed int64, steps int) int {
	ctx := context.Background()
	s, wt := newStore(t)
	w := &propWorld{t: t, r: rand.New(rand.NewSource(seed)), wt: wt, s: s,
		excludesFile: filepath.Join(t.TempDir(), "excludes")}
	w.git("init", "-q")
	os.WriteFile(filepath.Join(wt, ".git", "info", "exclude"), []byte("*.tmp\n"), 0o644)
	var cps []propCheckpoint
	var history []string
	fail := func(format string, a ...any) {
		t.Helper()
		t.Fatalf("seed %d after %q: %s", seed, history, fmt.Sprintf(format, a...))
	}
	for step := 0; step < steps; step++ {
		switch n := w.r.Intn(10); {
		case n < 6:
			if e := w.edit(); e != "" {
				history = append(history, e)
			}
		case n < 8 || len(cps) == 0:
			want := w.oracle()
			c, err := s.Create(ctx, CreateOptions{Reason: fmt.Sprintf("r%d", step), Source: "t", Keep: 1000})
			if err != nil {
				fail("create: %v", err)
			}
			history = append(history, "checkpoint")
			w.checkTree(c.Checkpoint, want, fail)
			cps = append(cps, propCheckpoint{c.Checkpoint.ID, want})
		default:
			target := cps[w.r.Intn(len(cps))]
			history = append(history, "restore "+target.id[:8])
			w.checkRestore(ctx, target, fail)
		}
	}
	t.Logf("restores met %d paths beyond a symlink, kept %d", w.beyondLink, w.beyondLinkKept)
	return w.beyondLink
}

// checkTree compares a checkpoint's tree with the oracle's listing.
func (w *propWorld) checkTree(c *Checkpoint, want map[string]heldEntry, fail func(string, ...any)) {
	entries, err := w.s.treeEntries(context.Background(), c.Tree, nil)
	if err != nil {
		fail("%v", err)
	}
	var ids, paths []string
	for p, e := range entries {
		if _, ok := want[p]; !ok {
			fail("checkpoint holds %s, which the rule does not", p)
		}
		ids = append(ids, entryID(e))
		paths = append(paths, p)
	}
	for p := range want {
		if _, ok := entries[p]; !ok {
			fail("checkpoint lacks %s, which the rule holds", p)
		}
	}
	blobs, err := w.s.readBlobs(context.Background(), ids)
	if err != nil {
		fail("%v", err)
	}
	for i, p := range paths {
		e := want[p]
		got := fmt.Sprintf("%x", sha256.Sum256(blobs[i]))
		if e.kind == "link" {
			got = string(blobs[i])
		}
		if got != e.sum {
			fail("checkpoint's %s differs from the file", p)
		}
		if e.kind == "file" && c.meta.filePerm(p, e.perm&0o100 != 0) != e.perm {
			fail("checkpoint records %s as %v, the file is %v", p, c.meta.filePerm(p, e.perm&0o100 != 0), e.perm)
		}
	}
}

// checkRestore restores target and checks the rule, then undoes it and checks
// that everything came back.
func (w *propWorld) checkRestore(ctx context.Context, target propCheckpoint, fail func(string, ...any)) {
	before := w.everything()
	heldBefore := w.oracle()
	rulesBefore, _ := os.ReadFile(filepath.Join(w.wt, ".gitignore"))
	exclude, _ := os.ReadFile(filepath.Join(w.wt, ".git", "info", "exclude"))
	excludes, _ := os.ReadFile(w.excludesFile)
	var beyond []string // (counted, to show that the rounds meet them)
	for p := range target.held {
		if w.s.linkAbove(p) {
			beyond = append(beyond, p)
		}
	}
	res, err := w.s.Restore(ctx, target.id, RestoreOptions{})
	if err != nil {
		fail("restore: %v", err)
	}
	kept := map[string]bool{}
	for _, k := range res.Kept {
		kept[k.Path] = true
	}
	for _, p := range beyond {
		w.beyondLink++
		if kept[p] {
			w.beyondLinkKept++
		}
	}
	after := w.everything()
	// Every path the checkpoint holds is back, unless the note names it.
	for p, e := range target.held {
		if kept[p] {
			continue
		}
		got, ok := w.entry(p)
		if !ok || got != e {
			fail("restore: %s is %+v, the checkpoint holds %+v (kept: %v)", p, got, e, res.Kept)
		}
	}
	// Nothing else that the rule holds now, unless the note names it.
	for p := range w.oracle() {
		if _, ok := target.held[p]; !ok && !kept[p] {
			if _, was := heldBefore[p]; was || before[p] != after[p] {
				fail("restore left %s, which the checkpoint does not hold, and did not say so", p)
			}
		}
	}
	// Files that were neither held before nor written by the restore
	// (ignored, excluded) are untouched.
	for p, v := range before {
		if strings.HasPrefix(v, "dir") {
			continue
		}
		if _, held := heldBefore[p]; held {
			continue
		}
		if _, written := target.held[p]; written && !kept[p] {
			continue
		}
		if underAnyHeldChange(p, res) {
			continue
		}
		if after[p] != v {
			fail("restore touched %s, which no checkpoint holds (%q -> %q)", p, v, after[p])
		}
	}
	// The undo gives back everything: files, bits, directories.
	if _, err := w.s.Restore(ctx, res.Safety.ID, RestoreOptions{}); err != nil {
		fail("undo: %v", err)
	}
	if after := w.everything(); diffMaps(before, after) != "" {
		var d []string
		for k, v := range before {
			if after[k] != v {
				d = append(d, fmt.Sprintf("%s: %q -> %q", k, v, after[k]))
			}
		}
		for k, v := range after {
			if _, ok := before[k]; !ok {
				d = append(d, fmt.Sprintf("%s: none -> %q", k, v))
			}
		}
		fail("undo not exact (.gitignore before %q, info/exclude %q, excludesFile %q (named: %v); restore wrote %v, removed %v, chmod %v, kept %v): %s",
			rulesBefore, exclude, excludes, w.excludesSet, res.Write, res.Remove, res.Chmod, res.Kept, strings.Join(d, "; "))
	}
}

// underAnyHeldChange reports whether p lies below a path the restore wrote or
// removed (a directory that became a file takes what was below it).
func underAnyHeldChange(p string, res *Restored) bool {
	for _, q := range append(append([]string{}, res.Write...), res.Remove...) {
		if strings.HasPrefix(p, q+"/") {
			return true
		}
	}
	return false
}
