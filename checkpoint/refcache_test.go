package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// listByGit is listOwn as git alone tells it, the cache neither read nor
// written.
func listByGit(t *testing.T, s *Store) []*Checkpoint {
	t.Helper()
	saved := s.commits
	defer func() { s.commits = saved }()
	file := s.commitCacheFile()
	data, readErr := os.ReadFile(file)
	os.Remove(file)
	cps, err := s.listOwn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if readErr == nil {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	} else {
		os.Remove(file)
	}
	return cps
}

func describe(cps []*Checkpoint) string {
	var b strings.Builder
	for _, c := range cps {
		fmt.Fprintf(&b, "%d %s %s %q %q %s %v %v %s %s\n", c.Seq, c.ID, c.Tree, c.Reason, c.Source, c.Time, c.Skipped, c.meta, c.Branch, c.Head)
	}
	return b.String()
}

// TestCommitCacheListsAsGit checks that the list read from the ref files and
// the commit cache is the one git gives, after checkpoints with every kind
// of message (skipped files, permission bits, empty directories, odd
// reasons), evictions, a pack-refs, and a prune; and that the files are
// what is read after a checkpoint (no git process for the list).
func TestCommitCacheListsAsGit(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	step := 0
	check := func(what string, fromFiles bool) {
		t.Helper()
		s.cacheWrites.Wait()
		files, ok := s.listOwnFromFiles()
		if fromFiles && !ok {
			t.Fatalf("%s: the list was not read from the files", what)
		}
		want := listByGit(t, s)
		if ok && !reflect.DeepEqual(files, want) {
			t.Fatalf("%s: the files list\n%s\ngit lists\n%s", what, describe(files), describe(want))
		}
	}
	reasons := []string{"plain", "ünïcode ✓", "tab\there", `quote "q" \ back`, "pre-restore-safety", "a: b"}
	for i := 0; i < 14; i++ {
		step++
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("f%d", i%5)), strings.Repeat("x", i))
		switch i % 4 {
		case 1:
			os.MkdirAll(filepath.Join(wt, fmt.Sprintf("empty%d", i)), 0o750)
		case 2:
			os.Chmod(filepath.Join(wt, "f0"), 0o755)
		case 3:
			mustWrite(t, filepath.Join(wt, "big"), strings.Repeat("b", 2048))
		}
		opt := CreateOptions{Reason: reasons[i%len(reasons)], Source: []string{"build", "hook", "checkpoint"}[i%3], Keep: 3, MaxFileSize: 1024}
		if _, err := s.Create(ctx, opt); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("after checkpoint %d", i), true)
	}
	if _, err := s.git().Run(ctx, "pack-refs", "--all"); err != nil {
		t.Fatal(err)
	}
	check("after pack-refs", true)
	mustWrite(t, filepath.Join(wt, "after-pack"), "p")
	if _, err := s.Create(ctx, CreateOptions{Reason: "loose beside packed", Source: "build", Keep: 3}); err != nil {
		t.Fatal(err)
	}
	check("a loose ref beside packed ones", true)
	if _, _, _, err := s.Prune(ctx, 2); err != nil {
		t.Fatal(err)
	}
	check("after prune", false)
}

// TestCommitCacheFallsBackToGit checks that what the files cannot tell for
// sure goes to git: a damaged cache, a commit it lacks, a symbolic ref, a
// ref being written, a packed-refs file of another form, a reftable.
func TestCommitCacheFallsBackToGit(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, s *Store, refDir string)
	}{
		{"damaged cache", func(t *testing.T, s *Store, _ string) {
			data, _ := os.ReadFile(s.commitCacheFile())
			data[len(data)/2] ^= 1
			os.WriteFile(s.commitCacheFile(), data, 0o600)
		}},
		{"truncated cache", func(t *testing.T, s *Store, _ string) {
			data, _ := os.ReadFile(s.commitCacheFile())
			os.WriteFile(s.commitCacheFile(), data[:len(data)-5], 0o600)
		}},
		{"a commit the cache lacks", func(t *testing.T, s *Store, _ string) {
			s.commits = nil
			s.writeCommitCache(map[string]cachedCommit{})
		}},
		{"a symbolic ref", func(t *testing.T, s *Store, refDir string) {
			mustWrite(t, filepath.Join(refDir, "0000000099"), "ref: "+refName(1)+"\n")
		}},
		{"a ref being written", func(t *testing.T, s *Store, refDir string) {
			mustWrite(t, filepath.Join(refDir, "0000000099.lock"), "")
		}},
		{"uppercase id", func(t *testing.T, s *Store, refDir string) {
			data, _ := os.ReadFile(filepath.Join(refDir, "0000000001"))
			os.WriteFile(filepath.Join(refDir, "0000000001"), []byte(strings.ToUpper(string(data))), 0o644)
		}},
		{"packed-refs of another form", func(t *testing.T, s *Store, _ string) {
			mustWrite(t, filepath.Join(s.gitDir(), "packed-refs"), "# pack-refs with: peeled\nnot a line\n")
		}},
		{"a reftable", func(t *testing.T, s *Store, _ string) {
			os.Mkdir(filepath.Join(s.gitDir(), "reftable"), 0o755)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, wt := newStore(t)
			for i := 0; i < 2; i++ {
				mustWrite(t, filepath.Join(wt, "f"), fmt.Sprint(i))
				if _, err := s.Create(ctx, CreateOptions{Reason: fmt.Sprint("r", i), Source: "build"}); err != nil {
					t.Fatal(err)
				}
			}
			s.cacheWrites.Wait()
			if _, ok := s.listOwnFromFiles(); !ok {
				t.Fatal("before the damage the files did not tell the list")
			}
			tc.damage(t, s, filepath.Join(s.gitDir(), filepath.FromSlash(refPrefix)))
			if _, ok := s.listOwnFromFiles(); ok {
				t.Fatal("the files told the list after the damage")
			}
		})
	}
}

// TestCommitCacheRefsPackedMeanwhile: a git gc or pack-refs (crucible's
// procedure runs one on a shared store, without rewind's lock) moves a loose
// ref into packed-refs while the list reads the files. The list must still
// name it, as git's does: git reads the loose refs before packed-refs for
// that reason. packed-refs is a FIFO here, so that the move happens exactly
// between the list's read of packed-refs and its read of the loose refs.
func TestCommitCacheRefsPackedMeanwhile(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	for i := 0; i < 2; i++ {
		mustWrite(t, filepath.Join(wt, "f"), fmt.Sprint(i))
		if _, err := s.Create(ctx, CreateOptions{Reason: fmt.Sprint("r", i), Source: "build"}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if _, err := s.git().Run(ctx, "pack-refs", "--all"); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.cacheWrites.Wait()
	want := listByGit(t, s)
	if len(want) != 2 {
		t.Fatalf("git lists %d checkpoints, not 2", len(want))
	}
	packedFile := filepath.Join(s.gitDir(), "packed-refs")
	loose := filepath.Join(s.gitDir(), filepath.FromSlash(refName(2)))
	before, err := os.ReadFile(packedFile) // the first checkpoint's ref alone
	if err != nil {
		t.Fatal(err)
	}
	looseData, err := os.ReadFile(loose)
	if err != nil {
		t.Fatal(err)
	}
	// What a pack-refs leaves: both refs packed, no loose one.
	if _, err := s.git().Run(ctx, "pack-refs", "--all"); err != nil {
		t.Fatal(err)
	}
	after, err := os.ReadFile(packedFile)
	if err != nil {
		t.Fatal(err)
	}
	// Back to before it, with packed-refs a FIFO the list blocks on.
	os.MkdirAll(filepath.Dir(loose), 0o755) // pack-refs removed it, emptied
	if err := os.WriteFile(loose, looseData, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(packedFile)
	if err := syscall.Mkfifo(packedFile, 0o644); err != nil {
		t.Fatal(err)
	}
	type listed struct {
		cps []*Checkpoint
		ok  bool
	}
	done := make(chan listed, 1)
	go func() {
		cps, ok := s.listOwnFromFiles()
		done <- listed{cps, ok}
	}()
	w, err := os.OpenFile(packedFile, os.O_WRONLY, 0) // waits for the list to open it
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(before); err != nil {
		t.Fatal(err)
	}
	// The pack-refs, while the list holds the old packed-refs: the new one
	// renamed into place, then the loose ref removed.
	tmp := packedFile + ".new"
	if err := os.WriteFile(tmp, after, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, packedFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(loose); err != nil {
		t.Fatal(err)
	}
	w.Close()
	got := <-done
	if got.ok && !reflect.DeepEqual(got.cps, want) {
		t.Fatalf("the files list\n%s\ngit lists\n%s", describe(got.cps), describe(want))
	}
	if again := listByGit(t, s); !reflect.DeepEqual(again, want) {
		t.Fatalf("after the pack-refs git lists\n%s\nnot\n%s", describe(again), describe(want))
	}
}
