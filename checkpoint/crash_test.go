package checkpoint

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestCrash kills the rewind binary with SIGKILL at random instants of create,
// restore and prune, and checks after every kill that the next command works
// without manual repair (finishing an interrupted restore the way its hint
// says), that every listed checkpoint still restores byte-exactly, and that the
// store passes git fsck. A quick count of rounds runs in `go test`; REWIND_SOAK=1
// (`make soak`) runs hundreds.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("the crash test builds and runs the rewind binary")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git not found: rewind and its tests need git on PATH")
	}
	rounds := 25
	if os.Getenv("REWIND_SOAK") == "1" {
		rounds = 300
	}
	seed := time.Now().UnixNano()
	t.Logf("seed %d, %d rounds", seed, rounds)
	c := newCrasher(t, rand.New(rand.NewSource(seed)))
	c.makeTree(300)

	// The first checkpoint (and how long a create takes), then one of each
	// command for the typical durations the kills are spread over.
	c.mustCreate("base")
	c.mutate()
	c.typical["create"] = c.mustCreate("second")
	c.mutate()
	c.mustCreate("third")
	c.typical["restore"] = c.mustRestore(c.ids()[0])
	c.typical["prune"] = c.mustRun("checkpoint", "prune", "--keep", "20", "--yes")
	t.Logf("typical durations: create %s, restore %s, prune %s", c.typical["create"], c.typical["restore"], c.typical["prune"])

	for n := 1; n <= rounds; n++ {
		if c.rng.Intn(2) == 0 {
			c.mutate()
		}
		var args []string
		var op string
		switch k := c.rng.Intn(10); {
		case k < 5:
			op, args = "create", []string{"checkpoint", "create", "--reason", fmt.Sprintf("r%d", n)}
		case k < 8:
			ids := c.restorable(c.last)
			op, args = "restore", []string{"checkpoint", "restore", ids[c.rng.Intn(len(ids))], "--yes"}
		default:
			op, args = "prune", []string{"checkpoint", "prune", "--keep", fmt.Sprint(3 + c.rng.Intn(15)), "--yes"}
		}
		delay := time.Duration(c.rng.Int63n(int64(c.typical[op]) + 1))
		killed := c.runKilled(args, delay)
		t.Logf("round %d: %s killed after %s: %v", n, strings.Join(args[1:], " "), delay.Round(time.Millisecond), killed)

		c.recover(fmt.Sprintf("after-r%d", n))
		c.fsck()
		// A sample every round (a random one, and the newest but one, which the
		// killed command may have produced); all of them at the end.
		ids := c.restorable(c.last)
		if n%2 == 0 && len(ids) > 1 {
			c.verify(ids[len(ids)-2])
		} else {
			c.verify(ids[c.rng.Intn(len(ids))])
		}
	}
	ids := c.restorable(c.ids())
	for _, id := range ids {
		c.verify(id)
	}
	c.fsck()
	t.Logf("%d rounds; %d kills landed mid-command; %d checkpoints verified at the end; %d interrupted restores finished; "+
		"%d times git children outlived the killed rewind; %d checkpoints skipped as duplicate commits; %d fsck runs found only a stale commit-graph",
		rounds, c.landed, len(ids), c.finished, c.lingering, len(c.dupSkipped), c.staleGraph)
	t.Logf("time spent: %v; waiting for killed rewinds' git children: %s", c.spent, c.waited.Round(time.Millisecond))
	for what, n := range c.knownBugs {
		t.Logf("known bug seen %d times: %s", n, what)
	}
}

type crasher struct {
	t        *testing.T
	rng      *rand.Rand
	bin      string
	wt       string
	store    string
	home     string
	typical  map[string]time.Duration
	expected map[string]map[string]entry // commit id -> the work tree listing it must restore
	files    []string                    // regular files the mutations pick from
	next     int                         // counter for new file names
	landed   int
	finished int
	// lingering counts kills after which a git child of the killed rewind was
	// still alive once rewind itself had been reaped.
	lingering int
	// dupSkipped holds commit ids two refs share (see restorable).
	dupSkipped map[string]bool
	// staleGraph counts fsck runs that failed only on a stale commit-graph (see
	// fsck).
	staleGraph int
	last       []string // the checkpoints the last list showed
	knownBugs  map[string]int
	waited     time.Duration // waiting for git children of killed rewinds
	spent      map[string]time.Duration
}

// restorable lists each commit once: two checkpoints with the same tree,
// reason, source and second share one commit, and one restore checks both.
func (c *crasher) restorable(ids []string) []string {
	seen := map[string]int{}
	for _, id := range ids {
		seen[id]++
	}
	var out []string
	for _, id := range ids {
		if seen[id] > 1 {
			// Two refs, one commit (same tree, reason and second): one restore
			// checks both.
			if c.dupSkipped[id] {
				continue
			}
			c.dupSkipped[id] = true
		}
		out = append(out, id)
	}
	if len(out) == 0 {
		c.t.Fatal("no restorable checkpoint")
	}
	return out
}

// entry is one path of a listing: git's mode, and sha256 of the content or the
// symlink target; blob is git's object id of the same bytes.
type entry struct {
	mode, sum, link, blob string
}

func newCrasher(t *testing.T, rng *rand.Rand) *crasher {
	tmp := t.TempDir()
	tmp, _ = filepath.EvalSymlinks(tmp)
	bin := filepath.Join(tmp, "rewind")
	build := exec.Command("go", "build", "-o", bin, "github.com/rewind-cli/rewind/cmd/rewind")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	c := &crasher{t: t, rng: rng, bin: bin, wt: filepath.Join(tmp, "wt"), store: filepath.Join(tmp, "store"),
		home: filepath.Join(tmp, "home"), typical: map[string]time.Duration{}, expected: map[string]map[string]entry{},
		dupSkipped: map[string]bool{}, knownBugs: map[string]int{}, spent: map[string]time.Duration{}}
	for _, d := range []string{c.wt, c.home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// makeTree writes n files in nested directories, an executable, a symlink, and
// an excluded node_modules/ file no restore may touch.
func (c *crasher) makeTree(n int) {
	for i := 0; i < n; i++ {
		c.newFile(fmt.Sprintf("d%d/e%d/f%03d.txt", i%7, i%5, i))
	}
	c.write("bin/run.sh", "#!/bin/sh\necho run\n", 0o755)
	c.files = append(c.files, "bin/run.sh")
	if err := os.Symlink("../d0/e0/f000.txt", filepath.Join(c.wt, "bin", "link")); err != nil {
		c.t.Fatal(err)
	}
	c.write("node_modules/dep/index.js", "module.exports = 1\n", 0o644)
}

func (c *crasher) write(rel, content string, mode os.FileMode) {
	full := filepath.Join(c.wt, rel)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		c.t.Fatal(err)
	}
	os.Remove(full)
	if err := os.WriteFile(full, []byte(content), mode); err != nil {
		c.t.Fatal(err)
	}
}

func (c *crasher) content() string {
	return strings.Repeat(fmt.Sprintf("line %d of some text\n", c.rng.Int63()), 1+c.rng.Intn(200))
}

func (c *crasher) newFile(rel string) {
	c.write(rel, c.content(), 0o644)
	c.files = append(c.files, rel)
}

// mutate changes a few files: rewrites, new files, deletions, mode flips, a
// file replaced by a symlink, and now and then a directory replaced by a file.
func (c *crasher) mutate() {
	// Restores change the tree behind the test's back: pick from what is there.
	c.files = c.files[:0]
	for p, e := range c.listing() {
		if e.mode != "120000" {
			c.files = append(c.files, p)
		}
	}
	sort.Strings(c.files)
	for i := 0; i < 1+c.rng.Intn(12); i++ {
		if len(c.files) < 20 {
			c.next++
			c.newFile(fmt.Sprintf("new/n%d.txt", c.next))
			continue
		}
		k := c.rng.Intn(len(c.files))
		rel := c.files[k]
		full := filepath.Join(c.wt, rel)
		if _, err := os.Lstat(full); err != nil {
			c.files = append(c.files[:k], c.files[k+1:]...)
			continue
		}
		switch op := c.rng.Intn(10); {
		case op < 4:
			c.write(rel, c.content(), 0o644)
		case op < 6:
			c.next++
			c.newFile(fmt.Sprintf("%s/n%d.txt", filepath.Dir(rel), c.next))
		case op < 7:
			os.Remove(full)
			c.files = append(c.files[:k], c.files[k+1:]...)
		case op < 8:
			fi, _ := os.Lstat(full)
			os.Chmod(full, fi.Mode().Perm()^0o111)
		case op < 9:
			os.Remove(full)
			os.Symlink(fmt.Sprintf("target-%d", c.rng.Intn(100)), full)
			c.files = append(c.files[:k], c.files[k+1:]...)
		default:
			// The file's directory becomes a file (or, when it already is one, stays).
			dir := filepath.Dir(rel)
			if dir == "." || strings.Count(dir, "/") < 1 {
				continue
			}
			os.RemoveAll(filepath.Join(c.wt, dir))
			var kept []string
			for _, f := range c.files {
				if !strings.HasPrefix(f, dir+"/") {
					kept = append(kept, f)
				}
			}
			c.files = kept
			c.write(dir, c.content(), 0o644)
			c.files = append(c.files, dir)
		}
	}
}

// listing is the work tree as a checkpoint holds it: every regular file and
// symlink outside node_modules (which the default excludes leave out).
func (c *crasher) listing() map[string]entry {
	defer c.timed("listing")()
	out := map[string]entry{}
	err := filepath.WalkDir(c.wt, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(c.wt, p)
		if d.IsDir() {
			if rel == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var data []byte
		e := entry{}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, err := os.Readlink(p)
			if err != nil {
				return err
			}
			e.mode, e.link, data = "120000", l, []byte(l)
		case fi.Mode().IsRegular():
			e.mode = "100644"
			if fi.Mode()&0o100 != 0 {
				e.mode = "100755"
			}
			if data, err = os.ReadFile(p); err != nil {
				return err
			}
		default:
			return nil
		}
		sum := sha256.Sum256(data)
		e.sum = hex.EncodeToString(sum[:])
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", len(data))
		h.Write(data)
		e.blob = hex.EncodeToString(h.Sum(nil))
		out[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

func (c *crasher) cmd(args ...string) *exec.Cmd {
	full := append([]string{"--store", c.store, "-C", c.wt}, args...)
	cmd := exec.Command(c.bin, full...)
	cmd.Env = append(os.Environ(), "HOME="+c.home, "REWIND_KEEP=15", "TZ=UTC", "LC_ALL=C")
	cmd.Dir = c.wt
	// Its own process group, so the test can wait for git children to die too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// ids lists the checkpoints' commit ids, oldest first.
func (c *crasher) ids() []string {
	defer c.timed("ids")()
	out, all, code := c.output(c.cmd("--json", "checkpoint", "list"))
	if code != 0 {
		c.t.Fatalf("checkpoint list: exit %d\n%s", code, all)
	}
	var l struct {
		Checkpoints []struct{ ID string } `json:"checkpoints"`
	}
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		c.t.Fatalf("checkpoint list --json: %v\n%s", err, out)
	}
	var ids []string
	for i := len(l.Checkpoints) - 1; i >= 0; i-- {
		ids = append(ids, l.Checkpoints[i].ID)
	}
	if len(ids) == 0 {
		c.t.Fatal("no checkpoints listed")
	}
	c.last = ids
	return ids
}

// output runs cmd and returns its stdout, stdout and stderr together, and its
// exit code.
func (c *crasher) output(cmd *exec.Cmd) (stdout, all string, code int) {
	var out, merged bytes.Buffer
	// exec copies stdout and stderr in two goroutines, both into merged.
	both := &lockedWriter{w: &merged}
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, both), both
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatal(err)
	}
	return out.String(), merged.String(), code
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// track runs a command that may record checkpoints and maps each new one to the
// listing of the work tree before the command: neither a create nor a restore's
// safety checkpoint sees anything else, whether or not the command completed.
func (c *crasher) track(run func()) {
	before := c.listing()
	run()
	for _, id := range c.ids() {
		if _, ok := c.expected[id]; !ok {
			c.expected[id] = before
		}
	}
}

// mustRun runs a rewind command that must succeed, and returns how long it took.
func (c *crasher) mustRun(args ...string) time.Duration {
	c.t.Helper()
	var d time.Duration
	c.track(func() {
		for attempt := 0; ; attempt++ {
			start := time.Now()
			_, out, code := c.output(c.cmd(args...))
			d = time.Since(start)
			if code == 0 {
				return
			}
			if attempt > 3 || !c.repairStale(out) {
				c.t.Fatalf("rewind %s: exit %d\n%s", strings.Join(args, " "), code, out)
			}
		}
	})
	return d
}

func (c *crasher) mustCreate(reason string) time.Duration {
	c.t.Helper()
	return c.mustRun("checkpoint", "create", "--reason", reason)
}

func (c *crasher) mustRestore(id string) time.Duration {
	c.t.Helper()
	return c.mustRun("checkpoint", "restore", id, "--yes")
}

// staleFile matches git refusing to work because a lock or temporary file a
// killed git left behind is in the way.
var staleFile = regexp.MustCompile(`(?:Unable to create '|unable to create file )(/\S+?(?:\.lock|\.new))'?: File exists`)

// repairStale recognises a command that failed on a file a killed git left in
// the store (packed-refs.new, a lock under git/). The store lock clears those
// now, so this is a failure (see known); with REWIND_CRASH_LENIENT=1 the file
// is removed, as a user would, and the round goes on.
func (c *crasher) repairStale(out string) bool {
	m := staleFile.FindStringSubmatch(out)
	if m == nil || !strings.HasPrefix(m[1], c.store+"/") {
		return false
	}
	rel, _ := filepath.Rel(c.store, m[1])
	c.known(fmt.Sprintf("a killed git left %s and the next command failed on it (the store lock does not clear it)", rel))
	return os.Remove(m[1]) == nil
}

// runKilled starts the command and sends it SIGKILL after delay (unless it is
// done by then); it reports whether the kill landed.
func (c *crasher) runKilled(args []string, delay time.Duration) bool {
	defer c.timed("runKilled")()
	landed := false
	c.track(func() {
		cmd := c.cmd(args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			c.t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil && !c.repairStale(out.String()) {
				c.t.Fatalf("%s (not killed): %v\n%s", strings.Join(args, " "), err, out.String())
			}
			return
		case <-time.After(delay):
		}
		cmd.Process.Signal(syscall.SIGKILL)
		err := <-done
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signaled() {
			landed = true
			c.landed++
		}
		// rewind's git children get SIGKILL from the kernel when it dies; wait
		// until they are gone.
		pgid := cmd.Process.Pid
		defer func(start time.Time) { c.waited += time.Since(start) }(time.Now())
		for i := 0; groupAlive(pgid); i++ {
			if i == 0 {
				c.lingering++
			}
			if i > 500 {
				c.t.Fatalf("git children of the killed rewind still alive after 5 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	return landed
}

// groupAlive reports whether a process of group pgid is still running. Zombies
// do not count: in a container whose init does not reap promptly, a killed
// child stays a zombie for seconds, harmlessly.
func groupAlive(pgid int) bool {
	if syscall.Kill(-pgid, 0) != nil {
		return false
	}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	if len(stats) == 0 {
		return true // no /proc: trust kill(2)
	}
	for _, p := range stats {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == fmt.Sprint(pgid) {
			return true
		}
	}
	return false
}

var finishHint = regexp.MustCompile(`finish it: rewind(?: -C \S+)?(?: --store \S+)? checkpoint restore (\S+) --yes`)

// recover runs the next command, a create; when an interrupted restore makes
// it refuse, runs the restore its hint names, checks the result, and creates.
func (c *crasher) recover(reason string) {
	defer c.timed("recover")()
	c.t.Helper()
	var out string
	var code int
	c.track(func() { _, out, code = c.output(c.cmd("checkpoint", "create", "--reason", reason)) })
	if code == 0 {
		return
	}
	if c.repairStale(out) {
		c.mustCreate(reason)
		return
	}
	m := finishHint.FindStringSubmatch(out)
	if code != 1 || m == nil {
		c.t.Fatalf("create after a kill: exit %d without a restore to finish\n%s", code, out)
	}
	c.finished++
	c.verify(m[1])
	c.mustCreate(reason)
}

// verify restores a checkpoint and compares the work tree with the listing
// recorded for it, and with the checkpoint's tree as git lists it.
func (c *crasher) verify(ref string) {
	defer c.timed("verify")()
	c.t.Helper()
	id := ref
	for full := range c.expected {
		if strings.HasPrefix(full, ref) {
			id = full
		}
	}
	// An earlier restore in this round may have made the commit a duplicate.
	c.restorable(c.last)
	if c.dupSkipped[id] {
		return
	}
	c.mustRestore(ref)
	got := c.listing()
	if want, ok := c.expected[id]; !ok {
		c.t.Errorf("checkpoint %s: no listing recorded for it", ref)
	} else if d := diffEntries(want, got); d != "" {
		c.t.Fatalf("restore %s is not exact:\n%s", ref, d)
	}
	if d := diffEntries(c.lsTree(id), blobsOnly(got)); d != "" {
		c.t.Fatalf("restore %s does not match git ls-tree:\n%s", ref, d)
	}
}

// timed adds the time until the returned function runs to what spent says.
func (c *crasher) timed(what string) func() {
	start := time.Now()
	return func() { c.spent[what] += time.Since(start).Round(time.Millisecond) }
}

// known records a failure of a kind once seen in checkpoint/ and fixed since:
// fatal, unless REWIND_CRASH_LENIENT=1 (to survey how often it happens).
func (c *crasher) known(what string) {
	c.t.Helper()
	c.knownBugs[what]++
	if os.Getenv("REWIND_CRASH_LENIENT") != "1" {
		c.t.Fatalf("known bug: %s", what)
	}
	c.t.Logf("known bug: %s", what)
}

func blobsOnly(l map[string]entry) map[string]entry {
	out := map[string]entry{}
	for p, e := range l {
		out[p] = entry{mode: e.mode, blob: e.blob}
	}
	return out
}

func (c *crasher) git(args ...string) string {
	c.t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir", c.store}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "HOME="+c.home, "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("git %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

func (c *crasher) lsTree(id string) map[string]entry {
	out := map[string]entry{}
	for _, rec := range strings.Split(c.git("ls-tree", "-r", "-z", id), "\x00") {
		meta, path, ok := strings.Cut(rec, "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta)
		out[path] = entry{mode: f[0], blob: f[2]}
	}
	return out
}

// fsck checks the store's repository. A stale commit-graph naming pruned
// commits (left by a gc killed midway, before prune stopped running gc) is
// reported through known, and only when none of the commits is a listed
// checkpoint; any other error fails at once.
func (c *crasher) fsck() {
	defer c.timed("fsck")()
	c.t.Helper()
	cmd := exec.Command("git", "--git-dir", c.store, "fsck", "--no-dangling", "--no-progress")
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "HOME="+c.home, "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	if err == nil {
		return
	}
	listed := map[string]bool{}
	for _, id := range c.ids() {
		listed[id] = true
	}
	stale := regexp.MustCompile(`^(error: Could not read|failed to parse commit) ([0-9a-f]{40})( from object database for commit-graph)?$`)
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if strings.HasPrefix(line, "notice: HEAD points to an unborn branch") {
			continue
		}
		m := stale.FindStringSubmatch(line)
		if m == nil || listed[m[2]] {
			c.t.Fatalf("git fsck: %v\n%s", err, out)
		}
	}
	c.staleGraph++
	c.known("git fsck fails on a stale commit-graph naming pruned commits (bug in Prune)")
}

func diffEntries(want, got map[string]entry) string {
	var d []string
	for p, w := range want {
		if g, ok := got[p]; !ok {
			d = append(d, "missing "+p)
		} else if g != w {
			d = append(d, fmt.Sprintf("differs %s: want %+v, got %+v", p, w, g))
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			d = append(d, "extra "+p)
		}
	}
	sort.Strings(d)
	if len(d) > 20 {
		d = append(d[:20], fmt.Sprintf("... and %d more", len(d)-20))
	}
	return strings.Join(d, "\n")
}
