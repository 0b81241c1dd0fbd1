package checkpoint

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestRandomRestore applies random edits, checkpoints, and restores random
// checkpoints, comparing full listings (ignored *.log files must never change).
func TestRandomRestore(t *testing.T) {
	seeds := 30
	if os.Getenv("REWIND_SOAK") != "" {
		seeds = 300
	}
	for seed := int64(1); seed <= int64(envInt("REWIND_RESTORE_SEEDS", seeds)); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomRound(t, seed) })
	}
}

func randomRound(t *testing.T, seed int64) {
	ctx := context.Background()
	r := rand.New(rand.NewSource(seed))
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, ".gitignore"), "*.log\n")
	names := []string{"a", "b", "d/a", "d/b", "d/e/a", "n/a", "n/README", "x y", "d/e/x y"}
	var logs []string
	op := func() {
		p := names[r.Intn(len(names))]
		full := filepath.Join(wt, p)
		switch r.Intn(8) {
		case 0, 1, 2:
			// clear anything in the way, except ignored files
			for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
				if fi, err := os.Lstat(filepath.Join(wt, d)); err == nil && !fi.IsDir() {
					os.Remove(filepath.Join(wt, d))
				}
			}
			if fi, err := os.Lstat(full); err == nil && fi.IsDir() {
				return
			}
			mustWrite(t, full, fmt.Sprintf("%d %d\n", seed, r.Int()))
		case 3:
			if fi, err := os.Lstat(full); err == nil && !fi.IsDir() {
				os.Remove(full)
			}
		case 4:
			os.Chmod(full, os.FileMode(0o644|(r.Intn(2)*0o111)))
		case 5:
			if _, err := os.Lstat(full); err != nil {
				os.MkdirAll(filepath.Dir(full), 0o755)
				os.Symlink("target-"+fmt.Sprint(r.Intn(3)), full)
			}
		case 6:
			if _, err := os.Stat(filepath.Join(wt, "n")); err == nil {
				if _, err := os.Stat(filepath.Join(wt, "n", ".git")); err != nil {
					cmd := exec.Command("git", "init", "-q")
					cmd.Dir = filepath.Join(wt, "n")
					cmd.Run()
				}
			}
		case 7:
			if fi, err := os.Stat(filepath.Dir(full)); err == nil && fi.IsDir() {
				l := full + ".log"
				if _, err := os.Lstat(l); err != nil {
					mustWrite(t, l, "ignored "+p)
					logs = append(logs, l)
				}
			}
		}
	}
	type snap struct {
		id   string
		list map[string]string
	}
	var snaps []snap
	for i := 0; i < 12; i++ {
		for j := 0; j < 1+r.Intn(5); j++ {
			op()
		}
		if r.Intn(3) == 0 && len(snaps) > 0 {
			target := snaps[r.Intn(len(snaps))]
			before := listing(t, wt, true)
			res, err := s.Restore(ctx, target.id, RestoreOptions{})
			if err != nil {
				t.Fatalf("restore %s: %v", target.id[:8], err)
			}
			got := withoutLogs(listing(t, wt, true))
			if d := diffMaps(withoutLogs(target.list), got); d != "" {
				t.Fatalf("restore to %s not exact: %s", target.id[:8], d)
			}
			_, nestedErr := os.Stat(filepath.Join(wt, "n", ".git"))
			for _, l := range logs {
				if nestedErr == nil && strings.HasPrefix(l, filepath.Join(wt, "n")+"/") {
					continue // a nested repository's own rules hold it
				}
				if _, err := os.Lstat(l); err != nil {
					rel, _ := filepath.Rel(wt, l)
					if before[rel] != "" {
						t.Fatalf("ignored %s removed by restore", rel)
					}
				}
			}
			// undo
			if _, err := s.Restore(ctx, res.Safety.ID, RestoreOptions{}); err != nil {
				t.Fatal(err)
			}
			if d := diffMaps(withoutLogs(before), withoutLogs(listing(t, wt, true))); d != "" {
				t.Fatalf("undo not exact: %s", d)
			}
			continue
		}
		c, err := s.Create(ctx, CreateOptions{Reason: fmt.Sprintf("r%d", i), Source: "t"})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		snaps = append(snaps, snap{c.Checkpoint.ID, listing(t, wt, true)})
	}
}

// withoutLogs is a listing without the ignored *.log files, nor the
// directories with no other file below them (a restore keeps those, as it
// keeps a directory holding a nested repository, whose .git the listing
// leaves out).
func withoutLogs(m map[string]string) map[string]string {
	out := map[string]string{}
	var files []string
	for k, v := range m {
		if !strings.HasSuffix(k, ".log") && !strings.HasSuffix(k, "/") {
			out[k] = v
			files = append(files, k)
		}
	}
	for k, v := range m {
		if strings.HasSuffix(k, "/") && slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, k) }) {
			out[k] = v
		}
	}
	return out
}

func envInt(k string, def int) int {
	var n int
	if _, err := fmt.Sscan(os.Getenv(k), &n); err == nil {
		return n
	}
	return def
}
