// Package portable moves a pipeline run between machines: it collects the
// files of a run (its dispatch directory, the markers, handoff and status
// files of its scratch directory, its debug handoffs and build mode file) as
// files a checkpoint store keeps under refs/rewind/runs/<session>, and writes
// them back on another machine with the paths they record rebased.
//
// Where a run records an absolute path, and what import does with it:
//
//   - .pipeline-active's scratch_dir and dispatch_dir, and the dispatch-dir
//     line of .dispatch-active-<session>: rebased (rewind and crucible's
//     recovery follow them to the manifest); the marker's pid and host, the
//     original machine's process, are dropped (no process runs the copy);
//   - manifest.jsonl: written back byte for byte (crucible records a dispatch
//     file by its basename, so nothing in it needs rebasing, and its lines
//     stay exactly what dispatch.py wrote);
//   - the dispatch files' **Dispatch-Dir:** header, handoff and status files:
//     left as written (they are what the agents were given and wrote;
//     input_chars counted them; replay finds nothing through them);
//   - checkpoints: their commits record no absolute path at all (paths
//     relative to the work tree, the project's branch and HEAD), and the
//     store's record of its work tree is the importing store's own.
//
// Modification times are kept (rewind-run.json records them), because
// replay reads a dispatch's time from its file's when a header gives none,
// and takes the newest handoff by it.
package portable

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/manifest"
)

// MetaFile is the run's own record in its tree.
const MetaFile = "rewind-run.json"

// The run's tree keeps each place a run's files come from under a root of its
// own.
const (
	rootDispatch = "dispatch" // the dispatch directory replay reads
	rootScratch  = "scratch"  // the scratch directory's files of this run
	rootTmp      = "tmp"      // the run's files in /tmp (REWIND_TMPDIR) besides its dispatch directory
)

// Meta is rewind-run.json: where the run's files were, and what git does not
// keep of them.
type Meta struct {
	Format      int        `json:"format"`
	Session     string     `json:"session"`
	Skill       string     `json:"skill"`
	Project     string     `json:"project"` // the project's id (checkpoint.ProjectID), "" when it has none
	WorkTree    string     `json:"work_tree"`
	ScratchDir  string     `json:"scratch_dir"` // "" when the run has none
	DispatchDir string     `json:"dispatch_dir"`
	TmpDir      string     `json:"tmp_dir"`
	Files       []FileMeta `json:"files"`
}

// FileMeta is one file's permission bits and modification time.
type FileMeta struct {
	Path  string    `json:"path"`
	Mode  string    `json:"mode"` // octal, e.g. "0644"
	MTime time.Time `json:"mtime"`
}

// ErrBadMeta means a run's rewind-run.json cannot be used.
var ErrBadMeta = errors.New("invalid run record")

// ParseMeta reads rewind-run.json, checking what import relies on: a format
// it knows, a session that can name a ref, absolute original paths, and file
// entries that stay inside the run's roots.
func ParseMeta(data []byte) (*Meta, error) {
	var m Meta
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMeta, err)
	}
	if m.Format != 1 {
		return nil, fmt.Errorf("%w: format %d (this rewind reads format 1)", ErrBadMeta, m.Format)
	}
	if err := checkpoint.CheckSession(m.Session); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadMeta, err)
	}
	for _, p := range []struct{ name, v string }{{"work_tree", m.WorkTree}, {"dispatch_dir", m.DispatchDir}, {"tmp_dir", m.TmpDir}} {
		if !filepath.IsAbs(p.v) {
			return nil, fmt.Errorf("%w: %s %q is not an absolute path", ErrBadMeta, p.name, p.v)
		}
	}
	// The dispatch directory goes to <tmp>/<its name> on import: a name
	// that is no directory's would put the run's files elsewhere.
	if base := filepath.Base(filepath.Clean(m.DispatchDir)); base == "/" || base == "." || base == ".." {
		return nil, fmt.Errorf("%w: dispatch_dir %q names no directory of its own", ErrBadMeta, m.DispatchDir)
	}
	if m.ScratchDir != "" && !filepath.IsAbs(m.ScratchDir) {
		return nil, fmt.Errorf("%w: scratch_dir %q is not an absolute path", ErrBadMeta, m.ScratchDir)
	}
	for _, f := range m.Files {
		if err := checkRunPath(f.Path); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadMeta, err)
		}
		if _, err := parseMode(f.Mode); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrBadMeta, f.Path, err)
		}
	}
	return &m, nil
}

func parseMode(s string) (os.FileMode, error) {
	v, err := strconv.ParseUint(s, 8, 32)
	if err != nil || v > 0o777 {
		return 0, fmt.Errorf("mode %q is not octal permission bits", s)
	}
	return os.FileMode(v), nil
}

// checkRunPath refuses a path of a run's tree that would leave its root.
func checkRunPath(p string) error {
	root, rest, _ := strings.Cut(p, "/")
	if rest == "" || (root != rootDispatch && root != rootScratch && root != rootTmp) ||
		path.Clean(p) != p || strings.HasPrefix(p, "/") || strings.Contains("/"+p+"/", "/../") || strings.ContainsRune(p, 0) {
		return fmt.Errorf("run file %q is not a path under dispatch/, scratch/ or tmp/", p)
	}
	return nil
}

// Source is where a run's files are on this machine.
type Source struct {
	Session     string
	Skill       string
	Project     string
	WorkTree    string
	ScratchDir  string // "" when unknown
	DispatchDir string // the dispatch directory replay reads (live, or a durable copy)
	LiveDir     string // the dispatch directory .pipeline-active names ("" when none)
	TmpDir      string // where dispatch directories go (/tmp, or REWIND_TMPDIR)
	// Marker says the scratch directory's .pipeline-active is this run's
	// (it is left out when it names another pipeline).
	Marker bool
}

// Collect reads a run's files: every regular file of its dispatch
// directory; from its scratch directory, the pipeline markers of this
// session, pipeline-status.md, the handoff manifests, replay's CSB files and
// the durable copy of the dispatch directory (when it is not the dispatch
// directory itself); from the tmp directory, the debugging skill's handoff
// directory of this session and the build mode file. What is not a regular
// file (a symlink, a fifo) is left out, with a warning. rewind-run.json comes
// first in the result.
func Collect(src Source, warn func(string)) ([]checkpoint.RunFile, *Meta, error) {
	meta := &Meta{Format: 1, Session: src.Session, Skill: src.Skill, Project: src.Project, WorkTree: src.WorkTree,
		ScratchDir: src.ScratchDir, DispatchDir: filepath.Clean(src.DispatchDir), TmpDir: filepath.Clean(src.TmpDir)}
	var files []checkpoint.RunFile
	add := func(runPath, disk string, fi fs.FileInfo) error {
		data, err := os.ReadFile(disk)
		if err != nil {
			return err
		}
		files = append(files, checkpoint.RunFile{Path: runPath, Exec: fi.Mode().Perm()&0o100 != 0, Data: data})
		meta.Files = append(meta.Files, FileMeta{Path: runPath, Mode: fmt.Sprintf("%04o", fi.Mode().Perm()), MTime: fi.ModTime().UTC()})
		return nil
	}
	// walk adds every regular file under dir as root/<relative path>.
	walk := func(root, dir string) error {
		return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			if d.IsDir() {
				return nil
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if !fi.Mode().IsRegular() {
				warn(fmt.Sprintf("left %s out of the run: not a regular file", p))
				return nil
			}
			return add(root+"/"+filepath.ToSlash(rel), p, fi)
		})
	}
	one := func(root, dir, name string) error {
		p := filepath.Join(dir, name)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.IsDir() {
			return walk(root+"/"+name, p)
		}
		if !fi.Mode().IsRegular() {
			warn(fmt.Sprintf("left %s out of the run: not a regular file", p))
			return nil
		}
		return add(root+"/"+name, p, fi)
	}
	if err := walk(rootDispatch, src.DispatchDir); err != nil {
		return nil, nil, fmt.Errorf("reading the dispatch directory: %w", err)
	}
	if src.ScratchDir != "" {
		names := []string{manifest.DispatchActivePrefix + src.Session, "pipeline-status.md"}
		if src.Marker {
			names = append([]string{manifest.ActiveMarker}, names...)
		}
		entries, err := os.ReadDir(src.ScratchDir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
		for _, e := range entries {
			n := e.Name()
			if (strings.HasPrefix(n, "handoff-") || strings.HasPrefix(n, "replay-") && strings.HasSuffix(n, "-csb.md")) && strings.HasSuffix(n, ".md") {
				names = append(names, n)
			}
		}
		// The durable copy <scratch>/<the dispatch directory's name>/, unless
		// it is the dispatch directory being exported.
		live := src.LiveDir
		if live == "" {
			live = src.DispatchDir
		}
		durable := filepath.Join(src.ScratchDir, filepath.Base(filepath.Clean(live)))
		if durable != filepath.Clean(src.DispatchDir) {
			names = append(names, filepath.Base(durable))
		}
		for _, n := range names {
			if err := one(rootScratch, src.ScratchDir, n); err != nil {
				return nil, nil, fmt.Errorf("reading the scratch directory: %w", err)
			}
		}
	}
	for _, n := range []string{"crucible-debug-" + src.Session, "crucible-build-mode.md"} {
		if err := one(rootTmp, src.TmpDir, n); err != nil {
			return nil, nil, err
		}
	}
	data, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	files = append([]checkpoint.RunFile{{Path: MetaFile, Data: append(data, '\n')}}, files...)
	return files, meta, nil
}

// Target is where a run goes on this machine.
type Target struct {
	WorkTree   string
	ScratchDir string
	TmpDir     string
}

// Placement says where each of a run's roots goes.
type Placement struct {
	Meta        *Meta
	DispatchDir string // the dispatch directory replay reads
	ScratchDir  string
	TmpDir      string
	WorkTree    string
}

// Place decides where a run's files go: its scratch files in the target's
// scratch directory; its dispatch directory there too when it was the
// durable copy in the scratch directory, else in the target's tmp directory
// under its own name (where `pipeline start` would have made it).
func Place(meta *Meta, t Target) *Placement {
	p := &Placement{Meta: meta, ScratchDir: t.ScratchDir, TmpDir: t.TmpDir, WorkTree: t.WorkTree}
	if rel, ok := under(meta.ScratchDir, meta.DispatchDir); ok && meta.ScratchDir != "" {
		p.DispatchDir = filepath.Join(t.ScratchDir, rel)
	} else {
		p.DispatchDir = filepath.Join(t.TmpDir, filepath.Base(meta.DispatchDir))
	}
	return p
}

// under reports whether p lies in dir (or is dir), and its relative path.
func under(dir, p string) (string, bool) {
	if dir == "" {
		return "", false
	}
	rel, err := filepath.Rel(filepath.Clean(dir), filepath.Clean(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return rel, true
}

// Rebase maps a path the run recorded on its machine to this one: under its
// dispatch directory, scratch directory, work tree or tmp directory (the
// deepest that holds it), it moves with it; any other path stays. A trailing
// slash (crucible writes dispatch_dir with one) is kept.
func (p *Placement) Rebase(old string) string {
	if !filepath.IsAbs(old) {
		return old
	}
	pairs := [][2]string{{p.Meta.DispatchDir, p.DispatchDir}, {p.Meta.ScratchDir, p.ScratchDir}, {p.Meta.WorkTree, p.WorkTree}, {p.Meta.TmpDir, p.TmpDir}}
	best, bestLen := old, -1
	for _, pr := range pairs {
		rel, ok := under(pr[0], old)
		if !ok || pr[1] == "" || len(filepath.Clean(pr[0])) <= bestLen {
			continue
		}
		best, bestLen = filepath.Join(pr[1], rel), len(filepath.Clean(pr[0]))
	}
	if strings.HasSuffix(old, "/") && !strings.HasSuffix(best, "/") {
		best += "/"
	}
	return best
}

// Disk is the path on this machine of one of the run's files.
func (p *Placement) Disk(runPath string) string {
	root, rest, _ := strings.Cut(runPath, "/")
	switch root {
	case rootDispatch:
		return filepath.Join(p.DispatchDir, filepath.FromSlash(rest))
	case rootScratch:
		return filepath.Join(p.ScratchDir, filepath.FromSlash(rest))
	}
	return filepath.Join(p.TmpDir, filepath.FromSlash(rest))
}

// Write is one file an import writes.
type Write struct {
	Path  string // on disk
	Data  []byte
	Mode  os.FileMode
	MTime time.Time
	// Same: the file is there already with this content (it is left alone).
	Same bool
}

// Conflict is a file that exists with other content than the run's.
type Conflict struct {
	Path string
}

// ImportPlan is what importing a run would write.
type ImportPlan struct {
	*Placement
	Writes     []Write
	Conflicts  []Conflict
	Rebased    []string // the files it writes with the paths they record rebased
	Superseded []string // files an earlier version of the run wrote, replaced (see Supersede)
}

// Supersede takes back the conflicts whose file holds exactly what an
// earlier version of the same run (earlier, as the store keeps it) would have
// written there: an earlier import, untouched since, which this version
// replaces, as a fast-forward does. It returns how many conflicts are left.
func (p *ImportPlan) Supersede(earlier []checkpoint.RunFile) int {
	old, err := PlanImport(earlier, Target{WorkTree: p.WorkTree, ScratchDir: p.ScratchDir, TmpDir: p.TmpDir})
	if err != nil || old.DispatchDir != p.DispatchDir {
		return len(p.Conflicts) // a version this rewind cannot read, or placed elsewhere, supersedes nothing
	}
	was := map[string][]byte{}
	for _, w := range old.Writes {
		was[w.Path] = w.Data
	}
	var left []Conflict
	for _, c := range p.Conflicts {
		disk, err := os.ReadFile(c.Path)
		if data, ok := was[c.Path]; ok && err == nil && bytes.Equal(disk, data) {
			p.Superseded = append(p.Superseded, c.Path)
			continue
		}
		left = append(left, c)
	}
	p.Conflicts = left
	return len(left)
}

// PlanImport decides what importing the run's files (as the store keeps
// them, rewind-run.json among them) writes under t, rebasing the paths the
// markers record, and which files are in the way: a file that exists with
// other content is a conflict (an import never overwrites one), the same
// content is left alone, so importing twice writes nothing the second time.
func PlanImport(files []checkpoint.RunFile, t Target) (*ImportPlan, error) {
	var meta *Meta
	for _, f := range files {
		if f.Path == MetaFile {
			m, err := ParseMeta(f.Data)
			if err != nil {
				return nil, err
			}
			meta = m
		}
	}
	if meta == nil {
		return nil, fmt.Errorf("%w: the run has no %s", ErrBadMeta, MetaFile)
	}
	fileMeta := map[string]FileMeta{}
	for _, fm := range meta.Files {
		fileMeta[fm.Path] = fm
	}
	plan := &ImportPlan{Placement: Place(meta, t)}
	for _, f := range files {
		if f.Path == MetaFile {
			continue
		}
		if err := checkRunPath(f.Path); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadMeta, err)
		}
		fm, ok := fileMeta[f.Path]
		mode := os.FileMode(0o644)
		if f.Exec {
			mode = 0o755
		}
		if ok {
			mode, _ = parseMode(fm.Mode)
		}
		data, rebased, err := plan.rebaseFile(f.Path, f.Data)
		if err != nil {
			return nil, err
		}
		disk := plan.Disk(f.Path)
		w := Write{Path: disk, Data: data, Mode: mode, MTime: fm.MTime}
		old, err := os.ReadFile(disk)
		switch {
		case err == nil && bytes.Equal(old, data):
			w.Same = true
		case err == nil:
			plan.Conflicts = append(plan.Conflicts, Conflict{Path: disk})
		case !errors.Is(err, fs.ErrNotExist):
			if fi, serr := os.Lstat(disk); serr == nil && !fi.Mode().IsRegular() {
				plan.Conflicts = append(plan.Conflicts, Conflict{Path: disk})
				break
			}
			return nil, err
		}
		if rebased && !w.Same {
			plan.Rebased = append(plan.Rebased, disk)
		}
		plan.Writes = append(plan.Writes, w)
	}
	return plan, nil
}

// rebaseFile rewrites the paths the pipeline markers record.
func (p *ImportPlan) rebaseFile(runPath string, data []byte) ([]byte, bool, error) {
	switch runPath {
	case rootScratch + "/" + manifest.ActiveMarker:
		m, err := manifest.ParseMarker(runPath, data)
		if err != nil {
			return nil, false, err
		}
		m.ScratchDir = p.ScratchDir
		m.DispatchDir = p.Rebase(m.DispatchDir)
		// The process the marker names runs (or ran) the original, never
		// this copy: without it the copy reads as unfinished, not running.
		m.PID, m.Host = 0, ""
		out := m.Encode()
		return out, !bytes.Equal(out, data), nil
	case rootScratch + "/" + manifest.DispatchActivePrefix + p.Meta.Session:
		lines := strings.SplitAfter(string(data), "\n")
		for i, l := range lines {
			if v, ok := strings.CutPrefix(l, "dispatch-dir: "); ok {
				nl := ""
				if strings.HasSuffix(v, "\n") {
					v, nl = strings.TrimSuffix(v, "\n"), "\n"
				}
				lines[i] = "dispatch-dir: " + p.Rebase(v) + nl
			}
		}
		out := []byte(strings.Join(lines, ""))
		return out, !bytes.Equal(out, data), nil
	}
	return data, false, nil
}

// Apply writes the plan's files: each whole (temporary file, fsync, rename),
// with its permission bits and modification time; directories it makes are
// private (0700). It refuses a plan with conflicts, writing nothing.
func (p *ImportPlan) Apply() (written int, err error) {
	if len(p.Conflicts) > 0 {
		return 0, fmt.Errorf("%d files are in the way", len(p.Conflicts))
	}
	for _, w := range p.Writes {
		if w.Same {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(w.Path), 0o700); err != nil {
			return written, err
		}
		if err := manifest.WriteFileAtomic(w.Path, w.Data, w.Mode); err != nil {
			return written, err
		}
		if !w.MTime.IsZero() {
			if err := os.Chtimes(w.Path, w.MTime, w.MTime); err != nil {
				return written, err
			}
		}
		written++
	}
	return written, nil
}
