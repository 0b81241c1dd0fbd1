package checkpoint

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// TestEvictionBudgets: hook checkpoints and restores' safety checkpoints
// are evicted against budgets of their own, never the boundaries'.
func TestEvictionBudgets(t *testing.T) {
	for _, tc := range []struct {
		c    Checkpoint
		want string
	}{
		{Checkpoint{Reason: "tool-Bash", Source: SourceHook}, "hook"},
		{Checkpoint{Reason: "pre-restore-safety", Source: "checkpoint"}, "safety"},
		{Checkpoint{Reason: "pre-restore-safety-file", Source: "checkpoint"}, "safety"},
		{Checkpoint{Reason: "pre-restore-safety", Source: "build"}, "boundary"},
		{Checkpoint{Reason: "pre-wave-3", Source: "build"}, "boundary"},
		{Checkpoint{Reason: "tool-Bash", Source: "manual"}, "boundary"},
	} {
		if got := tc.c.Budget(); got != tc.want {
			t.Errorf("%s/%s: budget %s, want %s", tc.c.Reason, tc.c.Source, got, tc.want)
		}
	}

	ctx := context.Background()
	s, wt := newStore(t)
	step := 0
	create := func(reason, source string) {
		t.Helper()
		step++
		mustWrite(t, filepath.Join(wt, "f"), fmt.Sprint(step))
		if _, err := s.Create(ctx, CreateOptions{Reason: reason, Source: source, Keep: 2}); err != nil {
			t.Fatal(err)
		}
	}
	create("pre-wave-1", "build")
	create("pre-wave-2", "build")
	for i := 0; i < 5; i++ {
		create("tool-Bash", SourceHook)
	}
	// Unchanged: OnlyIfChanged records nothing.
	res, err := s.Create(ctx, CreateOptions{Reason: "tool-Edit", Source: SourceHook, Keep: 2, OnlyIfChanged: true})
	if err != nil || !res.NotTaken || res.Unchanged == nil || res.Checkpoint.Reason != "tool-Bash" {
		t.Fatalf("unchanged hook checkpoint: %+v %v", res, err)
	}
	cps, _ := s.List(ctx)
	count := map[string]int{}
	for _, c := range cps {
		count[c.Budget()]++
	}
	if count["boundary"] != 2 || count["hook"] != 2 || len(cps) != 4 {
		t.Errorf("after 5 hook checkpoints: %v (%d in all), want 2 boundary, 2 hook", count, len(cps))
	}
	create("pre-wave-3", "build")
	cps, _ = s.List(ctx)
	if cps[0].Reason != "pre-wave-2" || len(cps) != 4 {
		t.Errorf("a third boundary should evict pre-wave-1 alone; first is %s of %d", cps[0].Reason, len(cps))
	}
}
