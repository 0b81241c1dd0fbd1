package checkpoint

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestFullDisk runs fullDisk on a small tmpfs of its own: the test binary runs
// again in a mount namespace (unshare) where that file system is mounted. It
// skips, saying why, where no namespace can be made.
func TestFullDisk(t *testing.T) {
	if os.Getenv("REWIND_FULLDISK") != "" {
		fullDisk(t, os.Getenv("REWIND_FULLDISK"))
		return
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip("needs unshare(1) to mount a small file system of its own")
	}
	if out, err := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs -o size=64k tmpfs "$0"`, t.TempDir()).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs in a new mount namespace here (%v: %s)", err, out)
	}
	dir := t.TempDir()
	cmd := exec.Command("unshare", "-rm", "sh", "-c", `mount -t tmpfs -o size=1m tmpfs "$0" && exec "$1" -test.run='^TestFullDisk$' -test.v`, dir, os.Args[0])
	cmd.Env = append(os.Environ(), "REWIND_FULLDISK="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestFullDisk") {
		t.Fatalf("on a full tmpfs: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}

// fullDisk fills the file system of dir and checks that every write of the
// store fails whole: the old file stays as it was, no temporary file is left,
// and a first use that failed leaves no empty record behind.
func fullDisk(t *testing.T, dir string) {
	ctx := context.Background()
	wt := filepath.Join(dir, "wt")
	mustWrite(t, filepath.Join(wt, "a.txt"), "a")
	s, err := Open(wt, filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"c1", "c2", "c3"} {
		mustWrite(t, filepath.Join(wt, "a.txt"), r)
		if _, err := s.Create(ctx, CreateOptions{Reason: r, Source: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	record, _ := os.ReadFile(s.ownerFile())
	manifest, _ := os.ReadFile(s.manifestFile())
	if len(record) == 0 || strings.Count(string(manifest), "\n") != 3 {
		t.Fatalf("before the disk is full: record %q, manifest %q", record, manifest)
	}

	fill(t, filepath.Join(dir, "fill"))
	if err := writeAtomic(s.ownerFile(), []byte(strings.Repeat("/elsewhere", 500)+"\n"), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writing the record on a full disk: %v, want ENOSPC", err)
	}
	// The manifest as an eviction rewrites it (a prune frees pages as it
	// deletes refs, so the write is tried on its own here).
	cps, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.writeManifest(cps[1:]); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("rewriting checkpoint-manifest.md on a full disk: %v, want ENOSPC", err)
	}
	// A first use on the full disk fails, and leaves no record.
	wt2 := filepath.Join(dir, "wt2")
	os.Mkdir(wt2, 0o700)
	s2, err := Open(wt2, filepath.Join(dir, "store2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Create(ctx, CreateOptions{Reason: "first", Source: "test"}); err == nil {
		t.Errorf("a first checkpoint on a full disk succeeded")
	}

	if got, _ := os.ReadFile(s.ownerFile()); string(got) != string(record) {
		t.Errorf("the record became %q, was %q", got, record)
	}
	if got, _ := os.ReadFile(s.manifestFile()); string(got) != string(manifest) {
		t.Errorf("checkpoint-manifest.md became %q, was %q", got, manifest)
	}
	for _, d := range []string{s.Dir, s2.Dir} {
		if tmps, _ := filepath.Glob(filepath.Join(d, ".rewind-tmp-*")); len(tmps) > 0 {
			t.Errorf("temporary files left: %v", tmps)
		}
	}

	// With space again, both stores work.
	os.Remove(filepath.Join(dir, "fill"))
	if _, err := Open(wt, s.Dir); err != nil {
		t.Errorf("the store after the full disk: %v", err)
	}
	s2, err = Open(wt2, s2.Dir)
	if err != nil {
		t.Fatalf("the store whose first use failed on the full disk: %v", err)
	}
	if _, err := s2.Create(ctx, CreateOptions{Reason: "first", Source: "test"}); err != nil {
		t.Errorf("a first checkpoint with space again: %v", err)
	}
	if _, _, _, err := s.Prune(ctx, 1); err != nil {
		t.Errorf("prune with space again: %v", err)
	}
}

// fill writes zeros to path until the file system is full.
func fill(t *testing.T, path string) {
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// Small writes may still fit in a partly used page: use it up.
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			return
		}
	}
}
