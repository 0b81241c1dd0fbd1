package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// This file is `dispatch cleanup`: the durable copy of a dispatch directory in
// the scratch directory. Two rules dispatch.py does not have: a copy target
// that is the dispatch directory or lies inside it is refused before anything
// is copied or deleted (deleting the directory would delete the copy), and a
// --failed copy goes on past an entry it cannot copy, after copying the
// manifest and the receipt ledger first.

// Cleanup is `dispatch cleanup`: on success it copies manifest.jsonl and
// receipt-ledger.jsonl (both must exist) to <scratch>/<basename of dir>/ and
// deletes dir; with failed it copies the whole directory there, merging into an
// existing copy, and leaves dir in place. Every file is written atomically. It
// returns dispatch.py's message. A --failed copy that could not copy some
// entries returns the message and a *CopyFailures naming each.
func Cleanup(dir, scratch string, failed bool) (string, error) {
	var noLedger bool
	return cleanupDir(dir, scratch, failed, false, &noLedger)
}

// cleanupDir is Cleanup; with ledgerOptional (pipeline finish), a success
// cleanup of a run that never had a receipt ledger copies the manifest alone
// and sets *noLedger, and a dispatch directory with nothing in it (no
// dispatch was recorded) is deleted with nothing to copy.
func cleanupDir(dir, scratch string, failed, ledgerOptional bool, noLedger *bool) (string, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", dirMissing(dir)
	}
	if err := checkOwner("cleanup", dir); err != nil {
		return "", err
	}
	dst := pyJoin(scratch, PyBasename(pyNormpath(dir)))
	if err := checkCopyTarget(dir, dst); err != nil {
		return "", err
	}
	// Hold the manifest lock while copying, so the copy ends on a whole line.
	if f, err := os.Open(filepath.Join(dir, FileName)); err == nil {
		if lockFile(f, true) == nil {
			defer f.Close()
		} else {
			f.Close()
		}
	}
	if failed {
		failures := copyDispatchDir(dir, dst)
		msg := fmt.Sprintf("copied dispatch dir to %s (left /tmp in place)", dst)
		if len(failures) > 0 {
			return msg, &CopyFailures{Dir: dir, Dst: dst, Failures: failures}
		}
		return msg, nil
	}
	manifest := filepath.Join(dir, FileName)
	ledger := filepath.Join(dir, LedgerName)
	if ledgerOptional && !exists(ledger) {
		if !exists(manifest) {
			entries, err := os.ReadDir(dir)
			if err != nil {
				return "", refuse("dispatch cleanup: %v", unwrapPath(err))
			}
			if len(entries) > 0 {
				return "", &DispatchError{NoManifest: true, Msg: fmt.Sprintf("dispatch cleanup: %s has no manifest.jsonl, so no dispatch was recorded, but it holds %d entr%s (refusing: deleting it would keep none of them)",
					dir, len(entries), plural(len(entries), "y", "ies"))}
			}
			if err := os.Remove(dir); err != nil {
				return "", refuse("dispatch cleanup: delete %s: %v", dir, unwrapPath(err))
			}
			*noLedger = true
			return fmt.Sprintf("nothing to copy: no dispatch was recorded in %s; deleted it", dir), nil
		}
		if err := os.MkdirAll(dst, 0o777); err != nil {
			return "", refuse("dispatch cleanup: %v", err)
		}
		if err := copyFileAtomic(manifest, filepath.Join(dst, FileName)); err != nil {
			return "", refuse("dispatch cleanup: copy %s: %v", FileName, unwrapPath(err))
		}
		if err := os.RemoveAll(dir); err != nil {
			return "", refuse("dispatch cleanup: delete %s: %v", dir, unwrapPath(err))
		}
		*noLedger = true
		return fmt.Sprintf("copied manifest.jsonl to %s (the run has no receipt-ledger.jsonl); deleted %s", dst, dir), nil
	}
	if !exists(manifest) || !exists(ledger) {
		return "", refuse("dispatch cleanup: both manifest.jsonl and receipt-ledger.jsonl must exist before deleting the dispatch dir (refusing)")
	}
	if err := os.MkdirAll(dst, 0o777); err != nil {
		return "", refuse("dispatch cleanup: %v", err)
	}
	for _, name := range []string{FileName, LedgerName} {
		if err := copyFileAtomic(filepath.Join(dir, name), filepath.Join(dst, name)); err != nil {
			return "", refuse("dispatch cleanup: copy %s: %v", name, unwrapPath(err))
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", refuse("dispatch cleanup: delete %s: %v", dir, unwrapPath(err))
	}
	return fmt.Sprintf("copied manifest.jsonl + receipt-ledger.jsonl to %s; deleted %s", dst, dir), nil
}

// CopyFailure is one entry a --failed cleanup could not copy.
type CopyFailure struct {
	Path string // the entry in the dispatch directory
	Err  error
}

// CopyFailures is a --failed cleanup that copied everything it could but
// these entries.
type CopyFailures struct {
	Dir, Dst string
	Failures []CopyFailure
}

func (e *CopyFailures) Error() string {
	return fmt.Sprintf("dispatch cleanup: %d entr%s of %s could not be copied to %s",
		len(e.Failures), plural(len(e.Failures), "y", "ies"), e.Dir, e.Dst)
}

// Lines are the failures, one line each, as `dispatch cleanup` reports them.
func (e *CopyFailures) Lines() []string {
	out := make([]string, len(e.Failures))
	for i, f := range e.Failures {
		out[i] = fmt.Sprintf("dispatch cleanup: cannot copy %s: %v", f.Path, f.Err)
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// checkCopyTarget refuses a copy target that is the dispatch directory itself
// or lies inside it, symlinks and .. resolved: the copy would copy into what it
// copies, and the delete that follows would delete the copy. dispatch.py is
// saved only when the target is the directory itself (copy2 raises
// SameFileError before the delete); inside it, it deletes the copy with it.
func checkCopyTarget(dir, dst string) error {
	src, err := resolvePath(dir)
	if err != nil {
		return refuse("dispatch cleanup: resolve %s: %v", dir, err)
	}
	target, err := resolvePath(dst)
	if err != nil {
		return refuse("dispatch cleanup: resolve %s: %v", dst, err)
	}
	inside := target == src || strings.HasPrefix(target, strings.TrimSuffix(src, "/")+"/")
	if !inside {
		// The same directory under another name (a bind mount): compare the
		// directories themselves along the target's existing ancestors.
		if sfi, err := os.Stat(src); err == nil {
			for p := target; ; p = filepath.Dir(p) {
				if fi, err := os.Stat(p); err == nil && os.SameFile(fi, sfi) {
					inside = true
					break
				}
				if p == filepath.Dir(p) {
					break
				}
			}
		}
	}
	if !inside {
		return nil
	}
	what := "lies inside the dispatch dir"
	if target == src {
		what = "is the dispatch dir"
	}
	return &DispatchError{Msg: fmt.Sprintf("dispatch cleanup: copy target %s %s %s (refusing: nothing copied or deleted)", dst, what, dir), Inside: true}
}

// resolvePath makes p absolute and resolves every symlink and .. in it as the
// kernel would when it is used, component by component. The part of the path
// that does not exist yet is taken as written.
func resolvePath(p string) (string, error) {
	return resolveDepth(p, 0)
}

func resolveDepth(p string, depth int) (string, error) {
	if depth > 40 {
		return "", errors.New("too many levels of symbolic links")
	}
	if !filepath.IsAbs(p) {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		p = wd + "/" + p
	}
	parts := strings.Split(p, "/")
	cur := "/" // always a resolved path: no symlink in it
	for i, c := range parts {
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			// A directory, a file, or a name that does not exist (yet).
			cur = next
			continue
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(target) {
			target = cur + "/" + target
		}
		return resolveDepth(target+"/"+strings.Join(parts[i+1:], "/"), depth+1)
	}
	return cur, nil
}

// copyDispatchDir is the --failed copy of dir into dst: manifest.jsonl and
// receipt-ledger.jsonl first (they matter most: their content is copied even
// through a symlink), then every other entry it can copy, symlinks as
// symlinks, files and directories with their modes. It goes
// on past an entry it cannot copy (an unreadable file, a fifo) and returns
// every such entry.
func copyDispatchDir(dir, dst string) []CopyFailure {
	var failures []CopyFailure
	fail := func(path string, err error) {
		// An error about the entry itself need not name it twice; one about
		// the target says which.
		var pe *fs.PathError
		if errors.As(err, &pe) && pe.Path == path {
			err = pe.Err
		}
		failures = append(failures, CopyFailure{Path: path, Err: err})
	}
	sfi, err := os.Stat(dir)
	if err != nil {
		fail(dir, err)
		return failures
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o777); err != nil {
		fail(dir, err)
		return failures
	}
	if err := mkdirMerge(dst); err != nil {
		fail(dir, err)
		return failures
	}
	first := []string{FileName, LedgerName}
	for _, name := range first {
		src, to := filepath.Join(dir, name), filepath.Join(dst, name)
		if fi, err := os.Stat(src); err == nil && fi.Mode().IsRegular() {
			// Their content is what must survive, even when they are
			// symlinks to a file elsewhere in /tmp: copied, not linked.
			if err := copyFileAtomic(src, to); err != nil {
				fail(src, err)
			}
		} else if _, err := os.Lstat(src); err == nil {
			copyEntry(src, to, fail)
		}
	}
	copyChildren(dir, dst, first, fail)
	finishDir(dir, dst, sfi, fail)
	return failures
}

// copyChildren copies the entries of the directory src into dst, but those
// named in skip.
func copyChildren(src, dst string, skip []string, fail func(string, error)) {
	entries, err := os.ReadDir(src)
	if err != nil {
		fail(src, err)
		return
	}
	for _, e := range entries {
		if contains(skip, e.Name()) {
			continue
		}
		copyEntry(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), fail)
	}
}

// copyEntry copies one entry, not following a symlink.
func copyEntry(src, dst string, fail func(string, error)) {
	fi, err := os.Lstat(src)
	if err != nil {
		fail(src, err)
		return
	}
	switch mode := fi.Mode(); {
	case mode&fs.ModeSymlink != 0:
		if err := copySymlink(src, dst); err != nil {
			fail(src, err)
		}
	case mode.IsRegular():
		if err := copyFileAtomic(src, dst); err != nil {
			fail(src, err)
		}
	case mode.IsDir():
		if err := mkdirMerge(dst); err != nil {
			fail(src, err)
			return
		}
		copyChildren(src, dst, nil, fail)
		finishDir(src, dst, fi, fail)
	default:
		fail(src, fmt.Errorf("not a regular file, directory or symlink (%s)", typeName(mode)))
	}
}

// mkdirMerge makes the directory dst, or takes the one that is there (a merge,
// as copytree's dirs_exist_ok). Owner-only until finishDir gives it its mode.
func mkdirMerge(dst string) error {
	err := os.Mkdir(dst, 0o700)
	if errors.Is(err, fs.ErrExist) {
		fi, lerr := os.Lstat(dst)
		if lerr == nil && fi.IsDir() {
			return nil
		}
	}
	return err
}

// finishDir gives the copied directory its source's mode and modification
// time, once its entries are in (a read-only directory could not take them).
func finishDir(src, dst string, fi fs.FileInfo, fail func(string, error)) {
	if err := os.Chmod(dst, fi.Mode().Perm()); err != nil {
		fail(src, err)
		return
	}
	if err := os.Chtimes(dst, fi.ModTime(), fi.ModTime()); err != nil {
		fail(src, err)
	}
}

// copySymlink recreates the symlink src at dst (its target as written),
// replacing what dst was atomically.
func copySymlink(src, dst string) error {
	target, err := os.Readlink(src)
	if err != nil {
		return err
	}
	if cur, err := os.Readlink(dst); err == nil && cur == target {
		return nil
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-link")
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func typeName(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}
