package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRefreshFileGoneMeanwhile: a file held by id, unchanged at the stat
// walk, removed before the refresh hashes it for its stat data (update-index
// --remove then drops it from the index), or replaced by a directory there,
// must not stay in the stat cache as the index holding it with git's stat
// data: git's diff-files cannot name a path the index lacks, so once the
// file is back every later capture would take it as unchanged and no
// checkpoint would hold it.
func TestRefreshFileGoneMeanwhile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		during func(t *testing.T, p string)
		exact  bool // the refresh's checkpoint is a fresh store's after it
	}{
		{"removed", func(_ *testing.T, p string) { os.Remove(p) }, true},
		// the checkpoint may hold the directory or not (it came mid-capture)
		{"made a directory", func(t *testing.T, p string) {
			os.Remove(p)
			mustWrite(t, filepath.Join(p, "inner"), "inner\n")
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, wt, p := refreshStore(t, func(p string) { tc.during(t, p) })
			if tc.exact {
				tracedCreate(t, s, wt, "refresh")
			} else {
				traceCreate(t, s, "refresh")
				s.cacheWrites.Wait()
			}
			beforeRestat = func() {}
			os.RemoveAll(p)
			mustWrite(t, p, "file 4\n")
			nextSecond()
			tracedCreate(t, s, wt, "back")
			nextSecond()
			tracedCreate(t, s, wt, "back, settled")
		})
	}
}

// TestImportLargeTreePacks: an import whose tree is larger than 64 KiB
// (thousands of entries in one directory, names around each other in git's
// order), in a sha1 and a sha256 store: every pack of the store passes git
// verify-pack and index-pack --verify, and the store git fsck --full
// --strict; every checkpoint is a fresh store's.
func TestImportLargeTreePacks(t *testing.T) {
	needPreimport(t)
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			write := func(wt string) {
				for i := 0; i < 2500; i++ {
					mustWrite(t, filepath.Join(wt, "big", fmt.Sprintf("file-%04d-with-a-longer-name.txt", i)), fmt.Sprintf("%d\n", i))
				}
				for _, n := range []string{"ab", "a-b", "a.b", "a/c", "a\xc3\xa9", "a0"} {
					mustWrite(t, filepath.Join(wt, "big", n), n+"\n")
				}
			}
			var s *Store
			var wt string
			if format == "sha1" {
				s, wt = settledStore(t, write)
			} else {
				wt = t.TempDir()
				wt, _ = filepath.EvalSymlinks(wt)
				write(wt)
				s = sha256Store(t, wt)
				for _, what := range []string{"start", "settled"} {
					if _, err := s.Create(context.Background(), CreateOptions{Reason: what, Source: "test"}); err != nil {
						t.Fatal(err)
					}
					nextSecond()
				}
			}
			mustWrite(t, filepath.Join(wt, "big/file-0007-with-a-longer-name.txt"), "changed\n")
			mustWrite(t, filepath.Join(wt, "big/a.b"), "changed\n")
			os.Remove(filepath.Join(wt, "big/a-b"))
			mustWrite(t, filepath.Join(wt, "big/a-b/new"), "new\n")
			nextSecond()
			made, trace := traceCreate(t, s, "changed")
			s.cacheWrites.Wait()
			want := ""
			if format == "sha1" {
				want = freshTree(t, wt)
			} else {
				fresh, err := sha256Store(t, wt).Create(context.Background(), CreateOptions{Reason: "fresh", Source: "test"})
				if err != nil {
					t.Fatal(err)
				}
				want = fresh.Checkpoint.Tree
			}
			if made.Checkpoint.Tree != want {
				t.Fatalf("tree %s, a fresh store's %s", made.Checkpoint.Tree, want)
			}
			if !strings.Contains(trace, "written as one pack") {
				t.Fatalf("want an import:\n%s", trace)
			}
			ctx := context.Background()
			packs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.pack"))
			for _, p := range packs {
				if out, err := s.git().Run(ctx, "verify-pack", "-v", strings.TrimSuffix(p, ".pack")+".idx"); err != nil {
					t.Fatalf("verify-pack %s: %v %s", p, err, out)
				}
				if out, err := s.git().Run(ctx, "index-pack", "--verify", "--strict", p); err != nil {
					t.Fatalf("index-pack --verify %s: %v %s", p, err, out)
				}
			}
			if out, err := s.git().Run(ctx, "fsck", "--full", "--strict"); err != nil {
				t.Fatalf("fsck: %v %s", err, out)
			}
		})
	}
}

// TestImportFlipsAroundPrefixes: names that are prefixes of each other (with
// '-', '.', '/', '0', DEL and bytes above 0x7f after them) made a directory
// from a file and back, removed, and their directories emptied: each
// capture's import tree (checked against write-tree) is git's, and every
// checkpoint a fresh store's.
func TestImportFlipsAroundPrefixes(t *testing.T) {
	needPreimport(t)
	names := []string{"x", "x-1", "x.1", "x0", "x\x7f", "x\xc3\xa9", "x\xff", "y"}
	s, wt := settledStore(t, func(wt string) {
		for _, n := range names {
			mustWrite(t, filepath.Join(wt, "d", n), n+"\n")
		}
		mustWrite(t, filepath.Join(wt, "top"), "top\n")
	})
	toDir := func(n string) {
		p := filepath.Join(wt, "d", n)
		os.RemoveAll(p)
		mustWrite(t, filepath.Join(p, "in"), "in "+n+"\n")
	}
	toFile := func(n string) {
		p := filepath.Join(wt, "d", n)
		os.RemoveAll(p)
		mustWrite(t, p, "file again "+n+"\n")
	}
	steps := []func(){
		func() { toDir("x") },
		func() { toFile("x") },
		func() { toDir("x-1"); toDir("x\xc3\xa9") },
		func() { toDir("x"); toFile("x-1"); os.Remove(filepath.Join(wt, "d", "x.1")) },
		func() { toDir("x0"); toDir("x\x7f"); toFile("x\xc3\xa9"); toDir("x\xff") },
		func() { toFile("x"); toFile("x0"); toFile("x\x7f"); toFile("x\xff") },
		func() { os.RemoveAll(filepath.Join(wt, "d", "x\xc3\xa9")); toDir("y") },
		func() {
			for _, n := range names {
				os.RemoveAll(filepath.Join(wt, "d", n)) // d emptied: gone
			}
		},
		func() { os.Remove(filepath.Join(wt, "top")); toDir("x") },
	}
	for i, step := range steps {
		step()
		nextSecond()
		_, trace := tracedCreate(t, s, wt, fmt.Sprint("step ", i))
		if !strings.Contains(trace, "written as one pack") {
			t.Fatalf("step %d: want an import:\n%s", i, trace)
		}
	}
}

// TestRefreshNothingChangedFileGone: a refresh due with nothing changed
// hashes the files held by id itself (no import): one removed while they
// are hashed leaves the index, and the stat cache with it, so that once it
// is back the next checkpoint holds it.
func TestRefreshNothingChangedFileGone(t *testing.T) {
	s, wt := refreshDue(t)
	p := filepath.Join(wt, "d2/f5.txt")
	createWhileHashed(t, s, "refresh, nothing changed", func() { os.Remove(p) })
	mustWrite(t, p, "file 5\n")
	nextSecond()
	tracedCreate(t, s, wt, "back")
}
