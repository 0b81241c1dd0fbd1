package manifest

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"unicode/utf8"
)

// MaxLine is the largest manifest line in bytes, its newline included: POSIX
// PIPE_BUF, below which an O_APPEND write is atomic.
const MaxLine = 4096

// Keys are the keys of a manifest entry in the order they are written: the 12
// of dispatch.py, then model_profile (before and after), actual_model (after),
// and the replay provenance fields, written only when set.
var Keys = []string{
	"seq", "file", "role", "phase", "task", "status", "duration_s", "summary",
	"input_chars", "output_chars", "model_tier", "tool_calls",
	"model_profile", "actual_model", "replay_of", "replay_session", "mutation",
	"arm", "repeat",
}

// labelKeys are the free-form label fields that are set to null, before the
// summary is cut, when they would keep the line over MaxLine.
var labelKeys = []string{"model_tier", "actual_model"}

// Statuses are the statuses a manifest entry may carry.
var Statuses = []string{"dispatched", "completed", "failed", "skipped", "error"}

// AfterStatuses are the statuses `after` accepts, sorted as dispatch.py lists
// them in its message.
var AfterStatuses = []string{"completed", "error", "failed", "skipped"}

// ModelProfile maps a model tier label to its profile: "high" for opus, the
// label itself for the neutral names high, standard and low, otherwise none.
func ModelProfile(tier *string) *string {
	if tier == nil {
		return nil
	}
	var p string
	switch *tier {
	case "opus":
		p = "high"
	case "high", "standard", "low":
		p = *tier
	default:
		return nil
	}
	return &p
}

// Dispatched is what `before` records.
type Dispatched struct {
	Seq        int64
	File       string // the dispatch file basename
	Role       string
	Phase      *string
	Task       *int64
	InputChars *int64
	ModelTier  *string
	// Replay provenance, written only when set.
	ReplayOf      *int64
	ReplaySession *string
	Mutation      *string
	// A/B replay provenance: the arm ("control" or "mutated") and the repeat
	// number of the run. An entry of an arm always carries mutation (null when
	// the dispatch is not mutated), arm and repeat.
	Arm    *string
	Repeat *int64
}

// Record builds the dispatched entry in dispatch.py's key order.
func (d Dispatched) Record() *Record {
	r := &Record{}
	r.Set("seq", Int(d.Seq))
	r.Set("file", Str(d.File))
	r.Set("role", Str(d.Role))
	r.Set("phase", StrPtr(d.Phase))
	r.Set("task", IntPtr(d.Task))
	r.Set("status", Str("dispatched"))
	r.Set("duration_s", Null())
	r.Set("summary", Null())
	r.Set("input_chars", IntPtr(d.InputChars))
	r.Set("output_chars", Null())
	r.Set("model_tier", StrPtr(d.ModelTier))
	r.Set("tool_calls", Null())
	r.Set("model_profile", StrPtr(ModelProfile(d.ModelTier)))
	if d.ReplayOf != nil {
		r.Set("replay_of", Int(*d.ReplayOf))
	}
	if d.ReplaySession != nil {
		r.Set("replay_session", Str(*d.ReplaySession))
	}
	if d.Mutation != nil || d.Arm != nil {
		r.Set("mutation", StrPtr(d.Mutation))
	}
	if d.Arm != nil {
		r.Set("arm", Str(*d.Arm))
		r.Set("repeat", IntPtr(d.Repeat))
	}
	return r
}

// Completion is what `after` records.
type Completion struct {
	Seq         int64
	Status      string
	Summary     *string
	OutputChars *int64
	ToolCalls   *int64
	Duration    *int64
	ActualModel *string
}

// Record builds the completion entry: file, role, phase, task, input_chars,
// model_tier and model_profile copied from prev (the dispatched entry, as
// parsePy read it), the rest from c, and replay_of, replay_session and
// mutation copied when prev has them. Copied values are re-encoded as Python
// writes what json.loads read.
func (c Completion) Record(prev *pyValue) *Record {
	copied := func(key string) []byte {
		v := prev.get(key)
		if v == nil {
			return Null()
		}
		return appendPy(nil, v)
	}
	r := &Record{}
	r.Set("seq", Int(c.Seq))
	r.Set("file", copied("file"))
	r.Set("role", copied("role"))
	r.Set("phase", copied("phase"))
	r.Set("task", copied("task"))
	r.Set("status", Str(c.Status))
	r.Set("duration_s", IntPtr(c.Duration))
	r.Set("summary", StrPtr(c.Summary))
	r.Set("input_chars", copied("input_chars"))
	r.Set("output_chars", IntPtr(c.OutputChars))
	r.Set("model_tier", copied("model_tier"))
	r.Set("tool_calls", IntPtr(c.ToolCalls))
	if v := prev.get("model_profile"); v != nil {
		r.Set("model_profile", appendPy(nil, v))
	} else {
		// A dispatched entry written before model_profile existed: derive it.
		var tier *string
		if t := prev.get("model_tier"); t != nil && t.kind == kindStr {
			tier = &t.s
		}
		r.Set("model_profile", StrPtr(ModelProfile(tier)))
	}
	r.Set("actual_model", StrPtr(c.ActualModel))
	for _, k := range []string{"replay_of", "replay_session", "mutation", "arm", "repeat"} {
		if v := prev.get(k); v != nil {
			r.Set(k, appendPy(nil, v))
		}
	}
	return r
}

// Fit returns the record as one line (without its newline) of at most MaxLine
// bytes including the newline, as dispatch.py makes it: label fields that keep
// the line over the limit are set to null first (the largest first, and only
// when that lets the line fit), then the summary is cut to the longest prefix
// (in characters) that fits with "..." appended, or to "..." alone; an empty
// summary stays empty, as in dispatch.py. model_profile follows model_tier:
// when the tier is nulled, so is the profile, so the two never contradict
// each other. summary is the summary's text (nil when null). When even that
// does not fit, the line is returned over the limit and a warning in
// dispatch.py's words goes to warn.
func Fit(r *Record, summary *string, warn io.Writer) []byte {
	line := r.Bytes()
	if len(line)+1 <= MaxLine {
		return line
	}
	nullLabels(r, summary)
	line = r.Bytes()
	if len(line)+1 > MaxLine && summary != nil && *summary != "" {
		s := *summary
		// Byte offsets of each code point boundary: prefix k is s[:cut[k]].
		cut := make([]int, 0, utf8.RuneCountInString(s)+1)
		for i := range s {
			cut = append(cut, i)
		}
		cut = append(cut, len(s))
		full := len(cut) - 1
		// dispatch.py's summary[:k] + ("..." if k < len(summary) else "").
		cutTo := func(k int) []byte {
			if k == full {
				return Str(s)
			}
			return Str(s[:cut[k]] + "...")
		}
		lo, hi := 0, full // the longest k in [lo, hi] that fits
		best := 0
		for lo <= hi {
			mid := (lo + hi) / 2
			r.Set("summary", cutTo(mid))
			if len(r.Bytes())+1 <= MaxLine {
				best, lo = mid, mid+1
			} else {
				hi = mid - 1
			}
		}
		r.Set("summary", cutTo(best))
		line = r.Bytes()
	}
	if len(line)+1 > MaxLine && warn != nil {
		seq, _ := r.Get("seq")
		fmt.Fprintf(warn, "[dispatch WARN] entry for seq %s still exceeds PIPE_BUF after summary truncation (fixed fields too large); writing anyway\n", seq)
	}
	return line
}

// nullLabels sets label fields to null, the largest first, until the line
// fits once the summary is cut as far as it goes; model_profile goes with
// model_tier. When even nulling every label would not make the line fit, the
// labels are kept: they are not what keeps it over the limit.
func nullLabels(r *Record, summary *string) {
	// The length of the line with the summary cut as far as it goes.
	shortest := func() int {
		if summary == nil || *summary == "" {
			return len(r.Bytes())
		}
		old, _ := r.Get("summary")
		r.Set("summary", Str("..."))
		n := len(r.Bytes())
		r.Set("summary", old)
		return n
	}
	var labels []string
	for _, k := range labelKeys {
		if v, ok := r.Get(k); ok && string(v) != "null" {
			labels = append(labels, k)
		}
	}
	if len(labels) == 0 || shortest()+1 <= MaxLine {
		return
	}
	saved := map[string][]byte{}
	set := func(k string, v []byte) {
		if old, ok := r.Get(k); ok {
			if _, seen := saved[k]; !seen {
				saved[k] = old
			}
			r.Set(k, v)
		}
	}
	sort.SliceStable(labels, func(a, b int) bool {
		va, _ := r.Get(labels[a])
		vb, _ := r.Get(labels[b])
		return len(va) > len(vb)
	})
	for _, k := range labels {
		set(k, Null())
		if k == "model_tier" {
			set("model_profile", Null())
		}
		if shortest()+1 <= MaxLine {
			return
		}
	}
	for k, v := range saved {
		r.Set(k, v)
	}
}

// IntStr renders an optional int as dispatch.py prints it (None when null).
func IntStr(n *int64) string {
	if n == nil {
		return "None"
	}
	return strconv.FormatInt(*n, 10)
}
