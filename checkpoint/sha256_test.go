package checkpoint

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rewind-cli/rewind/gitexec"
)

// sha256Store opens a store that crucible's procedure made with sha256
// object ids (git init --object-format=sha256 in the store directory).
func sha256Store(t *testing.T, wt string) *Store {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "store")
	cmd := exec.Command("git", "init", "-q", "--object-format=sha256")
	cmd.Env = append(os.Environ(), "GIT_DIR="+dir, "GIT_WORK_TREE="+wt)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("git cannot make a sha256 repository: %v %s", err, out)
	}
	s, err := Open(wt, dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSHA256StoreExact: in a store of sha256 object ids, checkpoints with
// files changed in the second of their capture (entered into the index by
// ids rewind works out) hold what a fresh sha256 store's first checkpoint
// holds, and the list read from the files is git's.
func TestSHA256StoreExact(t *testing.T) {
	ctx := context.Background()
	wt := t.TempDir()
	wt, _ = filepath.EvalSymlinks(wt)
	s := sha256Store(t, wt)
	for i := 0; i < 6; i++ {
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%d.txt", i%2, i)), fmt.Sprint("file ", i))
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "start", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	byID := 0
	for step := 0; step < 3; step++ {
		nextSecond()
		mustWrite(t, filepath.Join(wt, "d1/f1.txt"), fmt.Sprint("changed ", step))
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("new%d.txt", step)), "new")
		os.Chmod(filepath.Join(wt, "d0/f0.txt"), os.FileMode(0o644|(step%2)*0o111))
		var trace strings.Builder
		gitexec.Trace = &trace
		made, err := s.Create(ctx, CreateOptions{Reason: fmt.Sprint("racy ", step), Source: "test"})
		gitexec.Trace = nil
		byID += strings.Count(trace.String(), "--index-info")
		if err != nil {
			t.Fatal(err)
		}
		if len(made.Checkpoint.Tree) != 64 {
			t.Fatalf("tree %q is not a sha256 id", made.Checkpoint.Tree)
		}
		fresh := sha256Store(t, wt)
		want, err := fresh.Create(ctx, CreateOptions{Reason: "fresh", Source: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if made.Checkpoint.Tree != want.Checkpoint.Tree {
			t.Fatalf("step %d: tree %s, a fresh store's %s", step, made.Checkpoint.Tree, want.Checkpoint.Tree)
		}
	}
	if byID == 0 && gitexec.AtLeast(geometricVersion) {
		t.Fatal("no file went into the index by its id")
	}
	s.cacheWrites.Wait()
	for _, what := range []string{"loose refs", "packed refs"} {
		if what == "packed refs" {
			if _, err := s.git().Run(ctx, "pack-refs", "--all"); err != nil {
				t.Fatal(err)
			}
		}
		files, ok := s.listOwnFromFiles()
		if !ok {
			t.Fatalf("%s: the list of a sha256 store was not read from the files", what)
		}
		if want := listByGit(t, s); !reflect.DeepEqual(files, want) {
			t.Fatalf("%s: the files list\n%s\ngit lists\n%s", what, describe(files), describe(want))
		}
	}
}
