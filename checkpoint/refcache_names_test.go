package checkpoint

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestCommitCacheOddSkippedNames: a checkpoint's message names the files it
// skipped; the new checkpoint's entry in the commit cache (made from what
// rewind wrote, not read back from git) gives the list git gives, whatever
// the names hold: a newline, a tab, a backslash, a "|", bytes that are not
// UTF-8, a trailing space.
func TestCommitCacheOddSkippedNames(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	mustWrite(t, filepath.Join(wt, "small"), "s")
	if _, err := s.Create(ctx, CreateOptions{Reason: "start", Source: "build"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"new\nline", "tab\there", `back\slash`, "pipe|name", "latin\xe9", "trailing ", "q\"uote", "cr\rname"} {
		mustWrite(t, filepath.Join(wt, name), strings.Repeat("x", 100))
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "odd names", Source: "build", MaxFileSize: 10}); err != nil {
		t.Fatal(err)
	}
	s.cacheWrites.Wait()
	files, ok := s.listOwnFromFiles()
	if !ok {
		t.Fatal("the list was not read from the files")
	}
	want := listByGit(t, s)
	if !reflect.DeepEqual(files, want) {
		t.Fatalf("the files list\n%s\ngit lists\n%s", describe(files), describe(want))
	}
	if len(want[len(want)-1].Skipped) != 8 {
		t.Fatalf("skipped: %v", want[len(want)-1].Skipped)
	}
}

// TestCommitCacheAfterAccept: checkpoints imported from a bundle (refs
// rewind did not create by a checkpoint of its own, commits the cache has
// never seen), then a prune: the list read from the files, when it can be,
// is git's.
func TestCommitCacheAfterAccept(t *testing.T) {
	ctx := context.Background()
	a, wtA := newStore(t)
	for i := 0; i < 3; i++ {
		mustWrite(t, filepath.Join(wtA, "f.txt"), strings.Repeat("a", i+1))
		if _, err := a.Create(ctx, CreateOptions{Reason: "pre-wave-" + string(rune('1'+i)), Source: "build"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.SaveRun(ctx, "7", []RunFile{{Path: "dispatch/manifest.jsonl", Data: []byte("x\n")}}, "run 7"); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "run.bundle")
	if _, err := a.WriteBundle(ctx, bundle, []string{"7"}); err != nil {
		t.Fatal(err)
	}
	b, wtB := newStore(t)
	mustWrite(t, filepath.Join(wtB, "g.txt"), "mine")
	if _, err := b.Create(ctx, CreateOptions{Reason: "mine", Source: "manual"}); err != nil {
		t.Fatal(err)
	}
	check := func(what string) {
		t.Helper()
		b.cacheWrites.Wait()
		files, ok := b.listOwnFromFiles()
		want := listByGit(t, b)
		if ok && !reflect.DeepEqual(files, want) {
			t.Fatalf("%s: the files list\n%s\ngit lists\n%s", what, describe(files), describe(want))
		}
	}
	in, err := b.FetchBundle(ctx, bundle)
	if err != nil {
		t.Fatal(err)
	}
	check("fetched, not accepted")
	if _, err := b.Accept(ctx, in, true, 50); err != nil {
		t.Fatal(err)
	}
	check("accepted")
	if _, err := b.List(ctx); err != nil {
		t.Fatal(err)
	}
	check("accepted, listed")
	mustWrite(t, filepath.Join(wtB, "g.txt"), "mine again")
	if _, err := b.Create(ctx, CreateOptions{Reason: "after import", Source: "manual", Keep: 2}); err != nil {
		t.Fatal(err)
	}
	check("a checkpoint after the import, evicting")
	if _, _, _, err := b.Prune(ctx, 1); err != nil {
		t.Fatal(err)
	}
	check("pruned")
}
