package state

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// The styles.
const (
	StylePlaybook = "playbook" // .pipeline-state.md
	StylePhase    = "phase"    // memory/state/phase.json and execution.json
)

// Target is what a DIR argument names.
type Target struct {
	Style string // StylePlaybook, StylePhase, or "" when DIR holds no state
	Dir   string // the feature folder (playbook) or the project root (phase)
	// Candidates are the unfinished playbook runs of a project root when there
	// is more than one: the caller asks which.
	Candidates []Candidate
	// Finished are the playbook state files of a project root none of which is
	// unfinished.
	Finished []string
	Notes    []string // worth a warning
}

// Candidate is one feature folder with a playbook state file.
type Candidate struct {
	Dir    string
	Status string // "" when the file does not parse
	Stage  string
	Err    error
}

// Locate finds the state DIR names: a feature folder holding
// .pipeline-state.md; a memory/state directory or a project root holding one
// (style 2); or a project root whose specs/*/.pipeline-state.md are searched
// for the unfinished run (one that does not parse counts as unfinished: it may
// be the run to repair). Paths keep the form DIR was given in. With only
// set to StylePlaybook, memory/state is not looked for.
func Locate(dir, only string) (*Target, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, unwrapPath(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", dir)
	}
	if exists(filepath.Join(dir, PlaybookFile)) {
		return &Target{Style: StylePlaybook, Dir: dir}, nil
	}
	abs, _ := filepath.Abs(dir)
	if only != StylePlaybook && filepath.Base(abs) == "state" && filepath.Base(filepath.Dir(abs)) == "memory" {
		return &Target{Style: StylePhase, Dir: filepath.Join(dir, "..", "..")}, nil
	}
	t := &Target{}
	features, _ := filepath.Glob(filepath.Join(dir, "specs", "*", PlaybookFile))
	sort.Strings(features)
	sd := StateDirOf(dir)
	if only != StylePlaybook && (exists(filepath.Join(sd, PhaseFile)) || exists(filepath.Join(sd, ExecutionFile))) {
		t.Style, t.Dir = StylePhase, dir
		if len(features) > 0 {
			t.Notes = append(t.Notes, fmt.Sprintf("%s also holds %d %s files under specs/: pass a feature folder to check one", dir, len(features), PlaybookFile))
		}
		return t, nil
	}
	for _, f := range features {
		fdir := filepath.Dir(f)
		c := Candidate{Dir: fdir}
		p, _, err := LoadPlaybook(fdir)
		if err != nil {
			c.Err = err
		} else {
			c.Status, c.Stage = p.Status(), p.CurrentStage()
			if !Unfinished(c.Status) {
				t.Finished = append(t.Finished, f)
				continue
			}
		}
		t.Candidates = append(t.Candidates, c)
	}
	switch {
	case len(t.Candidates) == 1:
		t.Style, t.Dir, t.Candidates = StylePlaybook, t.Candidates[0].Dir, nil
	case len(t.Candidates) > 1:
		t.Style = StylePlaybook
	case len(features) > 0:
		t.Style = StylePlaybook
	}
	return t, nil
}
