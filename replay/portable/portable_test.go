package portable

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rewind-cli/rewind/checkpoint"
)

func write(t *testing.T, path, content string, mtime time.Time) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
}

// machine1 lays out a crashed run as a pipeline leaves it: the dispatch
// directory in tmp, markers and a handoff in the scratch directory.
func machine1(t *testing.T) (Source, time.Time) {
	root := t.TempDir()
	mtime := time.Date(2026, 3, 1, 10, 5, 0, 123456789, time.UTC)
	src := Source{Session: "100", Skill: "build", Project: "abc", WorkTree: filepath.Join(root, "proj"),
		ScratchDir: filepath.Join(root, "scratch"), TmpDir: filepath.Join(root, "tmp")}
	src.DispatchDir = filepath.Join(src.TmpDir, "crucible-dispatch-100")
	src.LiveDir = src.DispatchDir + "/"
	src.Marker = true
	write(t, filepath.Join(src.DispatchDir, "manifest.jsonl"), `{"seq":1,"file":"1-plan-writer.md"}`+"\n", mtime)
	write(t, filepath.Join(src.DispatchDir, "1-plan-writer.md"), "# Dispatch: plan-writer\n", mtime)
	write(t, filepath.Join(src.ScratchDir, ".pipeline-active"),
		`{"pipeline_id":"100","skill":"build","phase":"3","start_time":"2026-03-01T10:00:00Z","scratch_dir":"`+src.ScratchDir+`","dispatch_dir":"`+src.DispatchDir+`/","branch":"main","baseline_sha":null,"pid":4242,"host":"machine1"}`+"\n", mtime)
	write(t, filepath.Join(src.ScratchDir, ".dispatch-active-100"), "dispatch-dir: "+src.DispatchDir+"/\nseq: 1\n", mtime)
	write(t, filepath.Join(src.ScratchDir, "handoff-2-to-3.md"), "# Phase Handoff: 2 → 3\n", mtime)
	write(t, filepath.Join(src.ScratchDir, "unrelated.txt"), "not the run's\n", mtime)
	write(t, filepath.Join(src.ScratchDir, ".dispatch-active-99"), "another session\n", mtime)
	write(t, filepath.Join(src.TmpDir, "crucible-debug-100", "handoff-1-to-2.md"), "debug\n", mtime)
	return src, mtime
}

func TestCollectAndImport(t *testing.T) {
	src, mtime := machine1(t)
	var warnings []string
	files, meta, err := Collect(src, func(w string) { warnings = append(warnings, w) })
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	want := "rewind-run.json dispatch/1-plan-writer.md dispatch/manifest.jsonl scratch/.pipeline-active scratch/.dispatch-active-100 scratch/pipeline-status.md scratch/handoff-2-to-3.md tmp/crucible-debug-100/handoff-1-to-2.md"
	want = strings.Replace(want, " scratch/pipeline-status.md", "", 1) // absent: left out
	if strings.Join(paths, " ") != want {
		t.Fatalf("collected\n%s\nwant\n%s", strings.Join(paths, " "), want)
	}
	if len(meta.Files) != len(files)-1 || len(warnings) != 0 {
		t.Fatalf("meta files %d, warnings %v", len(meta.Files), warnings)
	}

	root := t.TempDir()
	target := Target{WorkTree: filepath.Join(root, "clone"), ScratchDir: filepath.Join(root, "scratch2"), TmpDir: filepath.Join(root, "tmp2")}
	plan, err := PlanImport(files, target)
	if err != nil {
		t.Fatal(err)
	}
	if plan.DispatchDir != filepath.Join(target.TmpDir, "crucible-dispatch-100") || len(plan.Conflicts) != 0 {
		t.Fatalf("plan: dispatch %s, conflicts %v", plan.DispatchDir, plan.Conflicts)
	}
	if n, err := plan.Apply(); err != nil || n != len(files)-1 {
		t.Fatalf("Apply: %d, %v", n, err)
	}
	marker, _ := os.ReadFile(filepath.Join(target.ScratchDir, ".pipeline-active"))
	if !strings.Contains(string(marker), `"scratch_dir":"`+target.ScratchDir+`","dispatch_dir":"`+plan.DispatchDir+`/","branch":"main","baseline_sha":null}`) {
		t.Errorf("marker not rebased: %s", marker)
	}
	active, _ := os.ReadFile(filepath.Join(target.ScratchDir, ".dispatch-active-100"))
	if string(active) != "dispatch-dir: "+plan.DispatchDir+"/\nseq: 1\n" {
		t.Errorf(".dispatch-active-100: %q", active)
	}
	manifestData, _ := os.ReadFile(filepath.Join(plan.DispatchDir, "manifest.jsonl"))
	if string(manifestData) != `{"seq":1,"file":"1-plan-writer.md"}`+"\n" {
		t.Errorf("manifest changed: %q", manifestData)
	}
	fi, err := os.Stat(filepath.Join(target.ScratchDir, "handoff-2-to-3.md"))
	if err != nil || !fi.ModTime().Equal(mtime) {
		t.Errorf("handoff mtime: %v, %v; want %v", fi.ModTime(), err, mtime)
	}
	if _, err := os.Stat(filepath.Join(target.TmpDir, "crucible-debug-100", "handoff-1-to-2.md")); err != nil {
		t.Error(err)
	}

	// Importing again writes nothing.
	again, err := PlanImport(files, target)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range again.Writes {
		if !w.Same {
			t.Errorf("second import would write %s", w.Path)
		}
	}
	// A file that went on is a conflict, and nothing is written.
	write(t, filepath.Join(plan.DispatchDir, "manifest.jsonl"), "went on\n", mtime)
	os.Remove(filepath.Join(target.ScratchDir, "handoff-2-to-3.md"))
	third, err := PlanImport(files, target)
	if err != nil {
		t.Fatal(err)
	}
	if len(third.Conflicts) != 1 || third.Conflicts[0].Path != filepath.Join(plan.DispatchDir, "manifest.jsonl") {
		t.Fatalf("conflicts: %v", third.Conflicts)
	}
	if _, err := third.Apply(); err == nil {
		t.Fatal("Apply with a conflict succeeded")
	}
	if _, err := os.Stat(filepath.Join(target.ScratchDir, "handoff-2-to-3.md")); !os.IsNotExist(err) {
		t.Errorf("a refused import wrote the handoff: %v", err)
	}
}

func TestDurableCopyStaysInTheScratchDirectory(t *testing.T) {
	meta := &Meta{Session: "7", WorkTree: "/a/proj", ScratchDir: "/a/scratch", DispatchDir: "/a/scratch/crucible-dispatch-7", TmpDir: "/tmp"}
	p := Place(meta, Target{WorkTree: "/b/proj", ScratchDir: "/b/scratch", TmpDir: "/b/tmp"})
	if p.DispatchDir != "/b/scratch/crucible-dispatch-7" {
		t.Fatalf("dispatch dir %s", p.DispatchDir)
	}
}

func TestRebase(t *testing.T) {
	meta := &Meta{Session: "7", WorkTree: "/a/proj", ScratchDir: "/a/proj-scratch", DispatchDir: "/tmp/crucible-dispatch-7", TmpDir: "/tmp"}
	p := Place(meta, Target{WorkTree: "/b/clone", ScratchDir: "/b/s", TmpDir: "/b/tmp"})
	for old, want := range map[string]string{
		"/tmp/crucible-dispatch-7/":     "/b/tmp/crucible-dispatch-7/",
		"/tmp/crucible-dispatch-7/x.md": "/b/tmp/crucible-dispatch-7/x.md",
		"/tmp/crucible-build-mode.md":   "/b/tmp/crucible-build-mode.md",
		"/a/proj-scratch":               "/b/s",
		"/a/proj/src/a.go":              "/b/clone/src/a.go",
		"/a/projects/x":                 "/a/projects/x", // not under /a/proj
		"/elsewhere/file":               "/elsewhere/file",
		"relative/path":                 "relative/path",
		"":                              "",
	} {
		if got := p.Rebase(old); got != want {
			t.Errorf("Rebase(%q) = %q, want %q", old, got, want)
		}
	}
}

func TestParseMetaRefuses(t *testing.T) {
	good := `{"format":1,"session":"7","work_tree":"/a","scratch_dir":"/s","dispatch_dir":"/tmp/d","tmp_dir":"/tmp","files":[{"path":"dispatch/x","mode":"0644","mtime":"2026-01-01T00:00:00Z"}]}`
	if _, err := ParseMeta([]byte(good)); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]string{
		"format":        strings.Replace(good, `"format":1`, `"format":2`, 1),
		"session":       strings.Replace(good, `"session":"7"`, `"session":"../7"`, 1),
		"relative":      strings.Replace(good, `"work_tree":"/a"`, `"work_tree":"a"`, 1),
		"escape":        strings.Replace(good, `"path":"dispatch/x"`, `"path":"dispatch/../../x"`, 1),
		"root":          strings.Replace(good, `"path":"dispatch/x"`, `"path":"etc/x"`, 1),
		"mode":          strings.Replace(good, `"mode":"0644"`, `"mode":"9"`, 1),
		"not json":      good[:20],
		"wrong type":    strings.Replace(good, `"format":1`, `"format":"1"`, 1),
		"scratch":       strings.Replace(good, `"scratch_dir":"/s"`, `"scratch_dir":"s"`, 1),
		"dispatch root": strings.Replace(good, `"path":"dispatch/x"`, `"path":"dispatch"`, 1),
		"dispatch up":   strings.Replace(good, `"dispatch_dir":"/tmp/d"`, `"dispatch_dir":"/tmp/.."`, 1),
		"dispatch /":    strings.Replace(good, `"dispatch_dir":"/tmp/d"`, `"dispatch_dir":"/"`, 1),
	} {
		if _, err := ParseMeta([]byte(bad)); !errors.Is(err, ErrBadMeta) {
			t.Errorf("%s: %v, want ErrBadMeta", name, err)
		}
	}
}

func TestPlanImportRefusesAPathOutsideTheRoots(t *testing.T) {
	files := []checkpoint.RunFile{
		{Path: MetaFile, Data: []byte(`{"format":1,"session":"7","work_tree":"/a","dispatch_dir":"/tmp/d","tmp_dir":"/tmp","files":[]}`)},
		{Path: "other/x", Data: []byte("x")},
	}
	if _, err := PlanImport(files, Target{WorkTree: "/b", ScratchDir: t.TempDir(), TmpDir: t.TempDir()}); !errors.Is(err, ErrBadMeta) {
		t.Fatalf("PlanImport: %v, want ErrBadMeta", err)
	}
	if _, err := PlanImport(files[1:], Target{}); !errors.Is(err, ErrBadMeta) {
		t.Fatalf("without rewind-run.json: %v, want ErrBadMeta", err)
	}
}

func FuzzParseMeta(f *testing.F) {
	f.Add([]byte(`{"format":1,"session":"7","work_tree":"/a","scratch_dir":"/s","dispatch_dir":"/tmp/d","tmp_dir":"/tmp","files":[{"path":"dispatch/x","mode":"0644","mtime":"2026-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"format":1,"session":"7","work_tree":"/a","dispatch_dir":"/tmp/d","tmp_dir":"/tmp","files":null}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"format":1,"session":"7","work_tree":"/a","dispatch_dir":"/tmp/..","tmp_dir":"/tmp","files":[{"path":"dispatch/x","mode":"0644","mtime":"2026-01-01T00:00:00Z"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMeta(data)
		if err != nil {
			if !errors.Is(err, ErrBadMeta) {
				t.Fatalf("error without ErrBadMeta: %v", err)
			}
			return
		}
		p := Place(m, Target{WorkTree: "/w", ScratchDir: "/s", TmpDir: "/t"})
		for _, f := range m.Files {
			disk := p.Disk(f.Path)
			if !strings.HasPrefix(disk, "/s/") && !strings.HasPrefix(disk, "/t/") && !strings.HasPrefix(disk, p.DispatchDir+"/") {
				t.Fatalf("file %q lands outside the run's directories: %s", f.Path, disk)
			}
		}
	})
}

func TestSupersedeTakesBackOnlyUntouchedEarlierFiles(t *testing.T) {
	src, mtime := machine1(t)
	v1, _, err := Collect(src, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	target := Target{WorkTree: filepath.Join(root, "clone"), ScratchDir: filepath.Join(root, "s"), TmpDir: filepath.Join(root, "t")}
	plan, _ := PlanImport(v1, target)
	if _, err := plan.Apply(); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(src.ScratchDir, "handoff-2-to-3.md"), "# Phase Handoff: 2 → 3\nmore\n", mtime)
	write(t, filepath.Join(src.DispatchDir, "manifest.jsonl"), `{"seq":1,"file":"1-plan-writer.md"}`+"\n"+`{"seq":2}`+"\n", mtime)
	v2, _, _ := Collect(src, func(string) {})
	// The manifest went on here too: it is not the earlier version's any more.
	write(t, filepath.Join(target.TmpDir, "crucible-dispatch-100", "manifest.jsonl"), "local\n", mtime)
	plan2, err := PlanImport(v2, target)
	if err != nil || len(plan2.Conflicts) != 2 {
		t.Fatalf("conflicts %v, %v; want 2", plan2.Conflicts, err)
	}
	if left := plan2.Supersede(v1); left != 1 || plan2.Conflicts[0].Path != filepath.Join(target.TmpDir, "crucible-dispatch-100", "manifest.jsonl") {
		t.Fatalf("after Supersede: %d left, %v", left, plan2.Conflicts)
	}
	if len(plan2.Superseded) != 1 || plan2.Superseded[0] != filepath.Join(target.ScratchDir, "handoff-2-to-3.md") {
		t.Fatalf("superseded %v", plan2.Superseded)
	}
}
