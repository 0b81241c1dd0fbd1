package checkpoint

import (
	"bytes"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestIgnoreMatchesGit checks rewind's gitignore matcher against git itself:
// random pattern files and random trees, every path and directory judged by
// both (git check-ignore --no-index), with the same answer required.
func TestIgnoreMatchesGit(t *testing.T) {
	rounds := 40
	if os.Getenv("REWIND_SOAK") != "" {
		rounds = 400
	}
	for seed := int64(1); seed <= int64(rounds); seed++ {
		r := rand.New(rand.NewSource(seed))
		dir := t.TempDir()
		git := func(stdin string, args ...string) string {
			cmd := exec.Command("git", args...)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+dir)
			cmd.Stdin = strings.NewReader(stdin)
			var out bytes.Buffer
			cmd.Stdout = &out
			cmd.Run() // exit 1: nothing ignored
			return out.String()
		}
		git("", "init", "-q")
		var lines []string
		for i := 0; i < 1+r.Intn(6); i++ {
			lines = append(lines, randomPattern(r))
		}
		data := strings.Join(lines, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(dir, ".gitignore"), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		paths := map[string]bool{} // path -> is a directory
		for i := 0; i < 25; i++ {
			p := randomPath(r)
			full := filepath.Join(dir, p)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				continue // a file is in the way
			}
			if fi, err := os.Lstat(full); err == nil && fi.IsDir() {
				continue
			}
			if err := os.WriteFile(full, nil, 0o644); err != nil {
				continue
			}
			paths[p] = false
			for d := filepath.Dir(p); d != "."; d = filepath.Dir(d) {
				paths[d] = true
			}
		}
		var query []string
		for p := range paths {
			query = append(query, p)
		}
		sort.Strings(query)
		gitSays := map[string]bool{}
		for _, p := range strings.Split(git(strings.Join(query, "\x00")+"\x00", "check-ignore", "--no-index", "-z", "--stdin"), "\x00") {
			if p != "" {
				gitSays[p] = true
			}
		}
		ps := parseIgnore([]byte(data))
		for _, p := range query {
			if got := ps.excluded(p, paths[p]); got != gitSays[p] {
				t.Errorf("seed %d: %s (dir %v) with patterns %q: rewind says excluded=%v, git says %v", seed, p, paths[p], lines, got, gitSays[p])
			}
		}
	}
}

func randomPattern(r *rand.Rand) string {
	atoms := []string{"a", "b", "ab", "*", "?", "**", "[ab]", "[!a]", "[a-c]", "[[:alpha:]]", "/", "\\*", "x"}
	var b strings.Builder
	if r.Intn(5) == 0 {
		b.WriteString("!")
	}
	if r.Intn(4) == 0 {
		b.WriteString("/")
	}
	for i := 0; i < 1+r.Intn(4); i++ {
		b.WriteString(atoms[r.Intn(len(atoms))])
	}
	if r.Intn(4) == 0 {
		b.WriteString("/")
	}
	return b.String()
}

func randomPath(r *rand.Rand) string {
	names := []string{"a", "b", "ab", "ba", "x", "a*", "c", "aa"}
	var parts []string
	for i := 0; i < 1+r.Intn(3); i++ {
		parts = append(parts, names[r.Intn(len(names))])
	}
	return strings.Join(parts, "/")
}

func TestIgnoreLines(t *testing.T) {
	ps := parseIgnore([]byte("# comment\n\n\\#hash\n\\!bang\ntrail\\ \nspaces   \r\n!keep\nnode_modules/\n/root\n"))
	for _, c := range []struct {
		path  string
		dir   bool
		excl  bool
		about string
	}{
		{"#hash", false, true, "an escaped '#'"},
		{"!bang", false, true, "an escaped '!'"},
		{"trail ", false, true, "an escaped trailing space"},
		{"spaces", false, true, "unescaped trailing spaces dropped"},
		{"x/node_modules", true, true, "a directory pattern at any level"},
		{"x/node_modules/a.js", false, true, "below an excluded directory"},
		{"node_modules", false, false, "a directory pattern and a file"},
		{"root", false, true, "an anchored pattern"},
		{"x/root", false, false, "an anchored pattern elsewhere"},
		{"comment", false, false, "a comment"},
	} {
		if got := ps.excluded(c.path, c.dir); got != c.excl {
			t.Errorf("%s: %s excluded=%v, want %v", c.about, c.path, got, c.excl)
		}
	}
}

func FuzzWildmatch(f *testing.F) {
	for _, s := range []string{"*", "**/a", "a/**", "[a-c]?", "[[:digit:]]*", "\\*", "a/*/b", "[!ab]"} {
		f.Add(s, "a/b/c")
	}
	f.Fuzz(func(t *testing.T, pattern, text string) {
		// It must end, and a pattern without special characters matches
		// exactly itself.
		wildmatch(pattern, text, true)
		wildmatch(pattern, text, false)
		if !strings.ContainsAny(pattern, "*?[\\") && wildmatch(pattern, text, true) != (pattern == text) {
			t.Fatalf("literal %q vs %q", pattern, text)
		}
	})
}
