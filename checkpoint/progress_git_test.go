package checkpoint

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestParseGitProgress(t *testing.T) {
	for _, tc := range []struct {
		line        string
		phase       string
		done, total int
		ok          bool
	}{
		{"Enumerating objects: 21212, done.", "enumerating objects", 21212, 0, true},
		{"Counting objects:   0% (1/21212)", "counting objects", 1, 21212, true},
		{"Compressing objects: 100% (20606/20606), done.", "compressing objects", 20606, 20606, true},
		{"Writing objects:  40% (8485/21212), 10.01 MiB | 20.00 MiB/s", "writing objects", 8485, 21212, true},
		{"Checking connectivity: 1234", "checking connectivity", 1234, 0, true},
		{"Building bitmaps:  16% (1/6)", "building bitmaps", 1, 6, true},
		{"Delta compression using up to 2 threads", "", 0, 0, false},
		{"Total 21212 (delta 1000), reused 19600 (delta 0), pack-reused 0", "", 0, 0, false},
		{"error: bad object", "", 0, 0, false},
		{"Counting objects:  50% (30/20)", "", 0, 0, false},
		{"Counting objects: 99999999999999999999999", "", 0, 0, false},
		{"", "", 0, 0, false},
	} {
		phase, done, total, ok := parseGitProgress(tc.line)
		if phase != tc.phase || done != tc.done || total != tc.total || ok != tc.ok {
			t.Errorf("parseGitProgress(%q) = %q %d %d %v, want %q %d %d %v", tc.line, phase, done, total, ok, tc.phase, tc.done, tc.total, tc.ok)
		}
	}
}

func FuzzParseGitProgress(f *testing.F) {
	for _, s := range []string{"Enumerating objects: 21212, done.", "Counting objects:   0% (1/21212)", "Writing objects: 100% (3/3), 1 KiB | 1 MiB/s, done.", "Total 3", "X: 1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		phase, done, total, ok := parseGitProgress(line)
		if !ok {
			if phase != "" || done != 0 || total != 0 {
				t.Fatalf("a refused line gave %q %d %d", phase, done, total)
			}
			return
		}
		if phase == "" || phase != strings.ToLower(phase) || done < 0 || total < 0 || (total > 0 && done > total) {
			t.Fatalf("%q gave %q %d %d", line, phase, done, total)
		}
	})
}

// TestPruneShowsGitCounts: with progress asked for (a terminal), prune
// reports git's own counts for the repack, with totals; without, it runs as
// before.
func TestPruneShowsGitCounts(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	for i := 0; i < 30; i++ {
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("f%02d.txt", i)), strings.Repeat("x", i+2))
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "one", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	counted := map[string]int{}
	var steps []string
	s.Progress = func(step string, done, total int) {
		mu.Lock()
		defer mu.Unlock()
		if len(steps) == 0 || steps[len(steps)-1] != step {
			steps = append(steps, step)
		}
		if total > 0 && done <= total {
			counted[step] = total
		}
	}
	if _, _, _, err := s.Prune(ctx, 1); err != nil {
		t.Fatal(err)
	}
	s.Progress = nil
	if !strings.Contains(strings.Join(steps, "|"), "repacking objects|repacking objects: ") {
		t.Errorf("steps reported: %q", steps)
	}
	// 30 blobs, a tree and a commit, at least: git counted them all.
	if n := counted["repacking objects: writing objects"]; n < 32 {
		t.Errorf("writing objects counted %d, want at least 32 (steps %q)", n, steps)
	}
	if out, err := s.git().Run(ctx, "fsck", "--strict", "--no-dangling"); err != nil {
		t.Fatalf("fsck: %v %s", err, out)
	}
}
