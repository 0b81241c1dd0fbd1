package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
)

// MutationSpec is one --mutate ORIG=REPL.
type MutationSpec struct {
	Orig string // a template file name: build-reviewer-prompt.md
	Repl string // the replacement's path as given
	Text string // the replacement's content
}

// ErrMutation is wrapped by every refusal of a --mutate value: the mutation is
// malformed, its replacement unreadable, or no dispatch of the replayed range
// uses its template.
var ErrMutation = errors.New("invalid mutation")

// ParseMutation reads ORIG=REPL and the replacement file, which must exist and
// be readable before anything happens.
func ParseMutation(s string) (MutationSpec, error) {
	orig, repl, ok := strings.Cut(s, "=")
	if !ok || orig == "" || repl == "" {
		return MutationSpec{}, fmt.Errorf("%w: %q: want ORIG=REPL (a template file name, then the replacement's path)", ErrMutation, s)
	}
	if orig != filepath.Base(orig) || orig == "." || orig == ".." {
		return MutationSpec{}, fmt.Errorf("%w: %q: ORIG is a template file name (build-reviewer-prompt.md), not a path", ErrMutation, orig)
	}
	fi, err := os.Stat(repl)
	if err == nil && !fi.Mode().IsRegular() {
		return MutationSpec{}, fmt.Errorf("%w: replacement %s is not a regular file", ErrMutation, repl)
	}
	data, err := os.ReadFile(repl)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return MutationSpec{}, fmt.Errorf("%w: replacement %s: %v", ErrMutation, repl, err)
	}
	return MutationSpec{Orig: orig, Repl: repl, Text: string(data)}, nil
}

// Label is how the manifest records the mutation: "ORIG -> REPL" (basenames).
func (m MutationSpec) Label() string { return m.Orig + " -> " + filepath.Base(m.Repl) }

// Uses reports whether a dispatch of template name (the dispatch file's
// "<seq>-<name>.md") is written from the template file orig: crucible names
// its templates <name>.md or <name>-prompt.md.
func (m MutationSpec) Uses(name string) bool {
	return m.Orig == name+".md" || m.Orig == name+"-prompt.md" || m.Orig == name
}

// TemplateFile is a template as read for an A/B replay.
type TemplateFile struct {
	Name     string    // its file name: red-team-prompt.md
	Where    string    // its path, or REF:path for a pinned template
	Text     string    //
	Modified time.Time // the file's modification time, or the pinned commit's time
}

// Templates reads the templates of an A/B replay: from --templates DIR, or
// pinned at a commit of the git repository holding DIR (--template-ref), read
// through the project runner (read-only: rev-parse, ls-tree, cat-file, log).
type Templates struct {
	Dir   string // --templates DIR ("" for none)
	Skill string // the pipeline's skill: its skills/<skill>/ is searched first

	ref     string // the pinned commit ("" for the files on disk)
	refName string
	refTime time.Time
	files   []string // the pinned commit's paths below Dir, relative to Dir
	prefix  string   // Dir's path inside its repository
}

// ErrTemplateRef means --template-ref cannot be used.
var ErrTemplateRef = errors.New("invalid template ref")

// Pin makes the templates come from commit ref of the repository holding
// Dir. A ref that starts with "-" or does not name a commit is refused.
func (t *Templates) Pin(ctx context.Context, ref string) error {
	if t.Dir == "" {
		return fmt.Errorf("%w: --template-ref needs --templates DIR (the templates inside a git repository)", ErrTemplateRef)
	}
	if ref == "" || strings.HasPrefix(ref, "-") {
		return fmt.Errorf("%w: %q: a ref never starts with '-'", ErrTemplateRef, ref)
	}
	p := gitexec.Project{Dir: t.Dir}
	out, err := p.Run(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil {
		return fmt.Errorf("%w: %q does not name a commit of the repository holding %s", ErrTemplateRef, ref, t.Dir)
	}
	commit := strings.TrimSpace(string(out))
	prefix, err := p.Run(ctx, "rev-parse", "--show-prefix")
	if err != nil {
		return err
	}
	t.prefix = strings.TrimSuffix(strings.TrimSpace(string(prefix)), "/")
	args := []string{"ls-tree", "-r", "-z", "--name-only", "--full-tree", commit}
	if t.prefix != "" {
		args = append(args, "--", t.prefix)
	}
	list, err := p.Run(ctx, args...)
	if err != nil {
		return err
	}
	t.files = nil
	for _, f := range strings.Split(string(list), "\x00") {
		if f == "" {
			continue
		}
		if t.prefix != "" {
			f = strings.TrimPrefix(f, t.prefix+"/")
		}
		t.files = append(t.files, f)
	}
	stamp, err := p.Run(ctx, "log", "-1", "--format=%ct", commit, "--")
	if err != nil {
		return err
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(string(stamp)), 10, 64)
	if err != nil {
		return fmt.Errorf("commit time of %s: %w", ref, err)
	}
	t.ref, t.refName, t.refTime = commit, ref, time.Unix(secs, 0).UTC()
	return nil
}

// Pinned is the pinned commit ("" when the templates are read from disk).
func (t *Templates) Pinned() string { return t.ref }

// Find returns the template of dispatches named name, laid out as
// FindTemplate finds it; ok is false when there is none.
func (t *Templates) Find(ctx context.Context, name string) (TemplateFile, bool, error) {
	if t.ref == "" {
		p := FindTemplate(t.Dir, t.Skill, name)
		if p == "" {
			return TemplateFile{}, false, nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return TemplateFile{}, false, err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return TemplateFile{}, false, err
		}
		return TemplateFile{Name: filepath.Base(p), Where: p, Text: string(data), Modified: fi.ModTime()}, true, nil
	}
	if name == "" || name != path.Base(name) {
		return TemplateFile{}, false, nil
	}
	have := map[string]bool{}
	for _, f := range t.files {
		have[f] = true
	}
	dirs := []string{""}
	if t.Skill != "" && t.Skill == path.Base(t.Skill) {
		dirs = append(dirs, "skills/"+t.Skill)
	}
	var others []string
	for _, f := range t.files {
		if d := path.Dir(f); strings.HasPrefix(f, "skills/") && path.Dir(d) == "skills" {
			others = append(others, d)
		}
	}
	sort.Strings(others)
	dirs = append(dirs, others...)
	for _, d := range dirs {
		for _, file := range []string{name + ".md", name + "-prompt.md"} {
			rel := path.Join(d, file)
			if !have[rel] {
				continue
			}
			full := rel
			if t.prefix != "" {
				full = t.prefix + "/" + rel
			}
			data, err := gitexec.Project{Dir: t.Dir}.Run(ctx, "cat-file", "blob", t.ref+":"+full)
			if err != nil {
				return TemplateFile{}, false, err
			}
			return TemplateFile{Name: path.Base(full), Where: t.refName + ":" + full, Text: string(data), Modified: t.refTime}, true, nil
		}
	}
	return TemplateFile{}, false, nil
}

// MutationPath says how a mutated dispatch file was written.
const (
	PathAligned     = "aligned"     // fillings recovered by aligning the original template
	PathFallback    = "fallback"    // the template no longer aligns: REPL's text plus the added sections
	PathNoTemplate  = "no-template" // the original template was not found: REPL's text plus the added sections
	PathRegenerated = "regenerated" // the original dispatch file is lost: REPL's text alone
)

// MutatedDispatch is the plan of one mutated dispatch.
type MutatedDispatch struct {
	Seq       int    // the original seq
	Template  string // the dispatch's template name
	Mutation  string // "ORIG -> REPL"
	Path      string // PathAligned, PathFallback, PathNoTemplate or PathRegenerated
	Ratio     float64
	Recovered []string
	Unfilled  []string
	Added     int
	Header    *Header // the original's audit header (nil when the file is lost)
	Body      string  // the new body, below the header
}

// MutationPlan is how an A/B replay's mutations apply to the dispatches it
// re-executes.
type MutationPlan struct {
	Mutations  []MutationSpec
	Dispatches map[int]*MutatedDispatch // by original seq
	Order      []int                    // original seqs in plan order
	Warnings   []string
}

// PlanMutations applies the mutations to the dispatches to re-execute. An
// ORIG that none of them uses is refused (a typo would otherwise run an
// experiment that mutates nothing). firstDispatch is the original run's first
// dispatch time: a template modified after it is warned about.
func PlanMutations(ctx context.Context, redo []Dispatch, lookup []string, tmpl *Templates, muts []MutationSpec, firstDispatch time.Time) (*MutationPlan, error) {
	mp := &MutationPlan{Mutations: muts, Dispatches: map[int]*MutatedDispatch{}}
	used := make([]bool, len(muts))
	stale := map[string]bool{}
	for _, d := range redo {
		a := d.Latest()
		name := Template(a)
		tf, found, err := tmpl.Find(ctx, name)
		if err != nil {
			return nil, err
		}
		if found && !firstDispatch.IsZero() && tf.Modified.After(firstDispatch) && !stale[tf.Where] {
			stale[tf.Where] = true
			mp.Warnings = append(mp.Warnings, fmt.Sprintf("Template %s was modified after the original pipeline run. A/B comparison may be confounded by template changes unrelated to the mutation.", tf.Name))
		}
		k := -1
		for i, m := range muts {
			if m.Uses(name) || found && tf.Name == m.Orig {
				k = i
				break
			}
		}
		if k < 0 {
			continue
		}
		used[k] = true
		m := muts[k]
		md := &MutatedDispatch{Seq: d.Seq(), Template: name, Mutation: m.Label()}
		var original string
		for _, att := range []Attempt{a, d.Attempts[0]} {
			if original = FindDispatchFile(lookup, att.File); original != "" {
				break
			}
		}
		switch {
		case original == "":
			md.Path, md.Body = PathRegenerated, "\n"+m.Text
			md.Unfilled = Placeholders(m.Text)
		default:
			data, err := os.ReadFile(original)
			if err != nil {
				return nil, err
			}
			h, body, ok := ParseDispatchFile(string(data))
			if ok {
				md.Header = &h
			}
			lead := body[:len(body)-len(strings.TrimLeft(body, "\n"))]
			orig := ""
			if found {
				orig = tf.Text
			}
			mut := Mutate(orig, body, m.Text)
			md.Ratio, md.Recovered, md.Unfilled, md.Added = mut.Ratio, mut.Recovered, mut.Unfilled, mut.Added
			switch {
			case mut.Aligned:
				md.Path = PathAligned
			case found:
				md.Path = PathFallback
				mp.Warnings = append(mp.Warnings, fmt.Sprintf("template %s no longer aligns with seq %d's dispatch file (%.0f%% of its text found, %.0f%% needed): its body is replaced by %s, with the %s the orchestrator added appended",
					tf.Name, d.Seq(), 100*mut.Ratio, 100*MinAlignment, filepath.Base(m.Repl), plural(mut.Added, "section")))
			default:
				md.Path = PathNoTemplate
				mp.Warnings = append(mp.Warnings, fmt.Sprintf("the template of seq %d (%s.md or %s-prompt.md) is not found (pass --templates DIR): its placeholders cannot be recovered; its body is replaced by %s, with the %s the orchestrator added appended",
					d.Seq(), name, name, filepath.Base(m.Repl), plural(mut.Added, "section")))
			}
			md.Body = lead + mut.Body
		}
		mp.Dispatches[d.Seq()] = md
		mp.Order = append(mp.Order, d.Seq())
	}
	var unused []string
	for i, m := range muts {
		if !used[i] {
			unused = append(unused, m.Orig)
		}
	}
	if len(unused) > 0 {
		var names []string
		seen := map[string]bool{}
		for _, d := range redo {
			if n := Template(d.Latest()); !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
		return nil, fmt.Errorf("%w: no dispatch of the replayed range uses %s (their templates: %s)", ErrMutation, strings.Join(unused, ", "), strings.Join(names, ", "))
	}
	return mp, nil
}
