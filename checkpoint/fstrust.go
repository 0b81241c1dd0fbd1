package checkpoint

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// dirCacheOff makes every capture list the whole work tree (a test compares
// both ways; REWIND_DIR_CACHE=off does the same for a user).
var dirCacheOff = false

// dirCacheTrusted decides, once per store and file system, whether the
// listing cache (listcache.go) may trust directory times there: the work
// tree's file system must be a local kind known to change a directory's
// times as entries come and go (fsKind), and, when the store lies on the
// same file system, a probe in the store must see them change. fine says
// the probe saw times finer than a second. The verdict is kept in the store
// (rewind-fscheck) with the file system it is for.
func (s *Store) dirCacheTrusted() (trusted, fine bool) {
	if dirCacheOff || os.Getenv("REWIND_DIR_CACHE") == "off" || s.listCacheFile() == "" {
		return false, false
	}
	wt, err := os.Stat(s.WorkTree)
	if err != nil {
		return false, false
	}
	kind, local := fsKind(s.WorkTree)
	if !local {
		return false, false
	}
	record := fmt.Sprintf("%d %s ", keyOf(wt).dev, kind)
	file := s.scratchFile("fscheck")
	if data, err := os.ReadFile(file); err == nil {
		if verdict, ok := strings.CutPrefix(string(data), record); ok {
			return strings.HasPrefix(verdict, "trusted"), verdict == "trusted fine\n"
		}
	}
	trusted = true
	if st, err := os.Stat(s.Dir); err == nil && keyOf(st).dev == keyOf(wt).dev {
		trusted, fine = s.probeDirTimes()
	}
	verdict := "untrusted\n"
	switch {
	case trusted && fine:
		verdict = "trusted fine\n"
	case trusted:
		verdict = "trusted\n"
	}
	writeCache(file, []byte(record+verdict))
	return trusted, fine
}

// probeDirTimes checks in a scratch directory of the store that adding,
// renaming and removing an entry each change the directory's stat data, and
// whether its times are finer than a second. On a file system with
// whole-second times the changes may fall in one second and show nothing:
// then the kind of file system decides alone.
func (s *Store) probeDirTimes() (trusted, fine bool) {
	dir, err := os.MkdirTemp(s.Dir, "rewind-probe-")
	if err != nil {
		return false, false
	}
	defer os.RemoveAll(dir)
	look := func() (statKey, bool) {
		fi, err := os.Lstat(dir)
		if err != nil {
			return statKey{}, false
		}
		return keyOf(fi), true
	}
	steps := []func() error{
		func() error { return os.WriteFile(filepath.Join(dir, "a"), nil, 0o600) },
		func() error { return os.Rename(filepath.Join(dir, "a"), filepath.Join(dir, "b")) },
		func() error { return os.Mkdir(filepath.Join(dir, "c"), 0o700) },
		func() error { return os.Remove(filepath.Join(dir, "b")) },
	}
	before, ok := look()
	start := time.Now()
	for _, step := range steps {
		if step() != nil {
			return false, false
		}
		after, ok2 := look()
		if !ok || !ok2 {
			return false, false
		}
		fine = fine || after.mtime%1e9 != 0 || after.ctime%1e9 != 0
		if after == before {
			// Unchanged: only excusable on whole-second times, within a
			// second.
			return before.mtime%1e9 == 0 && before.ctime%1e9 == 0 && time.Since(start) < time.Second, false
		}
		before = after
	}
	return true, fine
}
