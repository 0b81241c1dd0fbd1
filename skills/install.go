package skills

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// State is how an installed skill file compares with this rewind's.
type State string

const (
	Missing  State = "missing"  // not there: an install writes it
	Current  State = "current"  // this rewind's version: nothing to do
	Outdated State = "outdated" // a version an older rewind shipped: an install replaces it
	Changed  State = "changed"  // no version rewind shipped (the user's edit): kept unless forced
)

// Entry is one skill and its installed copy in a skills directory.
type Entry struct {
	Skill     Skill
	Path      string // the installed file: <dir>/<name>/SKILL.md
	State     State
	Installed []byte // the installed file's content; nil when Missing
}

// Inspect compares every skill with its copy in dir, writing nothing. A
// missing dir is no error: every skill is Missing.
func Inspect(dir string) ([]Entry, error) {
	var out []Entry
	for _, s := range All() {
		e := Entry{Skill: s, Path: filepath.Join(dir, s.Name, FileName)}
		data, err := os.ReadFile(e.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			e.State = Missing
		case err != nil:
			if b := blocked(dir, s.Name); b != nil {
				return nil, b
			}
			return nil, fmt.Errorf("skill %s: %w", s.Name, err)
		case string(data) == string(s.Content):
			e.State, e.Installed = Current, data
		case WasShipped(s.Path(), data):
			e.State, e.Installed = Outdated, data
		default:
			e.State, e.Installed = Changed, data
		}
		out = append(out, e)
	}
	return out, nil
}

// BlockedError says that a path where a skill goes is of the wrong kind: the
// skills directory or a skill's directory is a file, or SKILL.md a directory.
type BlockedError struct {
	Skill string
	Path  string
	Want  string // "directory" or "file"
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("skill %s: %s is in the way: it should be a %s (skills go in DIR/<name>/%s)", e.Skill, e.Path, e.Want, FileName)
}

// blocked finds the path of the wrong kind on the way to name's SKILL.md in
// dir, when there is one; nil when none is (the read failed for another
// reason, such as a permission).
func blocked(dir, name string) *BlockedError {
	for _, p := range []string{dir, filepath.Join(dir, name)} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return &BlockedError{Skill: name, Path: p, Want: "directory"}
		}
	}
	p := filepath.Join(dir, name, FileName)
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return &BlockedError{Skill: name, Path: p, Want: "file"}
	}
	return nil
}

// ChangedError refuses an install that would overwrite skill files the user
// changed.
type ChangedError struct {
	Paths []string
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("not overwriting %s: no version rewind shipped (changed since it was installed, or another skill of that name)", strings.Join(e.Paths, ", "))
}

// Installed says what Install did to one skill.
type Installed struct {
	Entry
	Written bool   // the file was (re)written
	Backup  string // with force, where the user's changed file was kept
}

// Install writes every skill that is Missing or Outdated in dir. A Changed
// file stops the install before anything is written (a *ChangedError), unless
// force, which first keeps the user's file beside it as SKILL.md.<hash8>.bak.
// Each file is written whole (temporary file, fsync, rename).
func Install(dir string, force bool) ([]Installed, error) {
	entries, err := Inspect(dir)
	if err != nil {
		return nil, err
	}
	var changed []string
	for _, e := range entries {
		if e.State == Changed {
			changed = append(changed, e.Path)
		}
	}
	if len(changed) > 0 && !force {
		return nil, &ChangedError{Paths: changed}
	}
	var out []Installed
	for _, e := range entries {
		r := Installed{Entry: e}
		if e.State == Current {
			out = append(out, r)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(e.Path), 0o755); err != nil {
			return out, fmt.Errorf("skill %s: %w", e.Skill.Name, err)
		}
		if e.State == Changed {
			r.Backup = e.Path + "." + Hash(e.Installed)[:8] + ".bak"
			if err := WriteFileAtomic(r.Backup, e.Installed, 0o644); err != nil {
				return out, fmt.Errorf("skill %s: keeping the changed file: %w", e.Skill.Name, err)
			}
		}
		if err := WriteFileAtomic(e.Path, e.Skill.Content, 0o644); err != nil {
			return out, fmt.Errorf("skill %s: %w", e.Skill.Name, err)
		}
		r.Written = true
		out = append(out, r)
	}
	return out, nil
}
