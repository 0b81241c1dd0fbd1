package bench

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// W1: checkpoints of a large work tree, and issue 10's table of goals. A
// generated tree of 100,000 files (20,000 at quick scale, 1,000,000 at large)
// in nested directories, 0.5 to 8 KiB of text each, the same bytes on every
// run; then, each figure measured in interleaved rounds beside its baselines
// (every round runs each contender once, the first of the round rotating):
//
//	(a) the first checkpoint vs `git add -A && git commit` in a plain repository;
//	(b) a checkpoint after changing 100 files vs `git status --porcelain` on a
//	    plain repository with a warm index (100 files changed too), vs
//	    crucible's `git add -A && git commit` in its shadow repository
//	    (GIT_DIR/GIT_WORK_TREE as the crucible skill sets them), and vs the
//	    whole crucible checkpoint recipe (count files with find, git add -A,
//	    git commit, append a manifest row);
//	(c) a restore of a checkpoint that differs in 100 files vs the same git
//	    status (after changing 100 files) and vs `git checkout <commit> -- .`
//	    (crucible's restore);
//	(e) a checkpoint with nothing changed (the hook case) vs git status with
//	    nothing changed, and against 100 ms;
//	(d) the store's size after 50 checkpoints with 1% churn each, and after
//	    `prune --keep 10`, vs the .git of plain repositories holding the same
//	    snapshots, before and after `git gc`; and, on the 20,000-file store,
//	    the prune's time vs `git gc` on the plain repository of the same 50
//	    snapshots (each round restores both from an untimed copy), and whether
//	    the prune writes anything on stderr, piped or on a terminal (`script`).
//
// At full scale (b), (c) and (e) are measured again on a tree of 20,000 files
// for the 20k rows, and the prune is timed there; at quick scale the 100k rows
// are measured at 20,000 files and say so. At large scale the 1,000,000-file
// tree has (b) and (c) only; the 20k rows are measured as at full scale.
//
// Each tool works on its own copy of the tree, so one's index and objects never
// help another, and every preparation (changing files, resetting a store) is
// untimed.
func init() {
	register(workload{name: "w1-checkpoint", run: w1Checkpoint})
}

// w1Goals are issue 10's rows, in its order; the files column of each says the
// scale it was measured at.
func w1Goals() []*goalRow {
	return []*goalRow{
		{id: "create", workload: "create after 100 changed files / git status --porcelain", goal: 1.2, stretch: 1.0, goalText: "≤ 1.2x (stretch ≤ 1.0x)"},
		{id: "restore", workload: "restore of a checkpoint 100 files away / git status --porcelain", goal: 1.3, stretch: 1.1, goalText: "≤ 1.3x (stretch ≤ 1.1x)"},
		{id: "create-crucible", workload: "create after 100 changed / crucible's git add -A && git commit", goal: 0.6, goalText: "≤ 0.6x"},
		{id: "create-20k", workload: "create after 100 changed, 20k / git status --porcelain", goal: 1.5, goalText: "≤ 1.5x"},
		{id: "restore-20k", workload: "restore 100 files away, 20k / git status --porcelain", goal: 1.5, goalText: "≤ 1.5x"},
		{id: "hook", workload: "nothing changed, 20k (hook case) / git status --porcelain", goal: 1.2, goalText: "≤ 1.2x"},
		{id: "hook-abs", workload: "nothing changed, 20k (hook case) / 100 ms", goal: 1.0, goalText: "well under 100 ms"},
		{id: "first", workload: "first checkpoint / git add -A && git commit", goal: 0.8, goalText: "≤ 0.8x"},
		{id: "create-1m", workload: "create after 100 changed, 1M / git status --porcelain", goal: 1.3, goalText: "≤ 1.3x"},
		{id: "size-50", workload: "store size, 50 checkpoints at 1% churn / plain .git gc'd", goal: 1.1, goalText: "≤ 1.1x"},
		{id: "size-prune", workload: "store size after prune --keep 10 / plain .git (last 10) gc'd", goal: 1.1, goalText: "≤ 1.1x"},
		{id: "prune", workload: "prune --keep 10 on the 20k store / git gc, same history", goal: 1.0, goalText: "≤ 1.0x, progress shown"},
	}
}

func w1Checkpoint(b *bench) {
	declareGoals(w1Goals()...)
	n, files := 100_000, "100k"
	switch b.scale {
	case "quick":
		n, files = 20_000, "20k*"
	case "large":
		n, files = 1_000_000, "1M"
	}
	m := w1NewSet(b, "main", n, files, true)

	// (a) The first checkpoint.
	if b.scale == "large" {
		m.firstUntimed()
		b.note("large scale: the first checkpoint and commit are set up, not measured")
		goalSkip("first", "not measured at scale large (make bench)")
	} else {
		rw, git := m.first()
		b.goalTimes("first", files, rw, git)
	}
	m.crucibleInit()

	// (b) A checkpoint after changing 100 files.
	rw, status, bare := m.incremental()
	if b.scale == "large" {
		b.goalTimes("create-1m", files, rw, status)
		goalSkip("create", "not measured at scale large (make bench)")
		goalSkip("create-crucible", "not measured at scale large (make bench)")
	} else {
		b.goalTimes("create", files, rw, status)
		b.goalTimes("create-crucible", files, rw, bare)
		goalSkip("create-1m", "only under make bench-large")
	}

	// (c) A restore of a checkpoint 100 files away.
	rwR, statusR := m.restore()
	if b.scale == "large" {
		b.ratio(rwR, statusR, "(1M: no goal of its own)")
		goalSkip("restore", "not measured at scale large (make bench)")
	} else {
		b.goalTimes("restore", files, rwR, statusR)
	}

	// The 20k rows: the same rounds at quick scale, a tree of their own otherwise.
	s := m
	if b.scale == "quick" {
		b.note("quick scale: the 20k rows are the figures above")
		b.goalTimes("create-20k", "20k", rw, status)
		b.goalTimes("restore-20k", "20k", rwR, statusR)
	} else {
		s = w1NewSet(b, "20k", 20_000, "20k", false)
		s.firstUntimed()
		rw, status, _ := s.incremental()
		b.goalTimes("create-20k", "20k", rw, status)
		rwR, statusR := s.restore()
		b.goalTimes("restore-20k", "20k", rwR, statusR)
	}

	// (e) Nothing changed, at 20k: the hook case.
	rwH, statusH := s.hook()
	b.goalTimes("hook", "20k", rwH, statusH)
	b.goalFigures("hook-abs", "20k", round(rwH.median), "a budget of 100 ms", "100.0ms", rwH.median.Seconds()/0.1)

	// (d) Sizes (at the main scale) and the prune's time (at 20k).
	switch b.scale {
	case "quick":
		m.history(true, true)
	case "large":
		b.note("large scale: (d) store size is measured at full scale only")
		goalSkip("size-50", "not measured at scale large (make bench)")
		goalSkip("size-prune", "not measured at scale large (make bench)")
		s.history(false, true)
	default:
		m.history(true, false)
		s.history(false, true)
	}
}

// w1Set is one generated tree and its copies: rewind's, a plain repository's,
// and (with crucible) one for crucible's shadow repository.
type w1Set struct {
	b                      *bench
	n                      int
	files                  string // the files column of its goal rows
	root                   string
	treeR, treeG, treeC    string // treeC is "" without crucible
	store                  string // rewind's store for (a) to (e)
	rwEnv, gitEnv, crucEnv []string
	crucDir                string
	variant                int // the content variant the next change writes
}

func w1NewSet(b *bench, name string, n int, files string, crucible bool) *w1Set {
	home := filepath.Join(b.dir, "home")
	w1Mkdir(b, home)
	root := filepath.Join(b.dir, name)
	w1Mkdir(b, root)
	s := &w1Set{b: b, n: n, files: files, root: root,
		treeR: filepath.Join(root, "rewind-tree"),
		treeG: filepath.Join(root, "git-tree"),
		store: filepath.Join(root, "store-a"),
		// A plain git as a user runs it, minus the machine's config files, with a
		// fixed identity; rewind builds its own environment for its git anyway.
		// gc.auto=0: a commit's detached background gc would take the CPU from
		// the next contender of the round (and pack the plain repositories of
		// figure (d) midway, blurring the loose figure).
		gitEnv: []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "HOME=" + home, "LC_ALL=C",
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=gc.auto", "GIT_CONFIG_VALUE_0=0",
			"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
			"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com"},
		rwEnv: []string{"HOME=" + home, "REWIND_KEEP=1000"},
	}
	fmt.Printf("  tree %q\n", name)
	size := w1Generate(b, s.treeR, n)
	b.note("tree: %d files in %d directories, %.0f MB", n, w1Dirs(n), float64(size)/1e6)
	w1Run(b, b.dir, nil, "cp", "-a", s.treeR, s.treeG)
	if crucible {
		s.treeC = filepath.Join(root, "crucible-tree")
		w1Run(b, b.dir, nil, "cp", "-a", s.treeR, s.treeC)
	}
	return s
}

func (s *w1Set) create(reason string) []string {
	return []string{s.b.rewind, "checkpoint", "create", "--reason", reason, "--store", s.store, "-C", s.treeR}
}

// change returns a preparation that rewrites files idx of tree with a new variant.
func (s *w1Set) change(tree string, idx []int) func() {
	return func() { s.variant++; w1Change(s.b, tree, idx, s.variant) }
}

// first is figure (a); it leaves the first checkpoint and the first commit.
func (s *w1Set) first() (rw, git result) {
	b := s.b
	fmt.Printf("  (a) first checkpoint, %s files\n", s.files)
	rs := b.rounds(
		contender{label: "rewind checkpoint create (first)", prepare: func() { w1Remove(b, s.store) },
			dir: s.treeR, env: s.rwEnv, argv: s.create("first")},
		contender{label: "git add -A && git commit (plain repo)", prepare: func() {
			w1Remove(b, filepath.Join(s.treeG, ".git"))
			w1Run(b, s.treeG, s.gitEnv, "git", "init", "-q")
		}, dir: s.treeG, env: s.gitEnv, argv: []string{"sh", "-c", "git add -A && git commit -q -m first"}},
	)
	b.ratio(rs[0], rs[1], "≤ 0.8x")
	s.warm()
	return rs[0], rs[1]
}

// firstUntimed sets up the first checkpoint and the first commit, once,
// and says what each took (no row: one run, not interleaved rounds).
func (s *w1Set) firstUntimed() {
	start := time.Now()
	w1Run(s.b, s.treeR, s.rwEnv, s.create("first")...)
	rw := time.Since(start)
	start = time.Now()
	w1Run(s.b, s.treeG, s.gitEnv, "sh", "-c", "git init -q && git add -A && git commit -q -m first")
	s.b.note("set up once, %s files: rewind's first checkpoint %s, git init && git add -A && git commit %s", s.files, rw.Round(10*time.Millisecond), time.Since(start).Round(10*time.Millisecond))
	s.warm()
}

// warm lets status refresh and rewrite the plain repository's index.
func (s *w1Set) warm() { w1Run(s.b, s.treeG, s.gitEnv, "git", "status", "--porcelain") }

// crucibleInit makes crucible's shadow repository of its own copy, with its
// first checkpoint.
func (s *w1Set) crucibleInit() {
	b := s.b
	s.crucDir = filepath.Join(s.root, "crucible-shadow")
	s.crucEnv = append(append([]string{}, s.gitEnv...), "GIT_DIR="+filepath.Join(s.crucDir, "git"), "GIT_WORK_TREE="+s.treeC)
	w1Mkdir(b, s.crucDir)
	w1Run(b, s.treeC, s.crucEnv, "git", "init", "-q")
	w1Write(b, filepath.Join(s.crucDir, "git", "info", "exclude"),
		strings.Join([]string{"node_modules/", ".env", ".env.*", "__pycache__/", ".git/", "venv/", ".venv/", "dist/", "build/", ".next/", "*.pyc", ".DS_Store"}, "\n")+"\n")
	w1Run(b, s.treeC, s.crucEnv, "sh", "-c", "git add -A && git commit -q -m 'first | start | bench'")
	if s.n > 50_000 {
		b.note("crucible turns checkpoints off above 50,000 files; its recipe is timed here anyway")
	}
}

// incremental is figure (b): every round changes the same 100 files to new
// content in each copy. bare is crucible's git add -A && git commit (zero
// without crucible).
func (s *w1Set) incremental() (rw, status, bare result) {
	b := s.b
	fmt.Printf("  (b) checkpoint after changing 100 files, %s files\n", s.files)
	hundred := w1Spread(s.n, 100, 17)
	cs := []contender{
		{label: "rewind checkpoint create (100 files changed)", prepare: s.change(s.treeR, hundred),
			dir: s.treeR, env: s.rwEnv, argv: s.create("incremental")},
		{label: "git status --porcelain (plain repo, warm index)", prepare: s.change(s.treeG, hundred),
			dir: s.treeG, env: s.gitEnv, argv: []string{"git", "status", "--porcelain"}},
	}
	if s.treeC != "" {
		crucible := fmt.Sprintf(`n=$(find . -type f -not -path './node_modules/*' -not -path './.git/*' -not -path './__pycache__/*' -not -path './venv/*' -not -path './.venv/*' | wc -l)
ts=$(date -u '+%%Y-%%m-%%d %%H:%%M:%%S')
git add -A && git commit -q -m "incremental | $ts | bench" --allow-empty-message &&
echo "| $(git rev-parse --short=8 HEAD) | $ts | incremental | bench |" >> %s`, filepath.Join(s.crucDir, "checkpoint-manifest.md"))
		cs = append(cs,
			contender{label: "crucible: git add -A && git commit", prepare: s.change(s.treeC, hundred),
				dir: s.treeC, env: s.crucEnv, argv: []string{"sh", "-c", "git add -A && git commit -q -m 'incremental | t | bench'"}},
			contender{label: "crucible recipe: find | wc, git add -A, commit, row", prepare: s.change(s.treeC, hundred),
				dir: s.treeC, env: s.crucEnv, argv: []string{"sh", "-c", crucible}})
	}
	rs := b.rounds(cs...)
	b.ratio(rs[0], rs[1], "")
	if s.treeC != "" {
		b.ratio(rs[0], rs[2], "")
		b.ratio(rs[0], rs[3], "")
		return rs[0], rs[1], rs[2]
	}
	return rs[0], rs[1], result{}
}

// restore is figure (c): each round first changes 100 files, then restores the
// checkpoint taken before.
func (s *w1Set) restore() (rw, status result) {
	b := s.b
	fmt.Printf("  (c) restore of a checkpoint 100 files away, %s files\n", s.files)
	w1Run(b, s.treeR, s.rwEnv, s.create("restore-target")...)
	other := w1Spread(s.n, 100, 101)
	cs := []contender{
		{label: "rewind checkpoint restore --yes (100 files differ)", prepare: s.change(s.treeR, other), dir: s.treeR, env: s.rwEnv,
			argv: []string{b.rewind, "checkpoint", "restore", "restore-target", "--yes", "--store", s.store, "-C", s.treeR}},
		{label: "git status --porcelain (plain repo, 100 changed)", prepare: s.change(s.treeG, other),
			dir: s.treeG, env: s.gitEnv, argv: []string{"git", "status", "--porcelain"}},
	}
	if s.treeC != "" {
		w1Run(b, s.treeC, s.crucEnv, "sh", "-c", "git add -A && git commit -q --allow-empty -m 'restore-target | t | bench'")
		target := strings.TrimSpace(w1Run(b, s.treeC, s.crucEnv, "git", "rev-parse", "HEAD"))
		cs = append(cs, contender{label: "git checkout <commit> -- . (crucible restore)", prepare: s.change(s.treeC, other),
			dir: s.treeC, env: s.crucEnv, argv: []string{"git", "checkout", target, "--", "."}})
	}
	rs := b.rounds(cs...)
	b.ratio(rs[0], rs[1], "")
	if s.treeC != "" {
		b.ratio(rs[0], rs[2], "")
		b.note("(the checkout neither removes files the commit lacks nor takes a safety checkpoint; rewind's restore does both)")
	}
	return rs[0], rs[1]
}

// hook is figure (e): a checkpoint when nothing changed since the last one.
func (s *w1Set) hook() (rw, status result) {
	b := s.b
	fmt.Printf("  (e) checkpoint with nothing changed (the hook case), %s files\n", s.files)
	// The restores left rewind's tree as the target and the plain tree with 100
	// files changed: settle both, so that neither has anything to report.
	// The files the last restore wrote were changed in the second of the
	// settling checkpoint, so the store's index holds them without stat
	// data (git compares whole seconds) until a checkpoint after that second
	// hashes them: one is taken then, as warm refreshes the plain index.
	w1Run(b, s.treeR, s.rwEnv, s.create("settle")...)
	w1Run(b, s.treeG, s.gitEnv, "sh", "-c", "git add -A && git commit -q --allow-empty -m settle")
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second)))
	w1Run(b, s.treeR, s.rwEnv, s.create("settle")...)
	s.warm()
	// The hook as Claude Code runs it after a tool call: it reads the call
	// on stdin and records nothing when nothing changed.
	call := fmt.Sprintf(`{"session_id":"bench","hook_event_name":"PostToolUse","tool_name":"Bash","cwd":%q}`, s.treeR)
	rs := b.rounds(
		contender{label: "rewind hook post-tool-use (nothing changed)", dir: s.treeR, env: s.rwEnv,
			argv: []string{b.rewind, "hook", "post-tool-use", "--store", s.store, "-C", s.treeR}, stdin: call},
		contender{label: "git status --porcelain (nothing changed)", dir: s.treeG, env: s.gitEnv, argv: []string{"git", "status", "--porcelain"}},
	)
	b.ratio(rs[0], rs[1], "≤ 1.2x, and well under 100 ms")
	return rs[0], rs[1]
}

// history is figure (d): 50 checkpoints with 1% churn each, in a fresh store
// and in plain repositories holding the same snapshots (all 50, and the last
// 10 for comparison after the prune). sizes fills in the size rows; timePrune
// measures prune --keep 10 against git gc on the plain repository of the 50
// snapshots, each round starting from untimed copies of both.
func (s *w1Set) history(sizes, timePrune bool) {
	b, tree := s.b, s.treeR
	fmt.Printf("  (d) 50 checkpoints with 1%% churn each, %s files\n", s.files)
	store := filepath.Join(s.root, "store-d")
	plain50 := filepath.Join(s.root, "plain-50.git")
	plain10 := filepath.Join(s.root, "plain-10.git")
	env50 := append(append([]string{}, s.gitEnv...), "GIT_DIR="+plain50, "GIT_WORK_TREE="+tree)
	env10 := append(append([]string{}, s.gitEnv...), "GIT_DIR="+plain10, "GIT_WORK_TREE="+tree)
	w1Run(b, tree, env50, "git", "init", "-q")
	w1Run(b, tree, env10, "git", "init", "-q")
	commit := "git add -A && git -c gc.auto=0 commit -q -m snapshot"
	variant := 1_000_000
	for k := 0; k < 50; k++ {
		if k > 0 {
			variant++
			w1Change(b, tree, w1Spread(s.n, s.n/100, 7*k+3), variant)
		}
		w1Run(b, tree, s.rwEnv, b.rewind, "checkpoint", "create", "--reason", fmt.Sprintf("churn-%d", k), "--store", store, "-C", tree)
		w1Run(b, tree, env50, "sh", "-c", commit)
		if k >= 40 {
			w1Run(b, tree, env10, "sh", "-c", commit)
		}
	}
	rw50, loose50 := w1Size(store), w1Size(plain50)
	prune := []string{b.rewind, "checkpoint", "prune", "--keep", "10", "--yes", "--store", store, "-C", tree}
	gc := []string{"git", "gc", "--quiet", "--prune=now"}
	if timePrune {
		pristine, pristine50 := store+".pristine", plain50+".pristine"
		w1Run(b, b.dir, nil, "cp", "-a", store, pristine)
		w1Run(b, b.dir, nil, "cp", "-a", plain50, pristine50)
		reset := func(dst, src string) func() {
			return func() { w1Remove(b, dst); w1Run(b, b.dir, nil, "cp", "-a", src, dst) }
		}
		rs := b.rounds(
			contender{label: "rewind checkpoint prune --keep 10 (of 50)", prepare: reset(store, pristine), dir: tree, env: s.rwEnv, argv: prune},
			contender{label: "git gc (plain repo, the same 50 snapshots)", prepare: reset(plain50, pristine50), dir: tree, env: env50, argv: gc},
		)
		b.ratio(rs[0], rs[1], "≤ 1.0x, progress shown")
		// Progress: anything the prune writes on stderr, piped (the rounds) or on
		// a terminal (script gives it one; its stdout goes to /dev/null).
		piped := strings.TrimSpace(rs[0].stderr)
		tty, ttyNote := "", "no terminal check (script(1) not found)"
		if _, err := exec.LookPath("script"); err == nil {
			reset(store, pristine)()
			var q []string
			for _, a := range prune {
				q = append(q, w1Quote(a))
			}
			tty = strings.TrimSpace(w1Run(b, tree, s.rwEnv, "script", "-q", "-e", "-c", strings.Join(q, " ")+" >/dev/null", os.DevNull))
			ttyNote = fmt.Sprintf("on a terminal: %d bytes%s", len(tty), w1FirstLine(tty))
		}
		b.note("prune's stderr piped: %d bytes%s; %s", len(piped), w1FirstLine(piped), ttyNote)
		g := goalByID("prune")
		g.extra = "ok"
		if piped == "" && tty == "" {
			g.extra = "no progress on stderr"
		}
		b.goalTimes("prune", "20k", rs[0], rs[1])
		w1Remove(b, pristine)
		w1Remove(b, pristine50)
	} else {
		w1Run(b, tree, s.rwEnv, prune...)
		w1Run(b, tree, env50, gc...)
	}
	gc50 := w1Size(plain50)
	b.note("%-41s %8.1f MB", "rewind store, 50 checkpoints:", float64(rw50)/1e6)
	b.note("%-41s %8.1f MB loose, %8.1f MB after git gc", "plain .git, same 50 snapshots:", float64(loose50)/1e6, float64(gc50)/1e6)
	b.note("ratio store / plain .git: %.2fx loose, %.2fx gc'd", float64(rw50)/float64(loose50), float64(rw50)/float64(gc50))
	rw10, loose10 := w1Size(store), w1Size(plain10)
	w1Run(b, tree, env10, gc...)
	gc10 := w1Size(plain10)
	b.note("%-41s %8.1f MB", "rewind store after prune --keep 10:", float64(rw10)/1e6)
	b.note("%-41s %8.1f MB loose, %8.1f MB after git gc", "plain .git, the same last 10 snapshots:", float64(loose10)/1e6, float64(gc10)/1e6)
	b.note("ratio store / plain .git: %.2fx loose, %.2fx gc'd  goal ≤ 1.1x", float64(rw10)/float64(loose10), float64(rw10)/float64(gc10))
	b.note("(sizes are the bytes of every file below the directory, index included)")
	if sizes {
		mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
		b.goalFigures("size-50", s.files, mb(rw50), "plain .git, 50 snapshots, gc'd", mb(gc50), float64(rw50)/float64(gc50))
		b.goalFigures("size-prune", s.files, mb(rw10), "plain .git, last 10, gc'd", mb(gc10), float64(rw10)/float64(gc10))
	}
}

// w1Quote quotes a word for sh.
func w1Quote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// w1FirstLine is ` (first line: "...")` of out, or "" when out is empty.
func w1FirstLine(out string) string {
	if out == "" {
		return ""
	}
	line, _, _ := strings.Cut(out, "\n")
	if len(line) > 80 {
		line = line[:80] + "..."
	}
	return fmt.Sprintf(" (first line: %q)", line)
}

// w1Corpus is the text files are cut from: words drawn from a small
// vocabulary, so files compress about as well as source code does.
var w1Corpus = func() string {
	words := strings.Fields("func return if else for range var const type struct package import error nil " +
		"string int byte map slice append len make copy go defer select case switch default break continue " +
		"the checkpoint store tree index commit restore file path mode hash rewind value result context")
	r := rand.New(rand.NewSource(1))
	var sb strings.Builder
	for sb.Len() < 1<<17 {
		line := 1 + r.Intn(12)
		sb.WriteString(strings.Repeat("\t", r.Intn(3)))
		for i := 0; i < line; i++ {
			sb.WriteString(words[r.Intn(len(words))])
			sb.WriteByte(' ')
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}()

// w1Content is file i's content in variant v (0: as generated): a header naming
// both, then 0.5 to 8 KiB of corpus text from a place chosen by i and v.
func w1Content(i, v int) []byte {
	r := rand.New(rand.NewSource(int64(i)*1_000_003 + int64(v)))
	size := 512 + r.Intn(8192-512+1)
	off := r.Intn(len(w1Corpus) - 8192)
	head := fmt.Sprintf("// file %d, variant %d\n", i, v)
	return []byte(head + w1Corpus[off:off+size-len(head)])
}

// w1Path is file i's path: 100 files to a directory, ten directories to a parent.
func w1Path(i int) string {
	return fmt.Sprintf("p%04d/d%d/f%07d.txt", i/1000, (i/100)%10, i)
}

func w1Dirs(n int) int { return (n + 99) / 100 }

// w1Generate writes the n files under root and returns their total size.
func w1Generate(b *bench, root string, n int) int64 {
	var total int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed error
	next := make(chan int, 64)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sum int64
			for d := range next { // one directory of 100 files at a time
				dir := filepath.Join(root, filepath.Dir(w1Path(d*100)))
				err := os.MkdirAll(dir, 0o755)
				for i := d * 100; i < (d+1)*100 && i < n && err == nil; i++ {
					data := w1Content(i, 0)
					err = os.WriteFile(filepath.Join(root, w1Path(i)), data, 0o644)
					sum += int64(len(data))
				}
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
			mu.Lock()
			total += sum
			mu.Unlock()
		}()
	}
	for d := 0; d < w1Dirs(n); d++ {
		next <- d
	}
	close(next)
	wg.Wait()
	if failed != nil {
		b.t.Fatal(failed)
	}
	return total
}

// w1Spread picks k file numbers out of n, evenly spread, shifted by seed.
func w1Spread(n, k, seed int) []int {
	out := make([]int, k)
	for j := range out {
		out[j] = (j*(n/k) + seed*31) % n
	}
	return out
}

// w1Change rewrites the files numbered idx with their variant v.
func w1Change(b *bench, root string, idx []int, v int) {
	for _, i := range idx {
		if err := os.WriteFile(filepath.Join(root, w1Path(i)), w1Content(i, v), 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
}

// w1Run runs argv once, untimed, with the caller's environment plus env, and
// returns its stdout; a failure ends the workload.
func w1Run(b *bench, dir string, env []string, argv ...string) string {
	b.t.Helper()
	c := b.cmd(dir, env, argv...)
	var stderr strings.Builder
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		b.t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, stderr.String())
	}
	return string(out)
}

func w1Remove(b *bench, path string) {
	if err := os.RemoveAll(path); err != nil {
		b.t.Fatal(err)
	}
}

func w1Mkdir(b *bench, path string) {
	if err := os.MkdirAll(path, 0o755); err != nil {
		b.t.Fatal(err)
	}
}

func w1Write(b *bench, path, content string) {
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// w1Size is the bytes of every regular file below dir.
func w1Size(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				total += fi.Size()
			}
		}
		return nil
	})
	return total
}
