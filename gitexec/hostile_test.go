package gitexec

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The hostile-environment matrix: each case sets up an environment or user config
// that would change what a shadow operation stores, or run a foreign command, if
// any of it leaked through. Every case must store exactly the commit the clean
// environment stores (same id, so same bytes, modes and message), check out the
// same bytes, leave the decoy repository untouched and run no foreign command (no
// marker file written).

type hostileFixture struct {
	root    string
	markers string // foreign commands write here
	decoy   string // a repository that inherited GIT_* variables point at
	home    string // a HOME with hostile config, used by the config cases
}

// opResult is what a shadow operation produced.
type opResult struct {
	commit  string
	objects int               // loose objects in the store: it must hold every object itself
	files   map[string]string // path -> mode and sha256 of the checked-out bytes
}

func newHostileFixture(t *testing.T) *hostileFixture {
	t.Helper()
	root := t.TempDir()
	f := &hostileFixture{
		root:    root,
		markers: filepath.Join(root, "markers"),
		decoy:   filepath.Join(root, "decoy"),
		home:    filepath.Join(root, "home"),
	}
	mustMkdir(t, f.markers)
	// A real repository for the inherited variables to point at.
	mustMkdir(t, f.decoy)
	clean := Shadow{GitDir: filepath.Join(f.decoy, ".git"), WorkTree: f.decoy,
		IndexFile: filepath.Join(f.decoy, ".git", "index"), ConfigHome: filepath.Join(root, "decoy-home")}
	if err := clean.Init(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The decoy holds the same blobs, so a leaked alternate or object directory
	// would make git skip writing them to the store.
	workTree(t, f.decoy)
	if _, err := clean.Run(context.Background(), "add", "-A"); err != nil {
		t.Fatal(err)
	}
	if _, err := clean.Run(context.Background(), "commit", "-q", "-m", "decoy"); err != nil {
		t.Fatal(err)
	}
	return f
}

// script writes an executable that records its name in the markers directory and
// fails: any foreign command that runs leaves a trace.
func (f *hostileFixture) script(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(f.root, "bin", name)
	mustMkdir(t, filepath.Dir(path))
	body := fmt.Sprintf("#!/bin/sh\necho ran >> '%s'\nexit 1\n", filepath.Join(f.markers, name))
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// hooksDir makes a directory of hooks that each leave a marker and fail.
func (f *hostileFixture) hooksDir(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(f.root, name)
	mustMkdir(t, dir)
	for _, h := range []string{"pre-commit", "commit-msg", "post-commit", "post-checkout", "pre-auto-gc", "post-index-change", "reference-transaction", "fsmonitor-watchman"} {
		body := fmt.Sprintf("#!/bin/sh\necho %s >> '%s'\nexit 1\n", h, filepath.Join(f.markers, name+"-"+h))
		if err := os.WriteFile(filepath.Join(dir, h), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// hostileConfig is a git config that changes storage and runs foreign commands in
// every way it can. Values are quoted: git reads an unquoted ';' as a comment.
func (f *hostileFixture) hostileConfig(t *testing.T) string {
	t.Helper()
	template := filepath.Join(f.root, "template")
	mustMkdir(t, template)
	if err := os.Rename(f.hooksDir(t, "template-hooks"), filepath.Join(template, "hooks")); err != nil {
		t.Fatal(err)
	}
	ignoreAll := filepath.Join(f.root, "ignore-all")
	mustWrite(t, ignoreAll, "*\n", 0o644)
	failing := f.script(t, "filter")
	return fmt.Sprintf(`[commit]
	gpgsign = true
[gpg]
	program = "%s"
[core]
	hooksPath = "%s"
	autocrlf = true
	fsmonitor = "%s"
	excludesFile = "%s"
	attributesFile = "%s"
[filter "lfs"]
	clean = "%s %%f; exit 1"
	smudge = "%s %%f; exit 1"
	process = "%s"
	required = true
[init]
	defaultBranch = trunk
	templateDir = "%s"
[user]
	useConfigOnly = true
`, f.script(t, "gpg"), f.hooksDir(t, "config-hooks"), f.script(t, "fsmonitor"), ignoreAll,
		filepath.Join(f.root, "attributes-all"), failing, failing, failing, template)
}

func (f *hostileFixture) writeHostileAttributes(t *testing.T, path string) {
	mustWrite(t, path, "* filter=lfs diff=lfs merge=lfs text eol=crlf ident\n", 0o644)
}

// workTree builds the tree every case snapshots: CRLF and LF text, binary bytes,
// an executable, a symlink, a .gitattributes asking for the failing filter and
// end-of-line conversion, and an ident keyword.
func workTree(t *testing.T, dir string) {
	t.Helper()
	mustWrite(t, filepath.Join(dir, "crlf.txt"), "one\r\ntwo\r\n", 0o644)
	mustWrite(t, filepath.Join(dir, "lf.txt"), "one\ntwo\n$Id$\n", 0o644)
	var bin []byte
	for i := 0; i < 256; i++ {
		bin = append(bin, byte(i))
	}
	mustWrite(t, filepath.Join(dir, "data.bin"), string(bin), 0o644)
	mustWrite(t, filepath.Join(dir, "sub", "run.sh"), "#!/bin/sh\necho hi\n", 0o755)
	mustWrite(t, filepath.Join(dir, ".gitattributes"), "* filter=lfs diff=lfs merge=lfs\n*.txt text eol=crlf ident\n", 0o644)
	if err := os.Symlink("lf.txt", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
}

// shadowOperation snapshots a work tree the way a checkpoint does (porcelain
// add and commit, so hooks and signing would get their chance, then plumbing),
// then checks the commit out into a fresh directory the way a restore does.
func shadowOperation(t *testing.T, root string) opResult {
	t.Helper()
	ctx := context.Background()
	wt := filepath.Join(root, "wt")
	workTree(t, wt)
	store := filepath.Join(root, "store")
	s := Shadow{GitDir: filepath.Join(store, "git"), WorkTree: wt, IndexFile: filepath.Join(store, "index"),
		ConfigHome: filepath.Join(store, "home"), Date: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	if err := s.Init(ctx); err != nil {
		t.Fatalf("init: %v", err)
	}
	if _, err := s.Run(ctx, "add", "-A"); err != nil {
		t.Fatalf("add: %v", err)
	}
	if _, err := s.Run(ctx, "commit", "--quiet", "-m", "snapshot | 2026-01-02T03:04:05Z | test"); err != nil {
		t.Fatalf("commit: %v", err)
	}
	tree, err := s.Run(ctx, "write-tree")
	if err != nil {
		t.Fatalf("write-tree: %v", err)
	}
	commit, err := s.Run(ctx, "commit-tree", "-m", "checkpoint", strings.TrimSpace(string(tree)))
	if err != nil {
		t.Fatalf("commit-tree: %v", err)
	}
	id := strings.TrimSpace(string(commit))
	if _, err := s.Run(ctx, "update-ref", "refs/rewind/checkpoints/1", id); err != nil {
		t.Fatalf("update-ref: %v", err)
	}

	// Restore into an empty directory through a separate index.
	out := filepath.Join(root, "restored")
	mustMkdir(t, out)
	r := Shadow{GitDir: s.GitDir, WorkTree: out, IndexFile: filepath.Join(store, "restore-index"), ConfigHome: s.ConfigHome}
	if _, err := r.Run(ctx, "read-tree", id); err != nil {
		t.Fatalf("read-tree: %v", err)
	}
	if _, err := r.Run(ctx, "checkout-index", "-a", "-f"); err != nil {
		t.Fatalf("checkout-index: %v", err)
	}
	objects := 0
	for path := range listing(t, filepath.Join(s.GitDir, "objects")) {
		if len(path) == 41 && path[2] == '/' {
			objects++
		}
	}
	return opResult{commit: id, objects: objects, files: listing(t, out)}
}

func TestHostileEnvironmentMatrix(t *testing.T) {
	baseline := shadowOperation(t, t.TempDir())
	if want := listing(t, func() string { d := t.TempDir(); workTree(t, d); return d }()); !equalMaps(baseline.files, want) {
		t.Fatalf("clean environment: restored tree differs from the work tree:\n got %v\nwant %v", baseline.files, want)
	}

	cases := []struct {
		name  string
		setup func(t *testing.T, f *hostileFixture)
	}{
		{"GIT_DIR", func(t *testing.T, f *hostileFixture) { t.Setenv("GIT_DIR", filepath.Join(f.decoy, ".git")) }},
		{"GIT_WORK_TREE", func(t *testing.T, f *hostileFixture) { t.Setenv("GIT_WORK_TREE", f.decoy) }},
		{"GIT_INDEX_FILE", func(t *testing.T, f *hostileFixture) {
			t.Setenv("GIT_INDEX_FILE", filepath.Join(f.decoy, ".git", "index"))
		}},
		{"GIT_OBJECT_DIRECTORY", func(t *testing.T, f *hostileFixture) {
			t.Setenv("GIT_OBJECT_DIRECTORY", filepath.Join(f.decoy, ".git", "objects"))
		}},
		{"GIT_ALTERNATE_OBJECT_DIRECTORIES", func(t *testing.T, f *hostileFixture) {
			t.Setenv("GIT_ALTERNATE_OBJECT_DIRECTORIES", filepath.Join(f.decoy, ".git", "objects"))
		}},
		{"GIT_CONFIG_PARAMETERS", func(t *testing.T, f *hostileFixture) {
			t.Setenv("GIT_CONFIG_PARAMETERS", fmt.Sprintf("'core.hooksPath'='%s' 'core.autocrlf'='true' 'commit.gpgsign'='true' 'core.fsmonitor'='%s'",
				f.hooksDir(t, "param-hooks"), f.script(t, "param-fsmonitor")))
		}},
		{"GIT_CONFIG_COUNT", func(t *testing.T, f *hostileFixture) {
			t.Setenv("GIT_CONFIG_COUNT", "3")
			t.Setenv("GIT_CONFIG_KEY_0", "core.hooksPath")
			t.Setenv("GIT_CONFIG_VALUE_0", f.hooksDir(t, "count-hooks"))
			t.Setenv("GIT_CONFIG_KEY_1", "core.autocrlf")
			t.Setenv("GIT_CONFIG_VALUE_1", "true")
			t.Setenv("GIT_CONFIG_KEY_2", "core.fsmonitor")
			t.Setenv("GIT_CONFIG_VALUE_2", f.script(t, "count-fsmonitor"))
		}},
		{"HOME gitconfig", func(t *testing.T, f *hostileFixture) {
			mustWrite(t, filepath.Join(f.home, ".gitconfig"), f.hostileConfig(t), 0o644)
			f.writeHostileAttributes(t, filepath.Join(f.root, "attributes-all"))
			t.Setenv("HOME", f.home)
		}},
		{"XDG gitconfig", func(t *testing.T, f *hostileFixture) {
			xdg := filepath.Join(f.root, "xdg")
			mustWrite(t, filepath.Join(xdg, "git", "config"), f.hostileConfig(t), 0o644)
			f.writeHostileAttributes(t, filepath.Join(f.root, "attributes-all"))
			t.Setenv("XDG_CONFIG_HOME", xdg)
			t.Setenv("HOME", f.home)
		}},
		{"XDG ignore and attributes", func(t *testing.T, f *hostileFixture) {
			xdg := filepath.Join(f.root, "xdg")
			mustWrite(t, filepath.Join(xdg, "git", "ignore"), "*\n", 0o644)
			f.writeHostileAttributes(t, filepath.Join(xdg, "git", "attributes"))
			failing := f.script(t, "xdg-filter")
			// The filter driver the attributes name, defined where a user would.
			mustWrite(t, filepath.Join(xdg, "git", "config"), fmt.Sprintf("[filter \"lfs\"]\n\tclean = \"%s\"\n\tsmudge = \"%s\"\n\trequired = true\n", failing, failing), 0o644)
			t.Setenv("XDG_CONFIG_HOME", xdg)
		}},
		{"no identity", func(t *testing.T, f *hostileFixture) {
			mustMkdir(t, f.home)
			mustWrite(t, filepath.Join(f.home, ".gitconfig"), "[user]\n\tuseConfigOnly = true\n", 0o644)
			t.Setenv("HOME", f.home)
			for _, k := range []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "EMAIL"} {
				t.Setenv(k, "")
				os.Unsetenv(k)
			}
		}},
		{"everything at once", func(t *testing.T, f *hostileFixture) {
			mustWrite(t, filepath.Join(f.home, ".gitconfig"), f.hostileConfig(t), 0o644)
			f.writeHostileAttributes(t, filepath.Join(f.root, "attributes-all"))
			xdg := filepath.Join(f.root, "xdg")
			mustWrite(t, filepath.Join(xdg, "git", "ignore"), "*\n", 0o644)
			f.writeHostileAttributes(t, filepath.Join(xdg, "git", "attributes"))
			t.Setenv("HOME", f.home)
			t.Setenv("XDG_CONFIG_HOME", xdg)
			t.Setenv("GIT_DIR", filepath.Join(f.decoy, ".git"))
			t.Setenv("GIT_WORK_TREE", f.decoy)
			t.Setenv("GIT_INDEX_FILE", filepath.Join(f.decoy, ".git", "index"))
			t.Setenv("GIT_OBJECT_DIRECTORY", filepath.Join(f.decoy, ".git", "objects"))
			t.Setenv("GIT_CONFIG_PARAMETERS", "'core.autocrlf'='true'")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newHostileFixture(t)
			decoyBefore := listing(t, f.decoy)
			tc.setup(t, f)

			got := shadowOperation(t, filepath.Join(f.root, "op"))

			if got.commit != baseline.commit {
				t.Errorf("commit %s, want %s: the environment changed what was stored", got.commit, baseline.commit)
			}
			if got.objects != baseline.objects {
				t.Errorf("the store holds %d objects, want %d: objects went elsewhere", got.objects, baseline.objects)
			}
			if !equalMaps(got.files, baseline.files) {
				t.Errorf("restored files differ:\n got %v\nwant %v", got.files, baseline.files)
			}
			if markers, _ := os.ReadDir(f.markers); len(markers) > 0 {
				var names []string
				for _, m := range markers {
					names = append(names, m.Name())
				}
				t.Errorf("foreign commands ran: %v", names)
			}
			if after := listing(t, f.decoy); !equalMaps(after, decoyBefore) {
				t.Errorf("the decoy repository changed")
			}
		})
	}
}

// listing maps each path under dir to its type, mode and content hash.
func listing(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := os.Lstat(path)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			out[rel+"/"] = "dir"
		case info.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(path)
			out[rel] = "link " + target
		default:
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[rel] = fmt.Sprintf("%o %x", info.Mode().Perm()&0o100, sha256.Sum256(data))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func mustMkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	mustMkdir(t, filepath.Dir(path))
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}
