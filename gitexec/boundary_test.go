package gitexec

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestProcessBoundary enforces the design's package boundaries on the whole
// module: only gitexec starts processes (imports os/exec) outside test files, and
// domain packages import neither the CLI framework nor the colour library.
func TestProcessBoundary(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		pkg := filepath.ToSlash(filepath.Dir(rel))
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			switch {
			case p == "os/exec" && pkg != "gitexec":
				t.Errorf("%s imports os/exec: only gitexec may start processes", rel)
			case (strings.HasPrefix(p, "github.com/urfave/cli") || strings.HasPrefix(p, "github.com/fatih/color")) && !strings.HasPrefix(pkg, "cmd/"):
				t.Errorf("%s imports %s: only cmd/rewind talks to the terminal", rel, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 5 {
		t.Fatalf("checked only %d files: the walk is broken", checked)
	}
}
