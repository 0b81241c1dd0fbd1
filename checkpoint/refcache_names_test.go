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
