package checkpoint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
)

// Every capture of the package's tests that takes the import's tree as the
// index's checks it with write-tree.
func init() { checkImportTree = true }

// TestPreimportWritesOnePack checks that a checkpoint of a few changed files
// writes their blobs and trees as one pack (no loose object but its commit),
// that the packs one per checkpoint are merged past packsMax, and that every
// checkpoint stays whole: fsck clean, and each one restored exactly.
func TestPreimportWritesOnePack(t *testing.T) {
	needPreimport(t)
	ctx := context.Background()
	s, wt := newStore(t)
	defer func(n int) { packsMax = n }(packsMax)
	packsMax = 4
	for i := 0; i < 40; i++ {
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/e%d/f%d.txt", i%4, i%3, i)), fmt.Sprintf("file %d\n", i))
	}
	if _, err := s.Create(ctx, CreateOptions{Reason: "start", Source: "test"}); err != nil {
		t.Fatal(err)
	}
	loose := func() []string {
		var out []string
		filepath.WalkDir(filepath.Join(s.gitDir(), "objects"), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.Contains(p, "/pack/") && !strings.Contains(p, "/info/") {
				out = append(out, p)
			}
			return nil
		})
		return out
	}
	trees := map[string]string{}
	imported := 0
	for step := 0; step < 12; step++ {
		time.Sleep(10 * time.Millisecond)
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/e%d/f%d.txt", step%4, step%3, step)), fmt.Sprintf("step %d\n", step))
		os.Remove(filepath.Join(wt, fmt.Sprintf("d%d/e%d/f%d.txt", (step+1)%4, (step+1)%3, step+20)))
		before := len(loose())
		made, trace := traceCreate(t, s, fmt.Sprint("step ", step))
		trees[made.Checkpoint.ID] = freshTree(t, wt)
		if made.Checkpoint.Tree != trees[made.Checkpoint.ID] {
			t.Fatalf("step %d: tree %s, a fresh store's %s", step, made.Checkpoint.Tree, trees[made.Checkpoint.ID])
		}
		if strings.Contains(trace, "written as one pack") {
			imported++
			// only the commit (and the index's own files) are new and loose
			if got := len(loose()) - before; got > 1 {
				t.Errorf("step %d: %d new loose objects beside the pack", step, got)
			}
		}
		// the rule of consolidatePacks: at most packsMax small packs (the
		// others, of these few files at most packsMax of them, are a first
		// checkpoint's, one per CPU)
		packs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.pack"))
		var sizes []int64
		var total int64
		for _, p := range packs {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			sizes, total = append(sizes, fi.Size()), total+fi.Size()
		}
		small, bulk := 0, s.bulkPacks()
		for i, size := range sizes {
			if !largePack(size, total, bulk[filepath.Base(packs[i])]) {
				small++
			}
		}
		if small > packsMax || len(packs)-small > packsMax {
			t.Fatalf("step %d: %d small packs of %d (sizes %v), more than %d", step, small, len(packs), sizes, packsMax)
		}
	}
	if imported < 10 {
		t.Errorf("%d of 12 checkpoints wrote their objects as one pack", imported)
	}
	if out, err := s.git().Run(ctx, "fsck", "--no-dangling", "--connectivity-only"); err != nil {
		t.Fatalf("fsck: %v\n%s", err, out)
	}
	restoreEach(t, s, wt, trees)
}

// restoreEach restores each checkpoint of trees (by id) and checks that the
// work tree wt then holds its tree, as a fresh store would take it.
func restoreEach(t *testing.T, s *Store, wt string, trees map[string]string) {
	t.Helper()
	for id, tree := range trees {
		if _, err := s.Restore(context.Background(), id, RestoreOptions{}); err != nil {
			t.Fatal(err)
		}
		if got := freshTree(t, wt); got != tree {
			t.Fatalf("restored %s: tree %s, want %s", id, got, tree)
		}
	}
}

// TestPreimportFileChangedMeanwhile: when the changed files cannot all be
// held (here none can), update-index hashes them beside the import. A file
// whose content changed between the import's read and update-index's hash
// (which then writes no object) leaves write-tree a blob it cannot find;
// the capture hashes the files again, writing them, and the checkpoint
// holds what the file holds.
func TestPreimportFileChangedMeanwhile(t *testing.T) {
	needPreimport(t)
	ctx := context.Background()
	s, wt := settledStore(t, tenFiles(t))
	defer func(n int64) { heldBytesMax = n }(heldBytesMax)
	heldBytesMax = 0
	defer func(read func(string, []byte) []byte) { importRead = read }(importRead)
	importRead = func(p string, data []byte) []byte {
		if p == "d1/f4.txt" {
			return []byte("what the file held a moment before\n")
		}
		return data
	}
	time.Sleep(10 * time.Millisecond)
	mustWrite(t, filepath.Join(wt, "d1/f4.txt"), "changed\n")
	mustWrite(t, filepath.Join(wt, "d2/f5.txt"), "changed too\n")
	nextSecond()
	var trace strings.Builder
	gitexec.Trace = &trace
	made, err := s.Create(ctx, CreateOptions{Reason: "changed", Source: "test"})
	gitexec.Trace = nil
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(trace.String(), "written as one pack") || !strings.Contains(trace.String(), "write-tree after the import") {
		t.Fatalf("want the import, then write-tree failing on the changed file; trace:\n%s", trace.String())
	}
	if want := freshTree(t, wt); made.Checkpoint.Tree != want {
		t.Fatalf("tree %s, a fresh store's %s", made.Checkpoint.Tree, want)
	}
	if out, err := s.git().Run(ctx, "fsck", "--no-dangling"); err != nil {
		t.Fatalf("fsck: %v\n%s", err, out)
	}
	if got, err := s.git().Run(ctx, "cat-file", "-p", made.Checkpoint.Tree+":d1/f4.txt"); err != nil || string(got) != "changed\n" {
		t.Fatalf("d1/f4.txt in the checkpoint: %q, %v", got, err)
	}
}

// nextSecond sleeps into the next second of the clock, past the tenth of a
// second in which changes made before it would still be racy
// (fileRacyCut), and returns it.
func nextSecond() time.Time {
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 110*time.Millisecond)))
	return time.Now().Truncate(time.Second)
}

// stillIn reports whether the clock is still in second sec.
func stillIn(sec time.Time) bool { return time.Now().Truncate(time.Second).Equal(sec) }

// TestPreimportRacyFilesByID: files changed in the second a capture begins
// go into the index by the blob ids of what the import read, with no stat
// data, and no update-index takes them out again; the checkpoint holds what
// they hold, and every later capture sees them changed until one reads
// them after that second: a same-size rewrite in the same second, a
// removal, and nothing changed once the second has passed.
func TestPreimportRacyFilesByID(t *testing.T) {
	needPreimport(t)
	s, wt := settledStore(t, tenFiles(t))
	create := func(what string) (*Created, string) { return tracedCreate(t, s, wt, what) }
	// Retried until the writes and the capture fall in one second.
	for try := 0; ; try++ {
		sec := nextSecond()
		mustWrite(t, filepath.Join(wt, "d1/f4.txt"), fmt.Sprintf("changed %d\n", try))
		mustWrite(t, filepath.Join(wt, "d2/new.txt"), "new\n")
		os.Chmod(filepath.Join(wt, "d0/f3.txt"), 0o755)
		mustWrite(t, filepath.Join(wt, "d0/f3.txt"), fmt.Sprintf("exec %d\n", try))
		_, trace := create(fmt.Sprint("racy ", try))
		if !strings.Contains(trace, "--index-info") || strings.Contains(trace, "--force-remove") {
			t.Fatalf("the racy files did not go in by their ids alone:\n%s", trace)
		}
		if stillIn(sec) {
			break
		}
		if try == 5 {
			t.Fatal("the capture never fell in the second of the writes")
		}
	}
	// In the same second: a same-size rewrite with the mtime set back, and
	// a removal.
	p := filepath.Join(wt, "d1/f4.txt")
	fi, _ := os.Stat(p)
	data, _ := os.ReadFile(p)
	data[0] ^= 1
	os.WriteFile(p, data, 0o644)
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	os.Remove(filepath.Join(wt, "d2/new.txt"))
	create("same second")
	nextSecond()
	create("settled")
	made, trace := create("nothing changed")
	if made.Unchanged == nil || strings.Contains(trace, "update-index") || strings.Contains(trace, "written as one pack") {
		t.Fatalf("after the second passed, a capture still read files again:\n%s", trace)
	}
}

// TestRacyFilesSettledByID: files changed in the second a capture begins
// are in the index by id, and the stat cache holds them with no stat data
// and with their entries (mode and blob id); the next capture reads them
// again and, finding what the index holds (a file's content, a symlink's
// target, an executable bit), imports and enters nothing: no pack, no
// update-index, no write-tree, the same tree. Once the second has passed,
// one more capture reads them and keeps their stat data: the one after reads
// nothing.
func TestRacyFilesSettledByID(t *testing.T) {
	needPreimport(t)
	s, wt := settledStore(t, tenFiles(t))
	link := filepath.Join(wt, "d2/link")
	for try := 0; ; try++ {
		sec := nextSecond()
		mustWrite(t, filepath.Join(wt, "d1/f4.txt"), fmt.Sprintf("changed %d\n", try))
		os.Remove(link)
		if err := os.Symlink(fmt.Sprintf("f%d.txt", try), link); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Join(wt, "d0/f3.txt"), 0o755-0o111*os.FileMode(try%2))
		first, trace := tracedCreate(t, s, wt, fmt.Sprint("racy ", try))
		if !strings.Contains(trace, "--index-info") {
			t.Fatalf("the racy files did not go in by their ids:\n%s", trace)
		}
		again, trace := tracedCreate(t, s, wt, fmt.Sprint("read again ", try))
		if !stillIn(sec) {
			if try == 5 {
				t.Fatal("the captures never fell in the second of the writes")
			}
			continue
		}
		if again.Checkpoint.Tree != first.Checkpoint.Tree {
			t.Fatalf("read again: tree %s, was %s", again.Checkpoint.Tree, first.Checkpoint.Tree)
		}
		for _, step := range []string{"written as one pack", "update-index", "write-tree"} {
			if strings.Contains(trace, step) {
				t.Fatalf("the racy files read again were taken as changes (%q):\n%s", step, trace)
			}
		}
		break
	}
	nextSecond()
	create := func(what string) (*Created, string) { return tracedCreate(t, s, wt, what) }
	create("after the second")
	made, trace := create("nothing changed")
	if made.Unchanged == nil || strings.Contains(trace, "update-index") || strings.Contains(trace, "written as one pack") {
		t.Fatalf("after the second passed, a capture still read files again:\n%s", trace)
	}
}

// TestPreimportRacyFilesLongPaths: nearly as many racy files as preimport
// takes (preimportMax), with long paths, changed in the second a capture
// begins. Entered by id on a command line, they would pass the kernel's
// limit (ARG_MAX, 2 MB with the usual 8 MB stack) and the checkpoint would
// fail; it must hold them all.
func TestPreimportRacyFilesLongPaths(t *testing.T) {
	needPreimport(t)
	ctx := context.Background()
	s, wt := settledStore(t, func(wt string) { mustWrite(t, filepath.Join(wt, "start.txt"), "start\n") })
	// Four components of 240 bytes: paths of about 1,000 bytes.
	deep := filepath.Join(wt, strings.Repeat("a", 240), strings.Repeat("b", 240), strings.Repeat("c", 240), strings.Repeat("d", 240))
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	var files []string
	for i := 0; i < preimportMax-1; i++ {
		files = append(files, filepath.Join(deep, fmt.Sprintf("file-%04d-%s.txt", i, strings.Repeat("x", 40))))
		if err := os.WriteFile(files[i], []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for try := 0; ; try++ {
		// Their change (of ctime) in the second the capture begins.
		nextSecond()
		now := time.Now()
		for _, f := range files {
			os.Chtimes(f, now, now)
		}
		var trace strings.Builder
		gitexec.Trace = &trace
		made, err := s.Create(ctx, CreateOptions{Reason: fmt.Sprint("many racy ", try), Source: "test"})
		gitexec.Trace = nil
		if err != nil {
			t.Fatal(err)
		}
		if want := freshTree(t, wt); made.Checkpoint.Tree != want {
			t.Fatalf("tree %s, a fresh store's %s", made.Checkpoint.Tree, want)
		}
		if strings.Contains(trace.String(), "--index-info") || try == 3 {
			return
		}
	}
}

// TestByIDCaptures: a small change goes into the index by id, and the
// import's tree is the checkpoint's with no write-tree; a later capture looks
// at the files held by id (git's diff-files names them all) and sees a
// same-size rewrite with the mtime set back; past byIDMax of them, a
// capture hashes those unchanged again for git's stat data, after which
// only that capture's change is held by id.
func TestByIDCaptures(t *testing.T) {
	needPreimport(t)
	s, wt := settledStore(t, tenFiles(t))
	defer func(n int, check bool) { byIDMax, checkImportTree = n, check }(byIDMax, checkImportTree)
	byIDMax = 4
	create := func(what string) string {
		t.Helper()
		_, trace := tracedCreate(t, s, wt, what)
		return trace
	}
	held := func() int {
		c := s.readStatCache()
		if c == nil {
			t.Fatal("no stat cache describes the index")
		}
		return c.held
	}
	// The ten files went in by id after their second had passed
	// (settledStore): past byIDMax, they are hashed again.
	if n := held(); n != 10 {
		t.Fatalf("%d files held by id, want 10", n)
	}
	if trace := create("refresh"); !hashed(trace) || held() != 0 {
		t.Fatalf("want the files held by id hashed again:\n%s", trace)
	}
	checkImportTree = false
	mustWrite(t, filepath.Join(wt, "d1/f4.txt"), "changed\n")
	if err := os.Symlink("d0/f0.txt", filepath.Join(wt, "link")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(wt, "d2/f2.txt"))
	nextSecond()
	trace := create("by id")
	if !strings.Contains(trace, "--index-info") || strings.Contains(trace, "write-tree") || hashed(trace) {
		t.Fatalf("want the change entered by id, and no write-tree:\n%s", trace)
	}
	if n := held(); n != 2 {
		t.Fatalf("%d files held by id, want 2", n)
	}
	checkImportTree = true
	if trace := create("nothing changed"); !strings.Contains(trace, "(2 not as the index holds them)") || strings.Contains(trace, "update-index") {
		t.Fatalf("want the two files held by id looked at, and nothing entered:\n%s", trace)
	}
	p := filepath.Join(wt, "d1/f4.txt")
	fi, _ := os.Stat(p)
	os.WriteFile(p, []byte("CHANGED\n"), 0o644)
	os.Chtimes(p, fi.ModTime(), fi.ModTime())
	nextSecond()
	create("same size, mtime set back")
	for i := 5; i < 8; i++ {
		mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%d.txt", i%3, i)), "changed\n")
	}
	nextSecond()
	create("five held by id")
	if n := held(); n != 5 {
		t.Fatalf("%d files held by id, want 5", n)
	}
	// A refresh with a change: the five, unchanged, are hashed for their
	// stat data alone; the change goes in by id, as always, through the
	// import.
	mustWrite(t, filepath.Join(wt, "d0/f9.txt"), "changed\n")
	nextSecond()
	if trace := create("refresh again"); !strings.Contains(trace, "--index-info") || !strings.Contains(trace, "--info-only -z --stdin") || !strings.Contains(trace, "1 changes written as one pack") {
		t.Fatalf("want the files held by id hashed again, and the change imported:\n%s", trace)
	}
	if n := held(); n != 1 {
		t.Fatalf("%d files held by id after the refresh, want 1 (the change)", n)
	}
}

// hashed reports whether a capture's trace shows update-index hashing files.
func hashed(trace string) bool {
	return strings.Contains(trace, "--replace -z --stdin") || strings.Contains(trace, "--info-only -z --stdin")
}

// TestReadHeldFileBecameFIFO: a file the stat walk saw regular and that is
// a FIFO when the changed files are read (replaced meanwhile) must not go
// into the checkpoint as an empty file by its id: it is left to
// update-index, which refuses it, as it always did. (Opened without
// blocking, a FIFO with no writer reads as empty.)
func TestReadHeldFileBecameFIFO(t *testing.T) {
	s, wt := newStore(t)
	p := filepath.Join(wt, "was-a-file")
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	now := uint64(time.Now().UnixNano())
	v := verdict{path: "was-a-file", keep: true, regular: true, key: statKey{mode: syscall.S_IFREG | 0o644, mtime: now, ctime: now}}
	done := make(chan map[string]heldBlob, 1)
	go func() { done <- s.readHeld([]verdict{v}, strings.Repeat("0", 40)) }()
	select {
	case held := <-done:
		if e, ok := held["was-a-file"]; ok {
			t.Fatalf("a FIFO read as a file of %d bytes, blob %s", len(e.data), e.id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading a FIFO blocked")
	}
}

// TestReadHeldBoundsMemory: the changed files are read whole before the
// import and held until it has written them, where the import otherwise
// reads one file at a time. Many large files changed (a build's output
// just before a hook's checkpoint: up to preimportMax files of up to
// DefaultMaxFileSize each) must not all be held at once: past a few tens
// of megabytes none is held, and update-index hashes them. Nor may a file
// that grew since the walk saw it small make the bound a lie.
func TestReadHeldBoundsMemory(t *testing.T) {
	s, wt := newStore(t)
	chunk := strings.Repeat("0123456789abcdef", 1<<20) // 16 MB
	var update []verdict
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("big%d.bin", i)
		mustWrite(t, filepath.Join(wt, name), chunk)
		fi, err := os.Stat(filepath.Join(wt, name))
		if err != nil {
			t.Fatal(err)
		}
		now := uint64(fi.ModTime().UnixNano())
		update = append(update, verdict{path: name, keep: true, regular: true, key: statKey{mode: syscall.S_IFREG | 0o644, size: uint64(fi.Size()), mtime: now, ctime: now}})
	}
	if held := s.readHeld(update, strings.Repeat("0", 40)); held != nil {
		t.Fatalf("%d files of 16 MB held at once", len(held))
	}
	grown := update[0]
	grown.key.size = 10 // as the walk saw it
	if held := s.readHeld([]verdict{grown}, strings.Repeat("0", 40)); held != nil {
		t.Fatalf("a file of 16 MB, 10 bytes when looked at, held: %d bytes", len(held[grown.path].data))
	}
	small := update[1]
	if held := s.readHeld([]verdict{small}, strings.Repeat("0", 40)); len(held[small.path].data) != len(chunk) {
		t.Fatalf("one file of 16 MB not held whole: %d bytes", len(held[small.path].data))
	}
}

// TestPreimportRacyOddNames: changed files go into the index by
// "<mode> <id>\t<path>" lines; names with commas, a leading dash, a
// newline, a tab, quotes, a backslash, bytes that are not UTF-8 or that look
// like options are entered as they are, and the checkpoint holds what a
// fresh store holds.
func TestPreimportRacyOddNames(t *testing.T) {
	needPreimport(t)
	ctx := context.Background()
	s, wt := settledStore(t, func(wt string) { mustWrite(t, filepath.Join(wt, "start.txt"), "start\n") })
	names := []string{"a,b", "100644,x,y", "-dash", "--stdin", "new\nline", "tab\there", `q"uote`, `back\slash`, "latin\xe9", "d,1/-e/f,g"}
	for try := 0; try < 3; try++ {
		nextSecond()
		for _, n := range names {
			mustWrite(t, filepath.Join(wt, filepath.FromSlash(n)), fmt.Sprint(n, try))
		}
		var trace strings.Builder
		gitexec.Trace = &trace
		made, err := s.Create(ctx, CreateOptions{Reason: fmt.Sprint("odd ", try), Source: "test"})
		gitexec.Trace = nil
		if err != nil {
			t.Fatal(err)
		}
		if want := freshTree(t, wt); made.Checkpoint.Tree != want {
			t.Fatalf("try %d: tree %s, a fresh store's %s", try, made.Checkpoint.Tree, want)
		}
		if strings.Contains(trace.String(), "--index-info") {
			return
		}
	}
	t.Fatal("the odd names never went into the index by id")
}

// TestPreimportRacyKilledBeforeStatCache: rewind killed after the racy
// files went into the index by id (with no stat data) and before the stat
// cache was written: the old cache stays beside the new index. A same-size
// rewrite of such a file, its mtime set back, in the same second, is seen
// by the next checkpoint, and so is every later state.
func TestPreimportRacyKilledBeforeStatCache(t *testing.T) {
	needPreimport(t)
	ctx := context.Background()
	s, wt := settledStore(t, func(wt string) {
		for i := 0; i < 5; i++ {
			mustWrite(t, filepath.Join(wt, fmt.Sprintf("f%d.txt", i)), fmt.Sprint("file ", i))
		}
	})
	create := func(what string) *Created {
		t.Helper()
		made, err := s.Create(ctx, CreateOptions{Reason: what, Source: "test"})
		if err != nil {
			t.Fatal(err)
		}
		s.cacheWrites.Wait()
		if want := freshTree(t, wt); made.Checkpoint.Tree != want {
			t.Fatalf("%s: tree %s, a fresh store's %s", what, made.Checkpoint.Tree, want)
		}
		return made
	}
	p := filepath.Join(wt, "f1.txt")
	for try := 0; try < 5; try++ {
		s.cacheWrites.Wait()
		old, err := os.ReadFile(s.statCacheFile())
		if err != nil {
			t.Fatal(err)
		}
		sec := nextSecond()
		mustWrite(t, p, fmt.Sprintf("racy %d", try))
		var trace strings.Builder
		gitexec.Trace = &trace
		create(fmt.Sprint("racy ", try))
		gitexec.Trace = nil
		// the kill: the stat cache as it was
		if err := os.WriteFile(s.statCacheFile(), old, 0o600); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(trace.String(), "--index-info") || !stillIn(sec) {
			continue // the second passed before the capture: try again
		}
		fi, _ := os.Stat(p)
		data, _ := os.ReadFile(p)
		data[0] ^= 1
		os.WriteFile(p, data, 0o644)
		os.Chtimes(p, fi.ModTime(), fi.ModTime())
		create("same second, after the kill")
		nextSecond()
		create("settled after the kill")
		return
	}
	t.Fatal("the racy file never went into the index by id")
}

// tracedCreate takes a checkpoint with REWIND_TRACE's output, once its
// caches are written, and checks it holds what a fresh store's first one
// holds.
func tracedCreate(t *testing.T, s *Store, wt, what string) (*Created, string) {
	t.Helper()
	made, trace := traceCreate(t, s, what)
	s.cacheWrites.Wait()
	if want := freshTree(t, wt); made.Checkpoint.Tree != want {
		t.Fatalf("%s: tree %s, a fresh store's %s", what, made.Checkpoint.Tree, want)
	}
	return made, trace
}

// traceCreate creates a checkpoint of s and returns it with its trace
// (REWIND_TRACE's lines).
func traceCreate(t *testing.T, s *Store, what string) (*Created, string) {
	t.Helper()
	var trace strings.Builder
	gitexec.Trace = &trace
	made, err := s.Create(context.Background(), CreateOptions{Reason: what, Source: "test"})
	gitexec.Trace = nil
	if err != nil {
		t.Fatal(err)
	}
	return made, trace.String()
}

// needPreimport skips a test of the import with a git that has none.
func needPreimport(t *testing.T) {
	t.Helper()
	if !gitexec.AtLeast(geometricVersion) {
		t.Skip("git before " + geometricVersion + ": no preimport")
	}
}

// settledStore is a store of a work tree holding what write puts there,
// with two checkpoints of it and the second of the last one past: its next
// checkpoint imports a small change, and nothing in it is racy.
func settledStore(t *testing.T, write func(wt string)) (*Store, string) {
	t.Helper()
	s, wt := newStore(t)
	write(wt)
	for _, what := range []string{"start", "settled"} {
		if _, err := s.Create(context.Background(), CreateOptions{Reason: what, Source: "test"}); err != nil {
			t.Fatal(err)
		}
		nextSecond()
	}
	return s, wt
}

// tenFiles writes ten files in three directories.
func tenFiles(t *testing.T) func(wt string) {
	return func(wt string) {
		for i := 0; i < 10; i++ {
			mustWrite(t, filepath.Join(wt, fmt.Sprintf("d%d/f%d.txt", i%3, i)), fmt.Sprintf("file %d\n", i))
		}
	}
}

// TestRefreshFileChangedMeanwhile: a file held by id that changes between
// the stat walk and the refresh's hash for its stat data (same size) is in
// the index as it is now; its blob, not written by that hash, fails
// write-tree, and the files are hashed again, in the same capture: the
// checkpoint holds the file as it is, and so does the next.
func TestRefreshFileChangedMeanwhile(t *testing.T) {
	s, wt, _ := refreshStore(t, func(p string) { mustWrite(t, p, "FILE 4\n") })
	_, trace := tracedCreate(t, s, wt, "refresh")
	if !strings.Contains(trace, "--info-only -z --stdin") || !strings.Contains(trace, "write-tree after the import") {
		t.Fatalf("want the refresh's hash, then write-tree failing on the changed file's blob:\n%s", trace)
	}
	if n := strings.Count(trace, "listing (by"); n != 1 {
		t.Fatalf("want one capture, the files hashed again in it; %d:\n%s", n, trace)
	}
	beforeRestat = func() {}
	nextSecond()
	tracedCreate(t, s, wt, "after")
}

// refreshDue is a settled store of tenFiles, all held by id, with byIDMax
// low enough that its next capture refreshes them.
func refreshDue(t *testing.T) (*Store, string) {
	t.Helper()
	needPreimport(t)
	s, wt := settledStore(t, tenFiles(t))
	n := byIDMax
	byIDMax = 4
	t.Cleanup(func() { byIDMax = n })
	return s, wt
}

// refreshStore is refreshDue with a change to import (d0/f0.txt), and
// during run on d1/f4.txt (which it returns) just before the refresh hashes
// the files for their stat data.
func refreshStore(t *testing.T, during func(p string)) (s *Store, wt, p string) {
	t.Helper()
	s, wt = refreshDue(t)
	p = filepath.Join(wt, "d1/f4.txt")
	beforeRestat = func() { during(p) }
	t.Cleanup(func() { beforeRestat = func() {} })
	mustWrite(t, filepath.Join(wt, "d0/f0.txt"), "changed\n")
	return s, wt, p
}
