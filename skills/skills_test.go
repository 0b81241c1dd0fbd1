package skills

import (
	"bytes"
	"errors"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestShippedListHasEveryCurrentVersion keeps shipped.txt true: a SKILL.md
// edited without appending its hash would make the next install refuse to
// update a file this very rewind wrote.
func TestShippedListHasEveryCurrentVersion(t *testing.T) {
	if _, err := shipped(); err != nil {
		t.Fatal(err)
	}
	all := All()
	if len(all) != 3 {
		t.Fatalf("embedded skills: %d, want checkpoint, dispatch and replay", len(all))
	}
	for _, s := range all {
		if !WasShipped(s.Path(), s.Content) {
			t.Errorf("%s: its hash %s is not in shipped.txt; append the line:\n%s %s", s.Path(), Hash(s.Content), Hash(s.Content), s.Path())
		}
		if WasShipped(s.Path(), append(bytes.Clone(s.Content), '\n')) {
			t.Errorf("%s: an edited copy counts as shipped", s.Path())
		}
	}
}

// TestEmbeddedAreTheRepositoryFiles: the binary ships what the repository holds.
func TestEmbeddedAreTheRepositoryFiles(t *testing.T) {
	for _, s := range All() {
		data, err := os.ReadFile(s.Path())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(data, s.Content) {
			t.Errorf("%s differs from the embedded copy", s.Path())
		}
	}
}

// TestSkillsFormat: crucible's front matter (name, description), and every
// step one rewind command, never git by hand.
func TestSkillsFormat(t *testing.T) {
	for _, s := range All() {
		text := string(s.Content)
		front, ok := strings.CutPrefix(text, "---\n")
		if !ok {
			t.Errorf("%s: no front matter", s.Path())
			continue
		}
		front, _, ok = strings.Cut(front, "\n---\n")
		if !ok {
			t.Errorf("%s: front matter not closed", s.Path())
			continue
		}
		if !strings.Contains(front, "\nname: "+s.Name+"\n") && !strings.HasPrefix(front, "name: "+s.Name+"\n") {
			t.Errorf("%s: front matter lacks name: %s", s.Path(), s.Name)
		}
		if !strings.Contains(front, "\ndescription: ") {
			t.Errorf("%s: front matter lacks a description", s.Path())
		}
		steps, err := Steps(s.Content)
		if err != nil {
			t.Errorf("%s: %v", s.Path(), err)
			continue
		}
		if len(steps) < 3 {
			t.Errorf("%s: %d steps", s.Path(), len(steps))
		}
		for _, st := range steps {
			if strings.Contains(st.Command, "\n") || !strings.HasPrefix(st.Command, "rewind ") {
				t.Errorf("%s line %d: a step must be one rewind command, got %q", s.Path(), st.Line, st.Command)
			}
		}
		for _, word := range []string{"GIT_DIR", "git checkout", "git add", "git commit"} {
			if strings.Contains(text, word) {
				t.Errorf("%s mentions %q: a skill runs rewind, not git or dispatch.py by hand", s.Path(), word)
			}
		}
	}
}

func TestSteps(t *testing.T) {
	md := "# Top\n\n## One\n\n1. First:\n   ```bash\n   rewind a \"$X\"\n   ```\n\n```\nsample output\n```\n\n" +
		"## Two\n````sh\nrewind b\n\nrewind c\n````\n```json\n{}\n```\nInline ```bash not a fence``` here.\n"
	got, err := Steps([]byte(md))
	if err != nil {
		t.Fatal(err)
	}
	want := []Step{{Line: 6, Section: "One", Command: `rewind a "$X"`}, {Line: 15, Section: "Two", Command: "rewind b\n\nrewind c"}}
	if len(got) != len(want) {
		t.Fatalf("steps %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("step %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := Steps([]byte("```bash\nrewind x\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("unterminated fence: %v", err)
	}
}

func FuzzSteps(f *testing.F) {
	for _, s := range All() {
		f.Add(s.Content)
	}
	f.Add([]byte("```bash\n```\n  ~~~ sh\n x\n  ~~~\n"))
	f.Fuzz(func(t *testing.T, md []byte) {
		steps, err := Steps(md)
		if err != nil {
			return
		}
		last := 0
		for _, s := range steps {
			if s.Line <= last {
				t.Fatalf("steps out of order: %+v", steps)
			}
			last = s.Line
		}
	})
}

func TestInstall(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "skills")
	entries, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.State != Missing {
			t.Errorf("%s: %s, want missing", e.Path, e.State)
		}
	}
	res, err := Install(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		data, err := os.ReadFile(r.Path)
		if err != nil || !bytes.Equal(data, r.Skill.Content) || !r.Written {
			t.Errorf("%s: not installed: %v", r.Path, err)
		}
	}
	// Installing again writes nothing.
	res, err = Install(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Written || r.State != Current {
			t.Errorf("second install: %s %s written=%v", r.Path, r.State, r.Written)
		}
	}

	// A user's edit is refused, and nothing else is written either.
	cp := filepath.Join(dir, "checkpoint", FileName)
	edited := []byte("my own checkpoint procedure\n")
	if err := os.WriteFile(cp, edited, 0o644); err != nil {
		t.Fatal(err)
	}
	replay := filepath.Join(dir, "replay", FileName)
	if err := os.Remove(replay); err != nil {
		t.Fatal(err)
	}
	_, err = Install(dir, false)
	var ce *ChangedError
	if !errors.As(err, &ce) || len(ce.Paths) != 1 || ce.Paths[0] != cp {
		t.Fatalf("install over an edit: %v", err)
	}
	if data, _ := os.ReadFile(cp); !bytes.Equal(data, edited) {
		t.Errorf("the edited file was overwritten")
	}
	if _, err := os.Stat(replay); err == nil {
		t.Errorf("a refused install wrote %s", replay)
	}

	// Forced: the edit is kept beside it.
	res, err = Install(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	var backup string
	for _, r := range res {
		if r.Path == cp {
			backup = r.Backup
		}
	}
	if data, err := os.ReadFile(backup); err != nil || !bytes.Equal(data, edited) {
		t.Errorf("backup %q: %q, %v", backup, data, err)
	}
	if data, _ := os.ReadFile(cp); bytes.Equal(data, edited) {
		t.Errorf("--force did not replace the edit")
	}
}

// TestInstallReplacesAnOlderShippedVersion: a file some rewind shipped is
// rewind's, and is updated without --force.
func TestInstallReplacesAnOlderShippedVersion(t *testing.T) {
	old := []byte("an older checkpoint skill\n")
	saved := shippedList
	t.Cleanup(func() { shippedList = saved })
	shippedList += Hash(old) + " checkpoint/SKILL.md\n"
	dir := t.TempDir()
	cp := filepath.Join(dir, "checkpoint", FileName)
	os.MkdirAll(filepath.Dir(cp), 0o755)
	if err := os.WriteFile(cp, old, 0o644); err != nil {
		t.Fatal(err)
	}
	entries, err := Inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	if entries[0].State != Outdated {
		t.Fatalf("state %s, want outdated", entries[0].State)
	}
	if _, err := Install(dir, false); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(cp); !bytes.Equal(data, entries[0].Skill.Content) {
		t.Errorf("not updated")
	}
}

// applyUnified applies a diff made by UnifiedDiff to old, the way patch
// would, so the tests can check that the diff really turns old into new.
func applyUnified(t *testing.T, old []byte, diff string) []byte {
	t.Helper()
	a := splitLines(string(old))
	var out strings.Builder
	lines := strings.Split(strings.TrimSuffix(diff, "\n"), "\n")
	next := 0 // the next line of a to copy
	lastKind := byte(0)
	for i := 2; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "@@ ") {
			var as, al, bs, bl int
			if n, _ := sscanHunk(l, &as, &al, &bs, &bl); n == 0 {
				t.Fatalf("bad hunk header %q", l)
			}
			start := as - 1
			if al == 0 {
				start = as
			}
			for ; next < start; next++ {
				writeLine(&out, a[next])
			}
			continue
		}
		if l == `\ No newline at end of file` {
			if lastKind != '+' {
				continue // only a written + line ends in a newline to take back
			}
			s := out.String()
			out.Reset()
			out.WriteString(strings.TrimSuffix(s, "\n"))
			continue
		}
		lastKind = l[0]
		switch l[0] {
		case ' ':
			writeLine(&out, a[next])
			next++
		case '-':
			next++
		case '+':
			out.WriteString(l[1:] + "\n")
		}
	}
	for ; next < len(a); next++ {
		writeLine(&out, a[next])
	}
	return []byte(out.String())
}

func writeLine(b *strings.Builder, l line) {
	b.WriteString(l.text)
	if l.eol {
		b.WriteString("\n")
	}
}

// sscanHunk reads "@@ -as[,al] +bs[,bl] @@".
func sscanHunk(h string, as, al, bs, bl *int) (int, error) {
	f := strings.Fields(h)
	parse := func(s string, start, n *int) {
		p, q, ok := strings.Cut(s[1:], ",")
		*start = atoi(p)
		*n = 1
		if ok {
			*n = atoi(q)
		}
	}
	parse(f[1], as, al)
	parse(f[2], bs, bl)
	return 4, nil
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestUnifiedDiffRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	words := []string{"a", "b", "c", "d", "e"}
	gen := func() []byte {
		var b strings.Builder
		n := rng.Intn(30)
		for i := 0; i < n; i++ {
			b.WriteString(words[rng.Intn(len(words))])
			if i < n-1 || rng.Intn(4) > 0 {
				b.WriteString("\n")
			}
		}
		return []byte(b.String())
	}
	for i := 0; i < 2000; i++ {
		old, new := gen(), gen()
		d := UnifiedDiff("a", "b", old, new)
		if bytes.Equal(old, new) {
			if d != "" {
				t.Fatalf("equal inputs, diff %q", d)
			}
			continue
		}
		if got := applyUnified(t, old, d); !bytes.Equal(got, new) {
			t.Fatalf("round trip %d:\nold %q\nnew %q\ndiff:\n%s\ngot %q", i, old, new, d, got)
		}
	}
}

// TestUnifiedDiffMatchesDiffU compares the hunks with diff -u's, where the
// machine has diff (the line matching may differ on ties, so only inputs
// with one best matching are compared).
func TestUnifiedDiffMatchesDiffU(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("no diff on PATH")
	}
	dir := t.TempDir()
	var old, new strings.Builder
	for i := 1; i <= 40; i++ {
		old.WriteString("line " + itoa(i) + "\n")
		switch {
		case i == 5:
			new.WriteString("changed five\n")
		case i == 20:
		case i == 33:
			new.WriteString("line 33\nadded\n")
		default:
			new.WriteString("line " + itoa(i) + "\n")
		}
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(a, []byte(old.String()), 0o644)
	os.WriteFile(b, []byte(new.String()), 0o644)
	out, _ := exec.Command("diff", "-u", "--label", "A", "--label", "B", a, b).Output()
	if got := UnifiedDiff("A", "B", []byte(old.String()), []byte(new.String())); got != string(out) {
		t.Errorf("got:\n%s\ndiff -u:\n%s", got, out)
	}
	if got := UnifiedDiff("/dev/null", "B", nil, []byte("x\ny\n")); got != "--- /dev/null\n+++ B\n@@ -0,0 +1,2 @@\n+x\n+y\n" {
		t.Errorf("new file: %q", got)
	}
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}
