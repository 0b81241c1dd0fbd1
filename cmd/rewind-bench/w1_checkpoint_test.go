package bench

import (
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// W1: checkpoints of a large work tree. A generated tree of 100,000 files
// (20,000 at quick scale, 1,000,000 at large) in nested directories, 0.5 to
// 8 KiB of text each, the same bytes on every run; then, each figure beside its
// baselines measured in the same run:
//
//	(a) the first checkpoint vs `git add -A && git commit` in a plain repository;
//	(b) a checkpoint after changing 100 files vs `git status --porcelain` on a
//	    plain repository with a warm index, and vs the crucible checkpoint
//	    recipe (count files with find, git add -A, git commit, append a manifest
//	    row; GIT_DIR/GIT_WORK_TREE as the crucible skill sets them);
//	(c) a restore of a checkpoint that differs in 100 files vs the same git
//	    status floor and vs `git checkout <commit> -- .` (crucible's restore);
//	(d) the store's size after 50 checkpoints with 1% churn each, and after
//	    `prune --keep 10`, vs the .git of plain repositories holding the same
//	    snapshots, before and after `git gc`.
//
// Each tool works on its own copy of the tree, so one's index and objects never
// help another, and every preparation (changing files, resetting a store) is
// untimed. At large scale only (b) and (c) are measured.
func init() {
	register(workload{name: "w1-checkpoint", run: w1Checkpoint})
}

func w1Checkpoint(b *bench) {
	n := 100_000
	switch b.scale {
	case "quick":
		n = 20_000
	case "large":
		n = 1_000_000
	}
	home := filepath.Join(b.dir, "home")
	w1Mkdir(b, home)
	// A plain git as a user runs it, minus the machine's config files, with a
	// fixed identity; rewind builds its own environment for its git anyway.
	gitEnv := []string{"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=" + os.DevNull, "HOME=" + home, "LC_ALL=C",
		"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
		"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com"}
	rwEnv := []string{"HOME=" + home, "REWIND_KEEP=1000"}

	treeR := filepath.Join(b.dir, "rewind-tree") // rewind's copy
	treeG := filepath.Join(b.dir, "git-tree")    // the plain repository's
	treeC := filepath.Join(b.dir, "crucible-tree")
	size := w1Generate(b, treeR, n)
	b.note("tree: %d files in %d directories, %.0f MB", n, w1Dirs(n), float64(size)/1e6)
	w1Run(b, b.dir, nil, "cp", "-a", treeR, treeG)
	w1Run(b, b.dir, nil, "cp", "-a", treeR, treeC)

	storeA := filepath.Join(b.dir, "store-a")
	rewindCreate := func(store, reason string) []string {
		return []string{b.rewind, "checkpoint", "create", "--reason", reason, "--store", store, "-C", treeR}
	}

	// (a) The first checkpoint.
	fmt.Println("  (a) first checkpoint")
	if b.scale == "large" {
		w1Run(b, treeR, rwEnv, rewindCreate(storeA, "first")...)
		w1Run(b, treeG, gitEnv, "sh", "-c", "git init -q && git add -A && git commit -q -m first")
		b.note("large scale: the first checkpoint and commit are set up, not measured")
	} else {
		rwA := b.measure("rewind checkpoint create (first)", func() { w1Remove(b, storeA) },
			treeR, rwEnv, rewindCreate(storeA, "first")...)
		gitA := b.measure("git add -A && git commit (plain repo)", func() {
			w1Remove(b, filepath.Join(treeG, ".git"))
			w1Run(b, treeG, gitEnv, "git", "init", "-q")
		}, treeG, gitEnv, "sh", "-c", "git add -A && git commit -q -m first")
		b.ratio(rwA, gitA, "≤ 1.0x, stretch ≤ 0.6x")
	}
	// Warm the plain repository's index: status refreshes and rewrites it.
	w1Run(b, treeG, gitEnv, "git", "status", "--porcelain")

	// The crucible shadow repository of its own copy, with its first checkpoint.
	crucDir := filepath.Join(b.dir, "crucible-shadow")
	crucEnv := append(append([]string{}, gitEnv...), "GIT_DIR="+filepath.Join(crucDir, "git"), "GIT_WORK_TREE="+treeC)
	w1Mkdir(b, crucDir)
	w1Run(b, treeC, crucEnv, "git", "init", "-q")
	w1Write(b, filepath.Join(crucDir, "git", "info", "exclude"),
		strings.Join([]string{"node_modules/", ".env", ".env.*", "__pycache__/", ".git/", "venv/", ".venv/", "dist/", "build/", ".next/", "*.pyc", ".DS_Store"}, "\n")+"\n")
	w1Run(b, treeC, crucEnv, "sh", "-c", "git add -A && git commit -q -m 'first | start | bench'")
	crucible := fmt.Sprintf(`n=$(find . -type f -not -path './node_modules/*' -not -path './.git/*' -not -path './__pycache__/*' -not -path './venv/*' -not -path './.venv/*' | wc -l)
ts=$(date -u '+%%Y-%%m-%%d %%H:%%M:%%S')
git add -A && git commit -q -m "incremental | $ts | bench" --allow-empty-message &&
echo "| $(git rev-parse --short=8 HEAD) | $ts | incremental | bench |" >> %s`, filepath.Join(crucDir, "checkpoint-manifest.md"))
	if n > 50_000 {
		b.note("crucible turns checkpoints off above 50,000 files; its recipe is timed here anyway")
	}

	// (b) A checkpoint after changing 100 files. Every run changes the same 100
	// files to new content.
	fmt.Println("  (b) checkpoint after changing 100 files")
	hundred := w1Spread(n, 100, 17)
	variant := 0
	change := func(tree string) func() {
		return func() { variant++; w1Change(b, tree, hundred, variant) }
	}
	rwB := b.measure("rewind checkpoint create (100 files changed)", change(treeR), treeR, rwEnv, rewindCreate(storeA, "incremental")...)
	status := b.measure("git status --porcelain (plain repo, warm index)", change(treeG), treeG, gitEnv, "git", "status", "--porcelain")
	crucB := b.measure("crucible recipe: find | wc, git add -A, commit, row", change(treeC), treeC, crucEnv, "sh", "-c", crucible)
	b.ratio(rwB, status, "≤ 1.5x, stretch ≤ 1.2x")
	b.ratio(rwB, crucB, "")

	// (c) A restore of a checkpoint that differs in 100 files: each run first
	// changes 100 files, then restores the checkpoint taken before.
	fmt.Println("  (c) restore of a checkpoint 100 files away")
	w1Run(b, treeR, rwEnv, rewindCreate(storeA, "restore-target")...)
	w1Run(b, treeC, crucEnv, "sh", "-c", "git add -A && git commit -q --allow-empty -m 'restore-target | t | bench'")
	crucTarget := strings.TrimSpace(w1Run(b, treeC, crucEnv, "git", "rev-parse", "HEAD"))
	other := w1Spread(n, 100, 101)
	changeOther := func(tree string) func() {
		return func() { variant++; w1Change(b, tree, other, variant) }
	}
	rwC := b.measure("rewind checkpoint restore --yes (100 files differ)", changeOther(treeR), treeR, rwEnv,
		b.rewind, "checkpoint", "restore", "restore-target", "--yes", "--store", storeA, "-C", treeR)
	crucC := b.measure("git checkout <commit> -- . (crucible restore)", changeOther(treeC), treeC, crucEnv, "git", "checkout", crucTarget, "--", ".")
	b.ratio(rwC, status, "≤ 1.5x")
	b.ratio(rwC, crucC, "")
	b.note("(the checkout neither removes files the commit lacks nor takes a safety checkpoint; rewind's restore does both)")

	if b.scale == "large" {
		b.note("large scale: (d) store size is measured at full scale only")
		return
	}
	w1Sizes(b, n, treeR, rwEnv, gitEnv)
}

// w1Sizes is figure (d): 50 checkpoints with 1% churn each, in a fresh store
// and in plain repositories holding the same snapshots (all 50, and the last
// 10 for comparison after the prune).
func w1Sizes(b *bench, n int, tree string, rwEnv, gitEnv []string) {
	fmt.Println("  (d) store size after 50 checkpoints with 1% churn each")
	store := filepath.Join(b.dir, "store-d")
	plain50 := filepath.Join(b.dir, "plain-50.git")
	plain10 := filepath.Join(b.dir, "plain-10.git")
	env50 := append(append([]string{}, gitEnv...), "GIT_DIR="+plain50, "GIT_WORK_TREE="+tree)
	env10 := append(append([]string{}, gitEnv...), "GIT_DIR="+plain10, "GIT_WORK_TREE="+tree)
	w1Run(b, tree, env50, "git", "init", "-q")
	w1Run(b, tree, env10, "git", "init", "-q")
	// gc.auto=0: a background gc would pack the plain repositories midway and
	// blur the loose figure.
	commit := "git add -A && git -c gc.auto=0 commit -q -m snapshot"
	variant := 1_000_000
	for k := 0; k < 50; k++ {
		if k > 0 {
			variant++
			w1Change(b, tree, w1Spread(n, n/100, 7*k+3), variant)
		}
		w1Run(b, tree, rwEnv, b.rewind, "checkpoint", "create", "--reason", fmt.Sprintf("churn-%d", k), "--store", store, "-C", tree)
		w1Run(b, tree, env50, "sh", "-c", commit)
		if k >= 40 {
			w1Run(b, tree, env10, "sh", "-c", commit)
		}
	}
	// compare prints the store's size beside the plain repository's, loose and
	// after git gc.
	compare := func(storeLabel, plainLabel, plain string, env []string, goal string) {
		rw, loose := w1Size(store), w1Size(plain)
		w1Run(b, tree, env, "git", "gc", "--quiet", "--prune=now")
		gc := w1Size(plain)
		b.note("%-39s %8.1f MB", storeLabel, float64(rw)/1e6)
		b.note("%-39s %8.1f MB loose, %8.1f MB after git gc", plainLabel, float64(loose)/1e6, float64(gc)/1e6)
		b.note("ratio store / plain .git: %.2fx loose, %.2fx gc'd%s", float64(rw)/float64(loose), float64(rw)/float64(gc), goal)
	}
	compare("rewind store, 50 checkpoints:", "plain .git, same 50 snapshots:", plain50, env50, "")
	w1Run(b, tree, rwEnv, b.rewind, "checkpoint", "prune", "--keep", "10", "--yes", "--store", store, "-C", tree)
	compare("rewind store after prune --keep 10:", "plain .git, the same last 10 snapshots:", plain10, env10, "  goal ≤ 1.1x")
	b.note("(sizes are the bytes of every file below the directory, index included)")
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
