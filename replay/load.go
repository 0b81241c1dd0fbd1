package replay

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/rewind-cli/rewind/manifest"
)

// LoadAttempts turns a manifest's authoritative entries (in order of first
// appearance) into attempts, timed from their dispatch files, looked up in dirs
// in order (the dispatch directory, then its scratch copy). Naive timestamps are
// read in loc. A field of an unexpected type (a string task, say) is read as
// missing.
func LoadAttempts(ix *manifest.Index, dirs []string, loc *time.Location) ([]Attempt, error) {
	var out []Attempt
	err := ix.Each(func(seq int64, line []byte) error {
		var e map[string]any
		if err := json.Unmarshal(line, &e); err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
		a := Attempt{
			Seq: int(seq), File: strField(e, "file"), Role: strField(e, "role"), Phase: phaseText(e["phase"]),
			Task: intField(e, "task"), Status: strField(e, "status"), Duration: intField(e, "duration_s"),
			Summary: strField(e, "summary"), ModelTier: strField(e, "model_tier"), ReplayOf: intField(e, "replay_of"),
			ReplaySession: strField(e, "replay_session"), Mutation: strField(e, "mutation"), Arm: strField(e, "arm"),
		}
		if r := intField(e, "repeat"); r != nil {
			a.Repeat = *r
		}
		a.Time, a.TimeFrom = dispatchTime(dirs, a.File, loc)
		out = append(out, a)
		return nil
	})
	return out, err
}

func strField(e map[string]any, key string) string {
	s, _ := e[key].(string)
	return s
}

func intField(e map[string]any, key string) *int {
	f, ok := e[key].(float64)
	if !ok || f != float64(int(f)) {
		return nil
	}
	n := int(f)
	return &n
}

// dispatchTime reads a dispatch's time from its file's audit header, else the
// file's modification time.
func dispatchTime(dirs []string, file string, loc *time.Location) (time.Time, string) {
	if file == "" || file != filepath.Base(file) {
		return time.Time{}, ""
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		path := filepath.Join(dir, file)
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if h, _, ok := ParseDispatchFile(string(data)); ok && h.Timestamp != "" {
			if t, err := ParseTime(h.Timestamp, loc); err == nil {
				return t, "header"
			}
		}
		if fi, err := os.Stat(path); err == nil {
			return fi.ModTime().Truncate(time.Second), "mtime"
		}
	}
	return time.Time{}, ""
}

// FindDispatchFile returns the path of a dispatch file in the first of dirs that
// holds it, or "".
func FindDispatchFile(dirs []string, file string) string {
	if file == "" || file != filepath.Base(file) {
		return ""
	}
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, file)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// phaseText renders a phase as text: crucible writes a string ("2"), but a
// number is taken as written.
func phaseText(v any) string {
	switch p := v.(type) {
	case nil:
		return ""
	case string:
		return p
	case float64:
		return fmt.Sprint(p)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// WorkTreeTimeline drops the attempts of A/B replay arms, and those an
// arm's agent recorded under its run's replay session: they ran in clones of
// the project, so they say nothing of what the project's own work tree holds,
// and a resume must neither take them for redone work nor wait for those
// still in flight.
func WorkTreeTimeline(attempts []Attempt) []Attempt {
	armSessions := map[string]bool{}
	for _, a := range attempts {
		if a.Arm != "" && a.ReplaySession != "" {
			armSessions[a.ReplaySession] = true
		}
	}
	out := attempts[:0:0]
	for _, a := range attempts {
		if a.Arm == "" && !armSessions[a.ReplaySession] {
			out = append(out, a)
		}
	}
	return out
}
