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
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, err
	}
	path := filepath.Join(s.Dir, "lock")
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
	// git's own index lock can only be left by a git that died with an earlier
	// rewind; holding the store lock, nothing else can be using it.
	stale := []string{s.indexFile() + ".lock", s.restoreIndex() + ".lock", filepath.Join(s.gitDir(), "packed-refs.new")}
	filepath.WalkDir(s.gitDir(), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
			stale = append(stale, p)
		}
		if err == nil && d.IsDir() && d.Name() == "objects" {
			// only objects/info can hold a lock; the object fan-out is large
			locks, _ := filepath.Glob(filepath.Join(p, "info", "*.lock"))
			stale = append(stale, locks...)
			return filepath.SkipDir
		}
		return nil
	})
	for _, p := range stale {
		os.Remove(p)
	}
	return func() { f.Close() }, nil
}
