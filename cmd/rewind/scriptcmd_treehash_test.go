package main

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"
)

// treehash DIR prints one line per file, symlink and directory under DIR,
// sorted: type and mode, content hash (or link target), quoted path. Every .git
// directory is skipped, unless the flag -git is given, which lists only what is
// under DIR (for hashing a .git itself). Comparing two listings proves a tree
// byte-exact.
func init() {
	scriptCmds["treehash"] = func(ts *testscript.TestScript, neg bool, args []string) {
		if neg {
			ts.Fatalf("unsupported: ! treehash")
		}
		all := false
		if len(args) == 2 && args[0] == "-git" {
			all, args = true, args[1:]
		}
		if len(args) != 1 {
			ts.Fatalf("usage: treehash [-git] DIR")
		}
		lines, err := treeListing(ts.MkAbs(args[0]), all)
		if err != nil {
			ts.Fatalf("treehash: %v", err)
		}
		for _, l := range lines {
			fmt.Fprintln(ts.Stdout(), l)
		}
	}
}

// treeListing is treehash's listing of root, sorted; with all, .git
// directories are listed too. A root that is a file is listed as ".".
func treeListing(root string, all bool) ([]string, error) {
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root && d.IsDir() {
			return nil
		}
		if !all && d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			lines = append(lines, fmt.Sprintf("link -> %s %s", strconv.Quote(target), strconv.Quote(rel)))
		case fi.IsDir():
			lines = append(lines, fmt.Sprintf("dir %s", strconv.Quote(rel)))
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("%04o %x %s", fi.Mode().Perm(), sha256.Sum256(data), strconv.Quote(rel)))
		}
		return nil
	})
	sort.Strings(lines)
	return lines, err
}
