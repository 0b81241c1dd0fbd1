package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// BusyError means another rewind held the store's lock for longer than the wait.
type BusyError struct {
	Holder string // "pid 123 on host since 2026-...", as the holder recorded it
	Waited time.Duration
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("the store is busy: another rewind (%s) holds its lock; waited %s", e.Holder, e.Waited)
}

// lock takes the store's flock, waiting up to s.Wait. The kernel releases an
// flock when its holder dies, so a lock is never stale. The returned function
// releases it.
func (s *Store) lock(ctx context.Context) (func(), error) {
	return s.lockAt(ctx, s.lockFile(), true)
}

// staleAge is the age from which a lock file of git's own in the store is
// taken for one a killed git left: crucible's procedure runs git in the same
// directory without rewind's lock, and its git holds a lock for moments.
const staleAge = 2 * time.Minute

// lockAt takes the flock of path. With clean, it then removes the lock files
// git children of an earlier rewind left when they died with it.
func (s *Store) lockAt(ctx context.Context, path string, clean bool) (func(), error) {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if time.Since(start) >= s.Wait {
			data, _ := os.ReadFile(path)
			f.Close()
			holder := strings.TrimSpace(string(data))
			if holder == "" {
				holder = "unknown holder"
			}
			return nil, &BusyError{Holder: holder, Waited: time.Since(start).Round(time.Second)}
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	host, _ := os.Hostname()
	f.Truncate(0)
	f.WriteAt([]byte(fmt.Sprintf("pid %d on %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))), 0)
	if clean {
		s.removeStaleLocks()
	}
	return func() {
		s.cacheWrites.Wait() // the caches are written under the lock
		f.Close()
	}, nil
}

// removeStaleLocks removes the lock files a git killed with an earlier rewind
// left. Holding the store lock, no rewind uses them: those rewind's git
// commands take (its indexes', its refs', packed-refs, objects/info) go at
// once. The store directory is also the git directory crucible's procedure
// runs git in, without rewind's lock: git's other locks (HEAD, config, the
// procedure's branch) go only when older than staleAge, and the procedure's
// index lock never.
func (s *Store) removeStaleLocks() {
	gitDir := s.gitDir()
	var stale []string
	now := time.Now()
	old := func(p string) bool {
		fi, err := os.Lstat(p)
		return err == nil && now.Sub(fi.ModTime()) > staleAge
	}
	entries, _ := os.ReadDir(gitDir)
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(gitDir, name)
		switch {
		case e.IsDir() || !strings.HasSuffix(name, ".lock"):
		case strings.HasPrefix(name, "rewind-"), name == "packed-refs.lock":
			// rewind's indexes; packed-refs, which rewind's evictions lock
			stale = append(stale, p)
		case name == "index.lock":
			// the procedure's index: never rewind's to judge
		case old(p):
			stale = append(stale, p)
		}
	}
	if old(filepath.Join(gitDir, "packed-refs.new")) {
		stale = append(stale, filepath.Join(gitDir, "packed-refs.new"))
	}
	filepath.WalkDir(filepath.Join(gitDir, "refs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
			if rel, _ := filepath.Rel(gitDir, p); strings.HasPrefix(filepath.ToSlash(rel), "refs/rewind/") || old(p) {
				stale = append(stale, p)
			}
		}
		return nil
	})
	// only objects/info can hold a lock; the object fan-out is large
	locks, _ := filepath.Glob(filepath.Join(gitDir, "objects", "info", "*.lock"))
	stale = append(stale, locks...)
	for _, p := range stale {
		os.Remove(p)
	}
}
