package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

func TestPipelineLifecycle(t *testing.T) {
	root := t.TempDir()
	scratch := filepath.Join(root, "scratch")
	tmp := filepath.Join(root, "tmp")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	branch, sha := "main", "0123456789abcdef0123456789abcdef01234567"
	o := StartOptions{Skill: "build", Scratch: scratch, TmpDir: tmp, Now: now, Branch: &branch, SHA: &sha}
	res, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Marker.PipelineID != "1767323045" || res.Marker.DispatchDir != filepath.Join(tmp, "crucible-dispatch-1767323045")+"/" {
		t.Fatalf("marker %+v", res.Marker)
	}
	data, _ := os.ReadFile(filepath.Join(scratch, ActiveMarker))
	want := `{"pipeline_id":"1767323045","skill":"build","phase":"","start_time":"2026-01-02T03:04:05Z","scratch_dir":"` + scratch +
		`","dispatch_dir":"` + tmp + `/crucible-dispatch-1767323045/","branch":"main","baseline_sha":"` + sha + `"}` + "\n"
	if string(data) != want {
		t.Errorf("marker:\n got %s\nwant %s", data, want)
	}
	da, _ := os.ReadFile(DispatchActivePath(scratch, "1767323045"))
	if string(da) != "dispatch-dir: "+tmp+"/crucible-dispatch-1767323045/\nseq: 0\n" {
		t.Errorf("dispatch-active: %q", da)
	}

	// The same session named again: compaction recovery.
	named := o
	named.Session = "1767323045"
	res, err = Start(named)
	if err != nil || !res.Resumed {
		t.Fatalf("same session: %+v, %v", res, err)
	}
	// An automatic session is always a new pipeline: with a marker in the
	// scratch directory, that one crashed (or still runs).
	var crashed *CrashedError
	if _, err := Start(o); !errors.As(err, &crashed) {
		t.Fatalf("automatic session beside a marker: %v", err)
	}

	if _, err := SetPhase(scratch, "3"); err != nil {
		t.Fatal(err)
	}
	m, err := ReadMarker(scratch)
	if err != nil || m.Phase != "3" {
		t.Fatalf("phase: %+v, %v", m, err)
	}
	if matches, _ := filepath.Glob(filepath.Join(scratch, ".*.tmp-*")); len(matches) > 0 {
		t.Errorf("temporary files left: %v", matches)
	}

	// Another session: a crash.
	o2 := o
	o2.Session = "99"
	_, err = Start(o2)
	var crash *CrashedError
	if !errors.As(err, &crash) || crash.Marker.PipelineID != "1767323045" ||
		err.Error() != "previous build pipeline 1767323045 (started 2026-01-02T03:04:05Z on branch main) crashed at phase 3" {
		t.Fatalf("crash: %v", err)
	}
	o2.Force = true
	res, err = Start(o2)
	if err != nil || res.Archived != filepath.Join(scratch, ".pipeline-crashed-1767323045") || !exists(res.Archived) {
		t.Fatalf("force: %+v, %v", res, err)
	}

	// Finish: a run with a ledger copies both, as crucible's cleanup does.
	d := res.Marker.DispatchDir
	os.WriteFile(filepath.Join(d, FileName), []byte(wantBefore1+"\n"), 0o644)
	os.WriteFile(filepath.Join(d, LedgerName), []byte("{}\n"), 0o644)
	fr, err := Finish(scratch, false)
	if err != nil || !strings.HasPrefix(fr.Message, "copied manifest.jsonl + receipt-ledger.jsonl to "+scratch+"/crucible-dispatch-99; deleted ") {
		t.Fatalf("finish: %+v, %v", fr, err)
	}
	if exists(filepath.Join(scratch, ActiveMarker)) || exists(DispatchActivePath(scratch, "99")) || exists(d) {
		t.Error("finish left markers or the dispatch dir")
	}
	if _, err := Finish(scratch, false); !errors.Is(err, ErrNoMarker) {
		t.Errorf("finish twice: %v", err)
	}
}

func TestMarkerKeepsUnknownKeys(t *testing.T) {
	scratch := t.TempDir()
	os.WriteFile(filepath.Join(scratch, ActiveMarker), []byte("{\n  \"pipeline_id\": 7,\n  \"skill\": \"build\",\n  \"phase\": \"2\",\n  \"extra\": [1, 2],\n  \"branch\": null\n}\n"), 0o644)
	if _, err := SetPhase(scratch, "3"); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(scratch, ActiveMarker))
	want := `{"pipeline_id":"7","skill":"build","phase":"3","start_time":"","scratch_dir":"","dispatch_dir":"","branch":null,"baseline_sha":null,"extra":[1,2]}` + "\n"
	if string(data) != want {
		t.Errorf("got %s", data)
	}
	os.WriteFile(filepath.Join(scratch, ActiveMarker), []byte("{\"pipeline_id\":"), 0o644)
	var me *MarkerError
	if _, err := ReadMarker(scratch); !errors.As(err, &me) {
		t.Errorf("unreadable: %v", err)
	}
}

// FuzzParseMarker: any bytes parse or fail cleanly, and a parsed marker
// re-encodes to a marker that parses to the same fields.
func FuzzParseMarker(f *testing.F) {
	f.Add([]byte(`{"pipeline_id":"1","skill":"build","phase":"2","branch":null,"x":[1]}`))
	f.Add([]byte("{\n \"pipeline_id\": 7 }"))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMarker("m", data)
		if err != nil {
			return
		}
		m2, err := ParseMarker("m", m.Encode())
		if err != nil {
			t.Fatalf("re-encoded marker does not parse: %v\n%s", err, m.Encode())
		}
		if m.PipelineID != m2.PipelineID && !strings.ContainsRune(m.PipelineID, utf8.RuneError) {
			t.Fatalf("pipeline_id %q became %q", m.PipelineID, m2.PipelineID)
		}
	})
}

// startSession7 starts session 7 of a build pipeline in a temporary directory
// and returns its scratch and dispatch directories.
func startSession7(t *testing.T) (scratch, dispatchDir string) {
	t.Helper()
	root := t.TempDir()
	scratch = filepath.Join(root, "scratch")
	res, err := Start(StartOptions{Skill: "build", Scratch: scratch, TmpDir: filepath.Join(root, "tmp"), Session: "7", Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return scratch, res.Marker.DispatchDir
}

// A dispatch directory already cleaned up with `dispatch cleanup` is fine for a
// success finish: its copy is in the scratch directory.
func TestFinishAfterDispatchCleanup(t *testing.T) {
	scratch, d := startSession7(t)
	os.WriteFile(filepath.Join(d, FileName), []byte(wantBefore1+"\n"), 0o644)
	os.WriteFile(filepath.Join(d, LedgerName), []byte("{}\n"), 0o644)
	if _, err := Cleanup(d, scratch, false); err != nil {
		t.Fatal(err)
	}
	fr, err := Finish(scratch, false)
	if err != nil || fr.Message != d+" is already cleaned up; its copy is in "+filepath.Join(scratch, "crucible-dispatch-7") {
		t.Fatalf("finish: %+v, %v", fr, err)
	}
	if exists(filepath.Join(scratch, ActiveMarker)) {
		t.Error("marker left")
	}
}

// A dispatch directory that is gone cannot be cleaned up: a success finish
// refuses (DirMissing), and finish --failed removes the markers all the same.
func TestFinishFailedDirGone(t *testing.T) {
	scratch, d := startSession7(t)
	os.RemoveAll(d)
	var de *DispatchError
	if _, err := Finish(scratch, false); !errors.As(err, &de) || !de.DirMissing {
		t.Fatalf("finish: %v", err)
	}
	fr, err := Finish(scratch, true)
	if err != nil || !fr.DirGone || fr.Message != "dispatch dir missing: "+d+"; nothing copied; removed the markers of pipeline 7" {
		t.Fatalf("finish --failed: %+v, %v", fr, err)
	}
	if exists(filepath.Join(scratch, ActiveMarker)) || exists(DispatchActivePath(scratch, "7")) {
		t.Error("markers left")
	}
}

// start --force archives the crashed pipeline's .dispatch-active-<id> too, so
// a recovery globbing .dispatch-active-* finds only the new pipeline.
func TestStartForceArchivesDispatchMarker(t *testing.T) {
	root := t.TempDir()
	scratch, tmp := filepath.Join(root, "scratch"), filepath.Join(root, "tmp")
	o := StartOptions{Skill: "build", Scratch: scratch, TmpDir: tmp, Session: "100", Now: time.Now()}
	if _, err := Start(o); err != nil {
		t.Fatal(err)
	}
	o.Session, o.Force = "200", true
	res, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(scratch, ".dispatch-crashed-100")
	if len(res.ArchivedDispatch) != 1 || res.ArchivedDispatch[0] != want || !exists(want) {
		t.Errorf("archived: %v", res.ArchivedDispatch)
	}
	if got, _ := filepath.Glob(filepath.Join(scratch, DispatchActivePrefix+"*")); len(got) != 1 || got[0] != DispatchActivePath(scratch, "200") {
		t.Errorf(".dispatch-active-* = %v", got)
	}

	// An unreadable marker: every other session's dispatch marker is stale.
	os.WriteFile(filepath.Join(scratch, ActiveMarker), []byte("{"), 0o644)
	o.Session = "300"
	res, err = Start(o)
	if err != nil || len(res.ArchivedDispatch) != 1 || res.ArchivedDispatch[0] != filepath.Join(scratch, ".dispatch-crashed-200") {
		t.Fatalf("unreadable marker: %+v, %v", res, err)
	}
}

func TestStartNeverTakesAnExistingDispatchDir(t *testing.T) {
	root := t.TempDir()
	tmp := filepath.Join(root, "tmp")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	start := func(scratch, session string) (*StartResult, error) {
		return Start(StartOptions{Skill: "build", Scratch: filepath.Join(root, scratch), TmpDir: tmp, Session: session, Now: now})
	}
	// Two pipelines started in the same second, in two scratch directories.
	a, err := start("a", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := start("b", "")
	if err != nil {
		t.Fatal(err)
	}
	if a.Marker.PipelineID != "1767323045" || b.Marker.PipelineID != "1767323045-2" || a.Marker.DispatchDir == b.Marker.DispatchDir {
		t.Fatalf("sessions %s and %s", a.Marker.PipelineID, b.Marker.PipelineID)
	}
	fi, err := os.Lstat(b.Marker.DispatchDir)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("dispatch dir: %v, %v", fi, err)
	}
	// A directory someone made first is skipped by an automatic session...
	if err := os.Mkdir(filepath.Join(tmp, "crucible-dispatch-1767323045-3"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(tmp, "crucible-dispatch-1767323045-4")); err != nil {
		t.Fatal(err)
	}
	c, err := start("c", "")
	if err != nil || c.Marker.PipelineID != "1767323045-5" {
		t.Fatalf("after taken names: %+v, %v", c, err)
	}
	// ... and refused when named, a symlink included; nothing is written.
	for _, id := range []string{"1767323045", "1767323045-3", "1767323045-4"} {
		_, err := start("d", id)
		var taken *SessionTakenError
		if !errors.As(err, &taken) || taken.Dir != filepath.Join(tmp, "crucible-dispatch-"+id)+"/" || taken.Symlink != (id == "1767323045-4") {
			t.Errorf("session %s: %v", id, err)
		}
		if _, err := os.Stat(filepath.Join(root, "d", ActiveMarker)); err == nil {
			t.Fatalf("session %s: a refused start wrote a marker", id)
		}
	}
	// A finished pipeline's durable copy in the scratch directory takes its
	// session too: the copy would be read as the new pipeline's manifest.
	if err := os.MkdirAll(filepath.Join(root, "e", "crucible-dispatch-1767323045-6"), 0o700); err != nil {
		t.Fatal(err)
	}
	var copyTaken *SessionTakenError
	if _, err := start("e", "1767323045-6"); !errors.As(err, &copyTaken) || !copyTaken.Copy {
		t.Errorf("session of a durable copy: %v", err)
	}
	if e, err := start("e", ""); err != nil || e.Marker.PipelineID != "1767323045-7" {
		t.Errorf("automatic beside a durable copy: %+v, %v", e, err)
	}
	// A refused forced start leaves the crashed pipeline's marker in place.
	_, err = Start(StartOptions{Skill: "build", Scratch: filepath.Join(root, "a"), TmpDir: tmp, Session: "1767323045-3", Now: now, Force: true})
	var taken *SessionTakenError
	if !errors.As(err, &taken) || !exists(filepath.Join(root, "a", ActiveMarker)) {
		t.Fatalf("forced start on a taken session: %v", err)
	}
}

func TestStartsAtOnceGetDistinctDirectories(t *testing.T) {
	root := t.TempDir()
	tmp := filepath.Join(root, "tmp")
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 8
	dirs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			res, err := Start(StartOptions{Skill: "build", Scratch: filepath.Join(root, "scratch", strconv.Itoa(i)), TmpDir: tmp, Now: now})
			errs[i] = err
			if err == nil {
				dirs[i] = res.Marker.DispatchDir
			}
		}(i)
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range dirs {
		if errs[i] != nil || seen[dirs[i]] {
			t.Fatalf("start %d: %q, %v (dirs %q)", i, dirs[i], errs[i], dirs)
		}
		seen[dirs[i]] = true
	}
}
