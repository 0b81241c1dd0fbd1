package checkpoint

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gitIn runs git in dir with a fixed identity, for building test projects.
func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestProjectIDIsTheMainLinesRoot(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, _, err := ProjectID(ctx, dir); !errors.Is(err, ErrNoProjectID) {
		t.Fatalf("outside a repository: %v, want ErrNoProjectID", err)
	}
	gitIn(t, dir, "init", "-q", "-b", "main")
	if _, _, err := ProjectID(ctx, dir); !errors.Is(err, ErrNoProjectID) {
		t.Fatalf("no commit: %v, want ErrNoProjectID", err)
	}
	gitIn(t, dir, "commit", "-q", "--allow-empty", "-m", "root")
	root := gitIn(t, dir, "rev-parse", "HEAD")
	gitIn(t, dir, "commit", "-q", "--allow-empty", "-m", "second")
	id, roots, err := ProjectID(ctx, dir)
	if err != nil || id != root || roots != 1 {
		t.Fatalf("ProjectID = %s, %d, %v; want %s, 1", id, roots, err, root)
	}
	// An unrelated history merged in adds a root; the main line's stays the id.
	gitIn(t, dir, "checkout", "-q", "--orphan", "other")
	gitIn(t, dir, "commit", "-q", "--allow-empty", "-m", "other root")
	gitIn(t, dir, "checkout", "-q", "main")
	gitIn(t, dir, "merge", "-q", "--allow-unrelated-histories", "-m", "merge", "other")
	id, roots, err = ProjectID(ctx, dir)
	if err != nil || id != root || roots != 2 {
		t.Fatalf("after the merge: ProjectID = %s, %d, %v; want %s, 2", id, roots, err, root)
	}
	// A directory below the top level is a project of its own, named alike
	// in every clone.
	os.MkdirAll(filepath.Join(dir, "svc", "api"), 0o755)
	sub, _, err := ProjectID(ctx, filepath.Join(dir, "svc", "api"))
	if err != nil || !strings.HasPrefix(sub, root+"-") || len(sub) != len(root)+13 {
		t.Fatalf("subdirectory: ProjectID = %s, %v", sub, err)
	}
	// A clone at another path has the same id.
	clone := filepath.Join(t.TempDir(), "clone")
	gitIn(t, dir, "clone", "-q", dir, clone)
	if id2, _, err := ProjectID(ctx, clone); err != nil || id2 != root {
		t.Fatalf("clone: ProjectID = %s, %v; want %s", id2, err, root)
	}
	os.MkdirAll(filepath.Join(clone, "svc", "api"), 0o755)
	if sub2, _, err := ProjectID(ctx, filepath.Join(clone, "svc", "api")); err != nil || sub2 != sub {
		t.Fatalf("clone's subdirectory: ProjectID = %s, %v; want %s", sub2, err, sub)
	}
}

func TestCheckSessionAndRemote(t *testing.T) {
	for _, ok := range []string{"100", "1772359200", "a_b-c.d", "r1"} {
		if err := CheckSession(ok); err != nil {
			t.Errorf("CheckSession(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".x", "-x", "a..b", "a.lock", "a.", "a/b", "a b", "é", strings.Repeat("1", 65)} {
		if err := CheckSession(bad); !errors.Is(err, ErrBadSession) {
			t.Errorf("CheckSession(%q) = %v, want ErrBadSession", bad, err)
		}
	}
	for _, bad := range []string{"", "-x", "--upload-pack=touch", "a\nb"} {
		if err := CheckRemote("remote", bad); !errors.Is(err, ErrBadRemote) {
			t.Errorf("CheckRemote(%q) = %v, want ErrBadRemote", bad, err)
		}
	}
	if err := CheckRemote("remote", "ssh://host/x.git"); err != nil {
		t.Error(err)
	}
}

func TestParsePushPorcelain(t *testing.T) {
	out := "To /tmp/r.git\n" +
		"*\tabc:refs/rewind/projects/p/checkpoints/abc\t[new reference]\n" +
		"=\tdef:refs/rewind/projects/p/checkpoints/def\t[up to date]\n" +
		" \trefs/rewind/runs/1:refs/rewind/projects/p/runs/1\t1111111..2222222\n" +
		"!\trefs/rewind/runs/2:refs/rewind/projects/p/runs/2\t[rejected] (fetch first)\n" +
		"!\trefs/rewind/runs/3:refs/rewind/projects/p/runs/3\t[remote rejected] (hook declined)\n" +
		"Done\n"
	got := ParsePushPorcelain([]byte(out))
	want := map[string]string{
		"refs/rewind/projects/p/checkpoints/abc": "new",
		"refs/rewind/projects/p/checkpoints/def": "up to date",
		"refs/rewind/projects/p/runs/1":          "fast-forward",
		"refs/rewind/projects/p/runs/2":          "conflict",
		"refs/rewind/projects/p/runs/3":          "rejected",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d refs, want %d: %v", len(got), len(want), got)
	}
	for ref, res := range want {
		if got[ref].Result != res {
			t.Errorf("%s: %q, want %q", ref, got[ref].Result, res)
		}
	}
	if got["refs/rewind/projects/p/runs/3"].Why != "[remote rejected] (hook declined)" {
		t.Errorf("why: %q", got["refs/rewind/projects/p/runs/3"].Why)
	}
}

func FuzzParsePushPorcelain(f *testing.F) {
	f.Add([]byte("To x\n*\ta:refs/b\t[new reference]\nDone\n"))
	f.Add([]byte("!\ta:refs/b\t[rejected] (non-fast-forward)\n"))
	f.Add([]byte("=\t:\t\n \t\t\n"))
	f.Fuzz(func(t *testing.T, out []byte) {
		for ref, st := range ParsePushPorcelain(out) {
			if ref == "" || strings.Contains(ref, "\n") {
				t.Fatalf("bad ref %q", ref)
			}
			switch st.Result {
			case "new", "up to date", "fast-forward", "conflict", "rejected":
			default:
				t.Fatalf("unknown result %q", st.Result)
			}
		}
	})
}

func TestSaveRunChainsItsCommits(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	files := []RunFile{{Path: "rewind-run.json", Data: []byte("{}\n")}, {Path: "dispatch/manifest.jsonl", Data: []byte("{\"seq\":1}\n")}}
	first, err := s.SaveRun(ctx, "100", files, "run 100")
	if err != nil || !first.Updated || first.Parent != "" {
		t.Fatalf("first save: %+v, %v", first, err)
	}
	again, err := s.SaveRun(ctx, "100", files, "run 100")
	if err != nil || again.Updated || again.ID != first.ID {
		t.Fatalf("same content: %+v, %v; want no new commit", again, err)
	}
	files[1].Data = []byte("{\"seq\":1}\n{\"seq\":2}\n")
	files = append(files, RunFile{Path: "scratch/run.sh", Exec: true, Data: []byte("#!/bin/sh\n")})
	second, err := s.SaveRun(ctx, "100", files, "run 100")
	if err != nil || !second.Updated || second.Parent != first.ID {
		t.Fatalf("second save: %+v, %v; want a child of %s", second, err, first.ID)
	}
	got, err := s.RunFiles(ctx, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("RunFiles: %d files, want 3", len(got))
	}
	for _, f := range got {
		if f.Path == "scratch/run.sh" && !f.Exec || f.Path == "dispatch/manifest.jsonl" && string(f.Data) != string(files[1].Data) {
			t.Errorf("RunFiles: %+v", f)
		}
	}
	if _, err := s.SaveRun(ctx, "../x", files, "x"); !errors.Is(err, ErrBadSession) {
		t.Errorf("bad session: %v", err)
	}
	// A run is no checkpoint.
	cps, _ := s.List(ctx)
	if len(cps) != 0 {
		t.Errorf("List after SaveRun: %d checkpoints, want 0", len(cps))
	}
}

// TestBundleRoundTrip carries checkpoints and a run to another store through
// a bundle: the same ids, in the sender's order after the receiver's own, and
// a second import adds nothing.
func TestBundleRoundTrip(t *testing.T) {
	ctx := context.Background()
	a, wtA := newStore(t)
	mustWrite(t, filepath.Join(wtA, "f.txt"), "one")
	c1, err := a.Create(ctx, CreateOptions{Reason: "pre-wave-1", Source: "build"})
	if err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wtA, "f.txt"), "two")
	c2, err := a.Create(ctx, CreateOptions{Reason: "pre-wave-2", Source: "build"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.SaveRun(ctx, "7", []RunFile{{Path: "dispatch/manifest.jsonl", Data: []byte("x\n")}}, "run 7"); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "run.bundle")
	refs, err := a.WriteBundle(ctx, bundle, []string{"7"})
	if err != nil || len(refs) != 3 {
		t.Fatalf("WriteBundle: %v, %v", refs, err)
	}
	opened, err := OpenBundle(ctx, bundle)
	if err != nil || len(opened.Refs) != 3 || len(opened.Runs()) != 1 {
		t.Fatalf("OpenBundle: %v, %v", opened, err)
	}
	if files, err := opened.RunFiles(ctx, opened.Runs()["7"]); err != nil || len(files) != 1 || string(files[0].Data) != "x\n" {
		t.Fatalf("RunFiles of the bundle: %v, %v", files, err)
	}
	opened.Close()

	b, wtB := newStore(t)
	mustWrite(t, filepath.Join(wtB, "g.txt"), "mine")
	own, err := b.Create(ctx, CreateOptions{Reason: "mine", Source: "manual"})
	if err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		in, err := b.FetchBundle(ctx, bundle)
		if err != nil {
			t.Fatal(err)
		}
		acc, err := b.Accept(ctx, in, true, 50)
		if err != nil {
			t.Fatal(err)
		}
		wantAdded, wantRun := 2, "new"
		if round == 1 {
			wantAdded, wantRun = 0, "up to date"
		}
		if len(acc.Added) != wantAdded || len(acc.Runs) != 1 || acc.Runs[0].Result != wantRun {
			t.Fatalf("round %d: added %d, runs %+v", round, len(acc.Added), acc.Runs)
		}
	}
	cps, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cps {
		ids = append(ids, c.ID)
	}
	want := []string{own.Checkpoint.ID, c1.Checkpoint.ID, c2.Checkpoint.ID}
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Fatalf("checkpoints after import: %v, want %v", ids, want)
	}
	if cps[2].Seq != 3 || cps[1].Reason != "pre-wave-1" {
		t.Errorf("imported checkpoint: seq %d reason %q", cps[2].Seq, cps[1].Reason)
	}
	// The incoming refs are gone.
	out, _ := b.git().Run(ctx, "for-each-ref", incomingPrefix)
	if len(out) != 0 {
		t.Errorf("incoming refs left: %s", out)
	}
	// A damaged bundle is refused by VerifyBundle.
	data, _ := os.ReadFile(bundle)
	cut := filepath.Join(t.TempDir(), "cut.bundle")
	os.WriteFile(cut, data[:len(data)-40], 0o600)
	if _, err := OpenBundle(ctx, cut); !errors.Is(err, ErrBadBundle) {
		t.Errorf("cut bundle: %v, want ErrBadBundle", err)
	}
}

// TestAcceptRefusesADivergedRun: a run two stores continued apart is a
// conflict; with allOrNothing nothing at all is taken.
func TestAcceptRefusesADivergedRun(t *testing.T) {
	ctx := context.Background()
	a, wtA := newStore(t)
	mustWrite(t, filepath.Join(wtA, "f.txt"), "one")
	if _, err := a.Create(ctx, CreateOptions{Reason: "pre-wave-1", Source: "build"}); err != nil {
		t.Fatal(err)
	}
	base := []RunFile{{Path: "dispatch/manifest.jsonl", Data: []byte("1\n")}}
	if _, err := a.SaveRun(ctx, "7", base, "run 7"); err != nil {
		t.Fatal(err)
	}
	bundle := filepath.Join(t.TempDir(), "base.bundle")
	if _, err := a.WriteBundle(ctx, bundle, []string{"7"}); err != nil {
		t.Fatal(err)
	}
	b, _ := newStore(t)
	in, _ := b.FetchBundle(ctx, bundle)
	if _, err := b.Accept(ctx, in, true, 50); err != nil {
		t.Fatal(err)
	}
	// Each goes on apart.
	b.Now = func() time.Time { return time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC) }
	if _, err := b.SaveRun(ctx, "7", []RunFile{{Path: "dispatch/manifest.jsonl", Data: []byte("1\nb\n")}}, "run 7"); err != nil {
		t.Fatal(err)
	}
	bRun, _ := b.resolveRef(ctx, RunPrefix+"7")
	if _, err := a.SaveRun(ctx, "7", []RunFile{{Path: "dispatch/manifest.jsonl", Data: []byte("1\na\n")}}, "run 7"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, filepath.Join(wtA, "f.txt"), "two")
	if _, err := a.Create(ctx, CreateOptions{Reason: "pre-wave-2", Source: "build"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.WriteBundle(ctx, bundle, []string{"7"}); err != nil {
		t.Fatal(err)
	}
	in, _ = b.FetchBundle(ctx, bundle)
	acc, err := b.Accept(ctx, in, true, 50)
	if err != nil {
		t.Fatal(err)
	}
	if c := acc.Conflicts(); len(c) != 1 || c[0].Session != "7" || len(acc.Added) != 0 {
		t.Fatalf("all or nothing: conflicts %+v, added %d", c, len(acc.Added))
	}
	if now, _ := b.resolveRef(ctx, RunPrefix+"7"); now != bRun {
		t.Fatalf("the run's ref moved: %s, want %s", now, bRun)
	}
	// Without allOrNothing (a pull) the checkpoint is taken, the run still not.
	in, _ = b.FetchBundle(ctx, bundle)
	acc, err = b.Accept(ctx, in, false, 50)
	if err != nil {
		t.Fatal(err)
	}
	if len(acc.Conflicts()) != 1 || len(acc.Added) != 1 {
		t.Fatalf("pull: conflicts %+v, added %d", acc.Conflicts(), len(acc.Added))
	}
	if now, _ := b.resolveRef(ctx, RunPrefix+"7"); now != bRun {
		t.Fatalf("the run's ref moved: %s, want %s", now, bRun)
	}
}

// TestAcceptLeavesOutWhatTheStoreWouldEvict: with a budget of 2, only the
// incoming checkpoints among the two newest of all are taken.
func TestAcceptLeavesOutWhatTheStoreWouldEvict(t *testing.T) {
	ctx := context.Background()
	a, wtA := newStore(t)
	var ids []string
	for i, r := range []string{"one", "two", "three"} {
		mustWrite(t, filepath.Join(wtA, "f.txt"), r)
		c, err := a.Create(ctx, CreateOptions{Reason: "pre-wave-" + string(rune('1'+i)), Source: "build"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.Checkpoint.ID)
	}
	a.SaveRun(ctx, "7", []RunFile{{Path: "dispatch/x", Data: []byte("x")}}, "run 7")
	bundle := filepath.Join(t.TempDir(), "b.bundle")
	if _, err := a.WriteBundle(ctx, bundle, []string{"7"}); err != nil {
		t.Fatal(err)
	}
	b, _ := newStore(t)
	in, err := b.FetchBundle(ctx, bundle)
	if err != nil {
		t.Fatal(err)
	}
	acc, err := b.Accept(ctx, in, false, 2)
	if err != nil {
		t.Fatal(err)
	}
	if acc.TooOld != 1 || len(acc.Added) != 2 || acc.Added[0].ID != ids[1] || acc.Added[1].ID != ids[2] {
		t.Fatalf("added %v, too old %d", acc.Added, acc.TooOld)
	}
}

// TestStaleIncomingRefsAreDropped: what a rewind that died between its fetch
// and its accept left is deleted by the next fetch.
func TestStaleIncomingRefsAreDropped(t *testing.T) {
	ctx := context.Background()
	a, wtA := newStore(t)
	mustWrite(t, filepath.Join(wtA, "f.txt"), "one")
	c, err := a.Create(ctx, CreateOptions{Reason: "pre-wave-1", Source: "build"})
	if err != nil {
		t.Fatal(err)
	}
	a.SaveRun(ctx, "7", []RunFile{{Path: "dispatch/x", Data: []byte("x")}}, "run 7")
	bundle := filepath.Join(t.TempDir(), "b.bundle")
	if _, err := a.WriteBundle(ctx, bundle, []string{"7"}); err != nil {
		t.Fatal(err)
	}
	b, _ := newStore(t)
	if _, err := b.FetchBundle(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	// A dead rewind's namespace (pid 0x7ffffffe does not run), and a live one's (ours).
	if _, err := b.git().Run(ctx, "update-ref", incomingPrefix+"2147483646-aa/checkpoints/1", c.Checkpoint.ID); err != nil {
		t.Fatal(err)
	}
	in, err := b.FetchBundle(ctx, bundle)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := b.git().Run(ctx, "for-each-ref", "--format=%(refname)", incomingPrefix)
	if strings.Contains(string(out), "2147483646-aa") {
		t.Errorf("a dead rewind's incoming refs are left: %s", out)
	}
	if !strings.Contains(string(out), in.ns) {
		t.Errorf("this fetch's refs are gone: %s", out)
	}
}
