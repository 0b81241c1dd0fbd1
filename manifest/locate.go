package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// ErrNoManifest means a path names no manifest in any of the forms Locate
// understands.
var ErrNoManifest = errors.New("no manifest found")

// Located is the manifest a PATH argument resolves to.
type Located struct {
	Path string // the manifest.jsonl to read
	// How is the form PATH had: "file", "dispatch-dir", "scratch" (through
	// .pipeline-active) or "parent" (a directory of dispatch directories).
	How string
	// Notes say which of several candidates was used and why, for warnings.
	Notes []string
	// Candidates lists every dispatch directory's manifest found in a parent
	// directory, newest first (How == "parent").
	Candidates []string
	// LiveOnly: How == "scratch" and the manifest in the dispatch directory
	// (under /tmp) is the only one: the scratch directory has no durable copy
	// (yet: dispatch cleanup makes it at the end of a run).
	LiveOnly bool
}

// Locate resolves PATH as `rewind manifest show` and `rewind replay` take it: a
// manifest file; a dispatch directory (holding manifest.jsonl); a scratch
// directory whose .pipeline-active names dispatch_dir, where the durable copy
// <scratch>/<basename of dispatch_dir>/manifest.jsonl wins over the one in
// dispatch_dir itself; or a directory holding crucible-dispatch-*/ or
// dispatch-*/ directories, the newest (by the manifest's modification time)
// first.
func Locate(path string) (*Located, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return &Located{Path: path, How: "file"}, nil
	}
	direct := filepath.Join(path, FileName)
	if isFile(direct) {
		return &Located{Path: direct, How: "dispatch-dir"}, nil
	}
	if isFile(filepath.Join(path, ActiveMarker)) {
		return locateScratch(path)
	}
	var found []string
	for _, pattern := range []string{"crucible-dispatch-*", "dispatch-*"} {
		dirs, _ := filepath.Glob(filepath.Join(path, pattern))
		for _, d := range dirs {
			if m := filepath.Join(d, FileName); isFile(m) {
				found = append(found, m)
			}
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("%s: %w (no %s, %s, crucible-dispatch-*/ or dispatch-*/ in it)", path, ErrNoManifest, FileName, ActiveMarker)
	}
	mtime := map[string]int64{}
	for _, m := range found {
		if fi, err := os.Stat(m); err == nil {
			mtime[m] = fi.ModTime().UnixNano()
		}
	}
	sort.SliceStable(found, func(a, b int) bool {
		if mtime[found[a]] != mtime[found[b]] {
			return mtime[found[a]] > mtime[found[b]]
		}
		return found[a] > found[b]
	})
	l := &Located{Path: found[0], How: "parent", Candidates: found}
	if len(found) > 1 {
		l.Notes = append(l.Notes, fmt.Sprintf("%d dispatch directories in %s; using the newest, %s", len(found), path, filepath.Dir(found[0])))
	}
	return l, nil
}

// locateScratch follows a scratch directory's .pipeline-active.
func locateScratch(scratch string) (*Located, error) {
	m, err := ReadMarker(scratch)
	if err != nil {
		return nil, err
	}
	if m.DispatchDir == "" {
		return nil, fmt.Errorf("%s: %w (%s has no dispatch_dir)", scratch, ErrNoManifest, ActiveMarker)
	}
	durable := filepath.Join(scratch, filepath.Base(filepath.Clean(m.DispatchDir)), FileName)
	live := filepath.Join(m.DispatchDir, FileName)
	switch {
	case isFile(durable) && isFile(live):
		return &Located{Path: durable, How: "scratch", Notes: []string{
			fmt.Sprintf("using the durable copy %s, not %s", durable, live)}}, nil
	case isFile(durable):
		return &Located{Path: durable, How: "scratch", Notes: []string{
			fmt.Sprintf("using the durable copy %s (%s is gone)", durable, live)}}, nil
	case isFile(live):
		return &Located{Path: live, How: "scratch", LiveOnly: true, Notes: []string{
			fmt.Sprintf("using %s, named by %s (no durable copy %s)", live, filepath.Join(scratch, ActiveMarker), durable)}}, nil
	}
	return nil, fmt.Errorf("%s: %w (neither %s nor %s exists)", scratch, ErrNoManifest, durable, live)
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir()
}

// notExist reports whether err means a missing file.
func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
