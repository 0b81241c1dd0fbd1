package checkpoint

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRefreshFileGoneMeanwhile: a file held by id, unchanged at the stat
// walk, removed before the refresh hashes it for its stat data (update-index
// --remove then drops it from the index), must not stay in the stat cache as
// the index holding it with git's stat data: git's diff-files cannot name a
// path the index lacks, so once the file is back every later capture would
// take it as unchanged and no checkpoint would hold it.
func TestRefreshFileGoneMeanwhile(t *testing.T) {
	needPreimport(t)
	s, wt := settledStore(t, tenFiles(t))
	defer func(n int) { byIDMax = n }(byIDMax)
	byIDMax = 4 // the ten files are held by id: this capture refreshes them
	p := filepath.Join(wt, "d1/f4.txt")
	beforeRestat = func() { os.Remove(p) }
	defer func() { beforeRestat = func() {} }()
	mustWrite(t, filepath.Join(wt, "d0/f0.txt"), "changed\n")
	tracedCreate(t, s, wt, "refresh")
	beforeRestat = func() {}
	mustWrite(t, p, "file 4\n")
	nextSecond()
	tracedCreate(t, s, wt, "back")
	nextSecond()
	tracedCreate(t, s, wt, "back, settled")
}

// TestRefreshFileMadeDirectoryMeanwhile: the same with the file replaced by
// a directory before the refresh's hash (update-index drops the file's
// entry), and made a file again later.
func TestRefreshFileMadeDirectoryMeanwhile(t *testing.T) {
	needPreimport(t)
	s, wt := settledStore(t, tenFiles(t))
	defer func(n int) { byIDMax = n }(byIDMax)
	byIDMax = 4
	p := filepath.Join(wt, "d1/f4.txt")
	beforeRestat = func() {
		os.Remove(p)
		mustWrite(t, filepath.Join(p, "inner"), "inner\n")
	}
	defer func() { beforeRestat = func() {} }()
	mustWrite(t, filepath.Join(wt, "d0/f0.txt"), "changed\n")
	// the checkpoint may hold the directory or not (it came mid-capture)
	traceCreate(t, s, "refresh")
	s.cacheWrites.Wait()
	beforeRestat = func() {}
	os.RemoveAll(p)
	mustWrite(t, p, "file 4\n")
	nextSecond()
	tracedCreate(t, s, wt, "back")
	nextSecond()
	tracedCreate(t, s, wt, "back, settled")
}
