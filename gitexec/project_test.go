package gitexec

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// projectRepo makes a small repository with one commit, through the shadow runner
// pointed at a normal .git (the tests may write; rewind's Project may not).
func projectRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := Shadow{GitDir: filepath.Join(dir, ".git"), WorkTree: dir, IndexFile: filepath.Join(dir, ".git", "index"), ConfigHome: t.TempDir()}
	if err := s.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(dir, "a.txt"), "a\n", 0o644)
	for _, args := range [][]string{{"add", "-A"}, {"commit", "-q", "-m", "first"}} {
		if _, err := s.Run(context.Background(), args...); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestProjectReadsWithoutWriting(t *testing.T) {
	dir := projectRepo(t)
	mustWrite(t, filepath.Join(dir, "a.txt"), "changed\n", 0o644) // a stale index would be refreshed by status
	before := listing(t, filepath.Join(dir, ".git"))
	p := Project{Dir: dir}
	ctx := context.Background()
	for _, args := range [][]string{
		{"rev-parse", "HEAD"},
		{"branch", "--show-current"},
		{"config", "-z", "--list"},
		{"log", "-z", "--format=%H%x00%s"},
		{"ls-files", "-z"},
		{"cat-file", "-t", "HEAD"},
		{"ls-tree", "-z", "HEAD"},
		{"rev-list", "HEAD"},
		{"for-each-ref"},
		{"show", "--stat", "HEAD"},
	} {
		if _, err := p.Run(ctx, args...); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	if after := listing(t, filepath.Join(dir, ".git")); !equalMaps(before, after) {
		t.Errorf("reading changed the project's .git")
	}
}

func TestProjectRefusesWrites(t *testing.T) {
	dir := projectRepo(t)
	before := listing(t, filepath.Join(dir, ".git"))
	var trace bytes.Buffer
	Trace = &trace
	defer func() { Trace = nil }()
	p := Project{Dir: dir}
	for _, args := range [][]string{
		{"status"},
		{"diff"},
		{"commit", "-m", "x"},
		{"add", "-A"},
		{"update-ref", "refs/heads/x", "HEAD"},
		{"branch", "-D", "main"},
		{"branch", "new"},
		{"log", "--output=" + filepath.Join(dir, "out")},
		{"show", "--output", filepath.Join(dir, "out"), "HEAD"},
		{"archive", "-o", filepath.Join(dir, "out.tar"), "HEAD"},
		{"archive", "-o" + filepath.Join(dir, "out.tar"), "HEAD"},
		{"archive", "--remote=origin", "HEAD"},
		{"gc"},
		{"config", "user.name", "x"},
		{"config", "--unset", "core.bare"},
		{"config", "--list"},
		{"config", "-z", "--list", "--file", filepath.Join(dir, "out")},
		{},
	} {
		_, err := p.Run(context.Background(), args...)
		if !errors.Is(err, ErrRefused) {
			t.Errorf("%v: err = %v, want ErrRefused", args, err)
		}
	}
	if trace.Len() > 0 {
		t.Errorf("git was started for a refused command:\n%s", trace.String())
	}
	if after := listing(t, filepath.Join(dir, ".git")); !equalMaps(before, after) {
		t.Errorf("the project's .git changed")
	}
	// A file name after -- is data, not an option.
	if _, err := p.Run(context.Background(), "log", "--format=%H", "--", "--output=x"); err != nil && errors.Is(err, ErrRefused) {
		t.Errorf("a path after -- was refused: %v", err)
	}
	if !strings.Contains(checkReadOnly([]string{"status"}).Error(), "git status: not a read-only subcommand") {
		t.Errorf("message: %v", checkReadOnly([]string{"status"}))
	}
}

// In a partial clone, reading an object the clone lacks would fetch it and
// write packs into .git: the read-only runner makes it fail instead.
func TestProjectNeverFetchesLazily(t *testing.T) {
	src := projectRepo(t)
	clone := filepath.Join(t.TempDir(), "clone")
	s := Shadow{GitDir: filepath.Join(src, ".git"), WorkTree: src, IndexFile: filepath.Join(src, ".git", "index"), ConfigHome: t.TempDir()}
	if _, err := s.Run(context.Background(), "config", "uploadpack.allowFilter", "true"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "-c", "protocol.file.allow=always", "clone", "-q", "--no-checkout", "--filter=blob:none", "file://"+src, clone)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("clone: %v\n%s", err, out)
	}
	// The user allows the file protocol in the clone: only rewind's own
	// settings stop the fetch.
	if out, err := exec.Command("git", "-C", clone, "config", "protocol.file.allow", "always").CombinedOutput(); err != nil {
		t.Fatalf("config: %v\n%s", err, out)
	}
	before := listing(t, filepath.Join(clone, ".git"))
	if _, err := (Project{Dir: clone}).Run(context.Background(), "show", "HEAD:a.txt"); err == nil {
		t.Errorf("show of a missing blob succeeded: it was fetched")
	}
	if after := listing(t, filepath.Join(clone, ".git")); !equalMaps(before, after) {
		t.Errorf("reading a missing object changed the clone's .git")
	}
}
