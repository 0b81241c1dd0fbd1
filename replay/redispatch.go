package replay

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/rewind-cli/rewind/manifest"
)

// ErrUnfaithful means a dispatch to re-execute has neither its original
// dispatch file nor a template to regenerate it from.
var ErrUnfaithful = errors.New("faithful replay is impossible")

// Redispatcher writes the new dispatch files and their dispatched entries.
type Redispatcher struct {
	DispatchDir     string   // where the manifest is, and the new dispatch files go
	Lookup          []string // where original dispatch files are looked up, in order
	Templates       string   // --templates DIR: <template>.md or <template>-prompt.md files, also in DIR/skills/*/
	AllowUnfaithful bool     // write a stub when the template is missing too
	Skill           string
	Session         string
	Now             time.Time
	Warn            func(string)
	ManifestWarn    io.Writer // dispatch.py's [dispatch WARN] lines
}

// source is where a re-dispatch's instructions come from.
type source struct {
	original string // an existing dispatch file
	template string // a template file, when the original is lost
}

// Check reports ErrUnfaithful when a dispatch to re-execute has neither its
// dispatch file nor a template (and AllowUnfaithful is off), without warning or
// writing anything: the caller checks before restoring, so a refusal leaves the
// work tree as it was.
func (r Redispatcher) Check(redo []Dispatch) error {
	r.Warn = nil
	_, err := r.check(redo)
	return err
}

// check finds a source for every dispatch before anything is written, so a
// refusal leaves nothing half-done.
func (r Redispatcher) check(redo []Dispatch) ([]source, error) {
	var sources []source
	var missing []string
	for _, d := range redo {
		a := d.Latest()
		var src source
		for _, att := range []Attempt{a, d.Attempts[0]} {
			if src.original = FindDispatchFile(r.Lookup, att.File); src.original != "" {
				break
			}
		}
		if src.original == "" {
			name := Template(a)
			src.template = FindTemplate(r.Templates, r.Skill, name)
			switch {
			case src.template != "":
				r.warn(fmt.Sprintf("dispatch file %s is missing; regenerating seq %d from the template %s", a.File, a.Seq, src.template))
			case r.AllowUnfaithful:
				r.warn(fmt.Sprintf("dispatch file %s and its template %s.md are missing: seq %d is re-dispatched from its manifest metadata only (--allow-unfaithful)", a.File, name, a.Seq))
			default:
				missing = append(missing, fmt.Sprintf("seq %d (%s: no %s, no template %s.md or %s-prompt.md)", a.Seq, orDash(a.Role), a.File, name, name))
			}
		}
		sources = append(sources, src)
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrUnfaithful, strings.Join(missing, "; "))
	}
	return sources, nil
}

func (r Redispatcher) warn(s string) {
	if r.Warn != nil {
		r.Warn(s)
	}
}

// Write gives each dispatch to re-execute a new seq (continuing from the
// highest), writes its dispatch file <seq>-<template>.md (the original's content
// under a fresh audit header, or regenerated from the template) and appends its
// dispatched entry with replay_of and replay_session. Original entries are
// never touched. Seqs are taken from the manifest one at a time: nothing else
// may write to the pipeline's manifest while it is replayed.
func (r Redispatcher) Write(redo []Dispatch) ([]Job, error) {
	sources, err := r.check(redo)
	if err != nil {
		return nil, err
	}
	var jobs []Job
	for i, d := range redo {
		a := d.Latest()
		seq, err := manifest.NextSeq(r.DispatchDir)
		if err != nil {
			return jobs, err
		}
		name := fmt.Sprintf("%d-%s.md", seq, Template(a))
		path := filepath.Join(r.DispatchDir, name)
		content, err := r.content(a, sources[i])
		if err != nil {
			return jobs, err
		}
		if err := manifest.WriteFileAtomic(path, []byte(content), 0o644); err != nil {
			return jobs, err
		}
		chars, err := manifest.CountChars(path)
		var inputChars *int64
		if err == nil {
			inputChars = &chars
		}
		entry := replayEntry(d, a, seq, name, r.Session, inputChars)
		if _, err := manifest.Before(r.DispatchDir, entry, false, r.ManifestWarn); err != nil {
			return jobs, err
		}
		// From keeps the original attempt's time: Waves splits the jobs at the
		// boundary checkpoints taken between the original dispatches.
		jobs = append(jobs, Job{Seq: int(seq), ReplayOf: d.Seq(), From: a, DispatchFile: path, Original: d.Attempts[0].Time})
	}
	return jobs, nil
}

// content is a re-dispatch's dispatch file: the source's body under a fresh
// audit header.
func (r Redispatcher) content(a Attempt, src source) (string, error) {
	// Crucible writes the directory with its trailing slash, as pipeline start prints it.
	dir := strings.TrimSuffix(r.DispatchDir, "/") + "/"
	h := Header{Template: Template(a), Pipeline: r.Skill, Phase: a.Phase, Task: TaskString(a.Task), DispatchDir: dir}
	var body string
	switch {
	case src.original != "":
		data, err := os.ReadFile(src.original)
		if err != nil {
			return "", err
		}
		old, rest, ok := ParseDispatchFile(string(data))
		if ok {
			// Keep the original header's fields; only the time is new.
			h = old
		}
		body = rest
	case src.template != "":
		data, err := os.ReadFile(src.template)
		if err != nil {
			return "", err
		}
		body = "\n" + string(data)
	default:
		body = fmt.Sprintf("\nThe instructions of seq %d (%s, phase %s, task %s) were lost with their template; this re-dispatch carries only the manifest's record of it.\n",
			a.Seq, orDash(a.Role), orDash(a.Phase), TaskString(a.Task))
	}
	h.Timestamp = r.Now.UTC().Format(time.RFC3339)
	return h.Render() + body, nil
}

// FindTemplate finds the template a lost dispatch file is regenerated from, as
// crucible names and lays out its templates: <name>.md or <name>-prompt.md
// (skills/build/build-implementer-prompt.md), in dir itself, then in
// dir/skills/<skill>/ (the pipeline's own skill first: build and debugging both
// have a test-gap-writer-prompt.md), then in any other dir/skills/*/ in name
// order. It returns "" when dir is empty or holds no such file.
func FindTemplate(dir, skill, name string) string {
	if dir == "" || name == "" || name != filepath.Base(name) {
		return ""
	}
	dirs := []string{dir}
	if skill != "" && skill == filepath.Base(skill) {
		dirs = append(dirs, filepath.Join(dir, "skills", skill))
	}
	if others, err := filepath.Glob(filepath.Join(dir, "skills", "*")); err == nil {
		sort.Strings(others)
		dirs = append(dirs, others...)
	}
	for _, d := range dirs {
		for _, file := range []string{name + ".md", name + "-prompt.md"} {
			if p := filepath.Join(d, file); isRegular(p) {
				return p
			}
		}
	}
	return ""
}

func isRegular(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// replayEntry is the manifest record of the re-dispatch seq (dispatch file
// name) of d's attempt a in session: its role, phase, task and model tier are
// the attempt's. Callers add what only they know (arm, repeat, mutation).
func replayEntry(d Dispatch, a Attempt, seq int64, name, session string, inputChars *int64) manifest.Dispatched {
	phase := a.Phase
	orig := int64(d.Seq())
	entry := manifest.Dispatched{Seq: seq, File: name, Role: a.Role, Phase: &phase, InputChars: inputChars,
		ReplayOf: &orig, ReplaySession: &session}
	if a.Task != nil {
		t := int64(*a.Task)
		entry.Task = &t
	}
	if a.ModelTier != "" {
		tier := a.ModelTier
		entry.ModelTier = &tier
	}
	return entry
}
