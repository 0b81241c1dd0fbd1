package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The judgement a restore makes of a file whose stat data is not what the
// safety checkpoint's walk saw (changedSince, heldAsIs): held when it holds
// the checkpoint's content with the checkpoint's type and bits, read from
// the very file judged; changed otherwise.

// capturedStore is a store with one checkpoint of files (path: content), and
// a capture of the tree as it is then, as a restore's safety checkpoint.
func capturedStore(t *testing.T, s *Store, wt string, files map[string]string) *capture {
	t.Helper()
	for p, content := range files {
		mustWrite(t, filepath.Join(wt, p), content)
	}
	ctx := context.Background()
	if _, err := s.Create(ctx, CreateOptions{Reason: "x", Source: "t"}); err != nil {
		t.Fatal(err)
	}
	c, err := s.capture(ctx, DefaultMaxFileSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.closeTreeLookup)
	return c
}

// touch sets the times of rel an hour ahead, its content unchanged.
func touch(t *testing.T, wt, rel string) os.FileInfo {
	t.Helper()
	later := unix.NsecToTimeval(time.Now().Add(time.Hour).UnixNano())
	if err := unix.Lutimes(filepath.Join(wt, rel), []unix.Timeval{later, later}); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(wt, rel))
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// Touched files are held, whatever their names, in a sha1 and a sha256
// store; a file with other content is not.
func TestHeldAsIsTouchedFiles(t *testing.T) {
	for _, format := range []string{"sha1", "sha256"} {
		t.Run(format, func(t *testing.T) {
			s, wt := newStore(t)
			if format == "sha256" {
				s = sha256Store(t, wt)
			}
			files := map[string]string{}
			for _, n := range []string{"a", "a-b", "a.b/x", "b/a", "b/a b/c\nd \xff", "c/d/e/f"} {
				files[n] = "content of " + n
			}
			if err := os.MkdirAll(filepath.Join(wt, "c"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("a", filepath.Join(wt, "c/lnk")); err != nil {
				t.Fatal(err)
			}
			c := capturedStore(t, s, wt, files)
			files["c/lnk"] = ""
			for n := range files {
				if s.changedSince(c, n, touch(t, wt, n)) {
					t.Errorf("%q, touched: judged changed", n)
				}
			}
			mustWrite(t, filepath.Join(wt, "b/a b/c\nd \xff"), "other content")
			if fi := touch(t, wt, "b/a b/c\nd \xff"); !s.changedSince(c, "b/a b/c\nd \xff", fi) {
				t.Error("a file with other content: judged held")
			}
		})
	}
}

// A file larger than a capture holds in memory, touched, is held: it is
// hashed as a stream.
func TestHeldAsIsLargeFileTouched(t *testing.T) {
	s, wt := newStore(t)
	c := capturedStore(t, s, wt, map[string]string{"big.bin": strings.Repeat("x", int(heldBytesMax)+1)})
	if s.changedSince(c, "big.bin", touch(t, wt, "big.bin")) {
		t.Error("a large file, touched: judged changed")
	}
}

// The file judged is the one read: a restore writing in place judges the
// file it has open, and an editor may have moved it away and put one with
// the checkpoint's content at its name meanwhile. The open one is changed.
func TestHeldAsIsReadsTheFileJudged(t *testing.T) {
	s, wt := newStore(t)
	p := filepath.Join(wt, "a.txt")
	c := capturedStore(t, s, wt, map[string]string{"a.txt": "held\n"})
	time.Sleep(10 * time.Millisecond)
	mustWrite(t, p, "edited after the checkpoint, in no checkpoint\n")
	f, err := os.OpenFile(p, os.O_WRONLY, 0) // as rewriteInPlace opens it
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Rename(p, p+"~"); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, p, "held\n")
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if !s.changedSince(c, "a.txt", fi) {
		t.Error("the open file, in no checkpoint, judged held by the content of the one now at its name")
	}
}

// A FIFO put at the name after the restore looked is never opened to wait
// for a writer: the file is changed, at once.
func TestHeldAsIsFIFO(t *testing.T) {
	s, wt := newStore(t)
	c := capturedStore(t, s, wt, map[string]string{"a.txt": "a\n"})
	fi := touch(t, wt, "a.txt") // what the restore's lstat saw
	if err := os.Remove(filepath.Join(wt, "a.txt")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(wt, "a.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool, 1)
	go func() { done <- s.changedSince(c, "a.txt", fi) }()
	select {
	case changed := <-done:
		if !changed {
			t.Error("a FIFO in the file's place: judged held")
		}
	case <-time.After(10 * time.Second):
		t.Error("blocked on a FIFO in the file's place")
		if f, err := os.OpenFile(filepath.Join(wt, "a.txt"), os.O_WRONLY, 0); err == nil {
			f.Close()
		}
	}
}

// The bits are the tree entry's too: a file the checkpoint holds as
// executable, found with the same content but not executable, as the walk
// saw it (its bits changed between the walk and git's hash, and back), is
// changed: a restore over it would lose its bits.
func TestHeldAsIsExecutableBitOfTheEntry(t *testing.T) {
	s, wt := newStore(t)
	c := capturedStore(t, s, wt, map[string]string{"a.sh": "#!/bin/sh\n"})
	if err := os.Chmod(filepath.Join(wt, "a.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	c = capturedStore(t, s, wt, nil) // the tree holds a.sh as 100755
	if err := os.Chmod(filepath.Join(wt, "a.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	fi := touch(t, wt, "a.sh")
	then := keyOf(fi)
	then.mtime-- // as the walk saw it: the same bits, another time
	if s.heldAsIs(c, "a.sh", keyOf(fi), then) {
		t.Error("a file not executable now, held as executable: judged held")
	}
	if err := os.Chmod(filepath.Join(wt, "a.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	fi = touch(t, wt, "a.sh")
	then = keyOf(fi)
	then.mtime--
	if !s.heldAsIs(c, "a.sh", keyOf(fi), then) {
		t.Error("the same file executable again: judged changed")
	}
}

// What changes while the file is read is seen after the read: the file
// read written to (its stat data is not the one judged, even when the write
// put back what was there), or another file
// with the checkpoint's content renamed over its name (the name, which the
// caller removes by, no longer holds the file read). Both are changed.
func TestHeldAsIsChangedWhileRead(t *testing.T) {
	defer func() { beforeHashRead = func(string) {} }()
	for _, c := range []struct {
		what   string
		change func(t *testing.T, p string)
	}{
		{"written to", func(t *testing.T, p string) {
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// The same byte: only its stat data tells (a write meanwhile
			// may have been to a part already read).
			if _, err := f.WriteAt([]byte("h"), 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"renamed over", func(t *testing.T, p string) {
			mustWrite(t, p+".new", "held\n")
			if err := os.Rename(p+".new", p); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.what, func(t *testing.T) {
			s, wt := newStore(t)
			p := filepath.Join(wt, "a.txt")
			cap := capturedStore(t, s, wt, map[string]string{"a.txt": "held\n"})
			fi := touch(t, wt, "a.txt")
			read := false
			beforeHashRead = func(string) {
				read = true
				time.Sleep(10 * time.Millisecond) // an mtime of its own
				c.change(t, p)
			}
			if !s.changedSince(cap, "a.txt", fi) {
				t.Errorf("%s while read: judged held", c.what)
			}
			if !read {
				t.Error("the file was not read")
			}
		})
	}
}
