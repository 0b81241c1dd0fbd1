package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// ErrEmpty means a manifest holds no valid dispatch entry. The text is
// crucible's replay message, which skills and users know.
var ErrEmpty = errors.New("Manifest is empty or entirely corrupted. Cannot resume.")

// MaxProblems bounds the problems an Index keeps; the rest are only counted,
// so memory does not grow with the size of a corrupt file.
const MaxProblems = 1000

// Severity of a Problem.
const (
	SevError   = "error"
	SevWarning = "warning"
)

// Problem is something wrong with a manifest: a line that is skipped, or a
// finding of the validation report.
type Problem struct {
	Line     int    // 1-based line number; 0 when it concerns a seq, not a line
	Seq      *int64 // the seq concerned, when known
	Severity string // SevError or SevWarning
	Kind     string // a stable identifier, for example "invalid_json"
	Msg      string
	Skipped  bool // the line is not taken as a dispatch entry
}

// slot is what the index keeps per distinct seq: where its authoritative (last)
// entry lies, and a few facts for the phase map, stats and check.
type slot struct {
	seq     int64
	off     int64 // offset and length of the authoritative line
	n       int32
	line    int32 // line number of the authoritative line
	first   int32 // line number of the first entry
	phase   int32 // index into Index.phases (of the authoritative entry)
	status  int32 // index into Index.statuses (of the authoritative entry)
	entries int32
	rework  int32 // failed/error entries followed by another entry
	flags   uint8
}

const (
	flagDispatched uint8 = 1 << iota // a dispatched entry was seen
	flagFailedLast                   // the last entry so far is failed/error
	flagArm                          // the authoritative entry is an A/B arm's
)

type phaseInfo struct {
	label string // for text output
	json  []byte // the value as JSON, "null" when missing
}

// Index is a manifest read once: the authoritative entry per seq, where it lies
// in the file, the phases in order of first appearance, and the problems met.
// Its memory grows with the number of distinct seqs, not the file size.
type Index struct {
	Source  string // the file read
	Lines   int    // non-blank lines
	Entries int    // dispatch entry lines
	// SkippedLines counts the lines not taken as entries (all of them, also
	// those beyond MaxProblems).
	SkippedLines int
	Problems     []Problem
	// MoreProblems counts the problems beyond MaxProblems that were not kept.
	MoreProblems int

	f        *os.File
	slots    []slot
	bySeq    map[int64]int32
	phases   []phaseInfo
	phaseStr map[string]int32 // string phases
	phaseRaw map[string]int32 // other phase values, by their raw JSON
	statuses []string
	statusIx map[string]int32
	maxSeq   int64
	// replayOf maps a seq to the earlier seq it re-dispatches (its replay_of).
	replayOf map[int64]int64
	// newest maps each seq of a replay group (a dispatch and the replays of
	// it, however chained) to the group's newest seq; built on first use.
	newest map[int64]int64
	win    window
	counts bool // validate the counts of every entry (OpenCheck)
}

// Open reads the manifest at path into an Index. Close it when done: the
// authoritative lines are read back from the file on demand.
func Open(path string) (*Index, error) { return open(path, false) }

// OpenCheck is Open for Check: it also validates the counts of every entry
// (input_chars, output_chars, tool_calls, duration_s), adding an
// invalid_count problem for each that is neither null nor a non-negative
// integer. That reads every key of every line, which show and stats need not.
func OpenCheck(path string) (*Index, error) { return open(path, true) }

func open(path string, counts bool) (*Index, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if fi.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a directory", path)
	}
	ix := newIndex(path)
	ix.counts = counts
	ix.f = f
	ix.win.f = f
	if err := ix.readFile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return ix, nil
}

// Close closes the manifest file.
func (ix *Index) Close() error {
	if ix.f == nil {
		return nil
	}
	return ix.f.Close()
}

func newIndex(source string) *Index {
	return &Index{
		Source:   source,
		bySeq:    map[int64]int32{},
		phaseStr: map[string]int32{},
		phaseRaw: map[string]int32{},
		statusIx: map[string]int32{},
		replayOf: map[int64]int64{},
	}
}

func (ix *Index) problem(p Problem) {
	if len(ix.Problems) >= MaxProblems {
		ix.MoreProblems++
		return
	}
	ix.Problems = append(ix.Problems, p)
}

func seqPtr(n int64) *int64 { return &n }

// lineRec is one non-blank line, classified, with what the index needs of it.
// Raw, status and phase may point into a read buffer: add must not keep them.
type lineRec struct {
	no     int   // line number
	off    int64 // offset of the line
	n      int   // length without the newline
	kind   LineKind
	seq    int64
	seqOK  bool
	why    string
	keys   string // for Other lines: the keys it has
	status val
	phase  val
	bad    []badCount // counts that are not non-negative integers
	// replayOf is the seq this entry re-dispatches (its replay_of), -1 when none.
	replayOf int64
	arm      bool // an A/B replay's arm wrote it
}

// CountKeys are the entry's counts: each is null or a non-negative integer.
var CountKeys = []string{"input_chars", "output_chars", "tool_calls", "duration_s"}

// badCount is a count that is not a non-negative integer; raw may point into a
// read buffer.
type badCount struct {
	key string
	raw string
}

// countValue reads a count: ok with its value for a non-negative integer that
// fits 64 bits; bad for anything else but a missing or null value.
func countValue(r gjson.Result) (n int64, ok, bad bool) {
	if !r.Exists() || r.Type == gjson.Null {
		return 0, false, false
	}
	n, ok = intValue(r)
	if !ok || n < 0 {
		return 0, false, true
	}
	return n, true, false
}

// val is the part of a gjson.Result the index needs, in less memory.
type val struct {
	t      gjson.Type
	exists bool
	str    string // a string's value
	raw    string // another value's JSON
}

func valOf(r gjson.Result) val {
	v := val{t: r.Type, exists: r.Exists()}
	if r.Type == gjson.String {
		v.str = r.Str
	} else {
		v.raw = r.Raw
	}
	return v
}

var replayOfKey = []byte(`"replay_of"`)

// recOf classifies a line and reads what the index needs of it; with counts,
// also the counts that are not non-negative integers.
func recOf(l *Line, counts bool) lineRec {
	r := lineRec{no: l.No, off: l.Off, n: len(l.Raw), kind: l.Kind, seq: l.Seq, seqOK: l.SeqOK, why: l.Why, replayOf: -1}
	// Few lines are replays: a byte search spares the others a second parse.
	if l.Kind == Entry && bytes.Contains(l.Raw, replayOfKey) {
		// An A/B replay's arm ran in a clone of the project: its entries
		// replay nothing of the pipeline's own work tree.
		r.arm = gjson.Get(bstr(l.Raw), "arm").Type == gjson.String
		if n, ok := intValue(gjson.Get(bstr(l.Raw), "replay_of")); ok && n >= 0 && !r.arm {
			r.replayOf = n
		}
	}
	switch {
	case l.Kind == Entry && !counts:
		s := bstr(l.Raw)
		r.status = valOf(gjson.Get(s, "status"))
		r.phase = valOf(gjson.Get(s, "phase"))
	case l.Kind == Entry:
		// One pass over the keys; the first of a repeated key counts, as
		// with gjson.Get.
		var seen uint8
		gjson.Parse(bstr(l.Raw)).ForEach(func(k, v gjson.Result) bool {
			bit := uint8(0)
			switch k.Str {
			case "status":
				bit = 1
			case "phase":
				bit = 2
			case "input_chars":
				bit = 4
			case "output_chars":
				bit = 8
			case "tool_calls":
				bit = 16
			case "duration_s":
				bit = 32
			default:
				return true
			}
			if seen&bit != 0 {
				return true
			}
			seen |= bit
			switch bit {
			case 1:
				r.status = valOf(v)
			case 2:
				r.phase = valOf(v)
			default:
				if _, _, bad := countValue(v); bad {
					r.bad = append(r.bad, badCount{key: k.Str, raw: v.Raw})
				}
			}
			return seen != 63 // stop when all six are read
		})
	case l.Kind == Other:
		r.keys = otherKeys(l.Raw)
	}
	return r
}

// read is the single streaming pass, sequential (see readFile for the
// parallel one).
func (ix *Index) read(r io.Reader) error {
	var m merger
	err := Scan(r, func(l *Line) error {
		rec := recOf(l, ix.counts)
		m.push(ix, &rec)
		return nil
	})
	m.finish(ix)
	return err
}

// merger feeds records to the index in file order, holding a bad line back
// until it is known whether it is the last one (a torn write).
type merger struct {
	held    lineRec
	holding bool
}

func (m *merger) push(ix *Index, r *lineRec) {
	if m.holding {
		m.holding = false
		ix.add(&m.held, false)
	}
	if r.kind == Bad {
		m.held, m.holding = *r, true
		return
	}
	ix.add(r, false)
}

func (m *merger) finish(ix *Index) {
	if m.holding {
		m.holding = false
		ix.add(&m.held, true)
	}
}

// add records one line; last is set for a bad line that is the file's last.
func (ix *Index) add(l *lineRec, last bool) {
	ix.Lines++
	if l.n+1 > MaxLine {
		p := Problem{Line: l.no, Severity: SevError, Kind: "oversize",
			Msg: fmt.Sprintf("line is %d bytes with its newline, over the %d-byte limit", l.n+1, MaxLine)}
		if l.seqOK {
			p.Seq = seqPtr(l.seq)
		}
		ix.problem(p)
	}
	if l.kind != Entry {
		ix.SkippedLines++
	}
	switch l.kind {
	case Bad:
		if last {
			ix.problem(Problem{Line: l.no, Severity: SevWarning, Kind: "torn_last_line", Skipped: true,
				Msg: "torn last line (" + l.why + ")"})
		} else {
			ix.problem(Problem{Line: l.no, Severity: SevError, Kind: kindOf(l.why), Skipped: true, Msg: l.why})
		}
		return
	case Other:
		msg := l.why
		if l.keys != "" && strings.HasSuffix(msg, ")") {
			msg = msg[:len(msg)-1] + l.keys + ")"
		}
		ix.problem(Problem{Line: l.no, Severity: SevWarning, Kind: "not_a_dispatch_entry", Skipped: true, Msg: msg})
		return
	}
	ix.entry(l)
}

func kindOf(why string) string {
	if strings.Contains(why, "UTF-8") {
		return "invalid_utf8"
	}
	return "invalid_json"
}

// otherKeys names the keys of a line of another schema, so the report says what
// it is.
func otherKeys(raw []byte) string {
	v := gjson.ParseBytes(raw)
	if !v.IsObject() {
		return ""
	}
	var keys []string
	more := false
	v.ForEach(func(k, _ gjson.Result) bool {
		if len(keys) == 4 {
			more = true
			return false
		}
		keys = append(keys, k.Str)
		return true
	})
	if len(keys) == 0 {
		return "; an empty object"
	}
	s := "; keys: " + strings.Join(keys, ", ")
	if more {
		s += ", ..."
	}
	return s
}

func (ix *Index) intern(m map[string]int32, key string, add func() int32) int32 {
	if i, ok := m[key]; ok {
		return i
	}
	i := add()
	m[strings.Clone(key)] = i
	return i
}

// phaseOf interns the phase of an entry. A missing phase and null are one
// phase, as Python's e.get("phase") groups them. A phase that is not a string
// is labelled with its JSON and its type ("2 (number)"), so that it reads apart
// from the string phase "2": they are distinct phases.
func (ix *Index) phaseOf(v val) int32 {
	if v.t == gjson.String {
		return ix.intern(ix.phaseStr, v.str, func() int32 {
			ix.phases = append(ix.phases, phaseInfo{label: strings.Clone(v.str), json: AppendString(nil, v.str)})
			return int32(len(ix.phases) - 1)
		})
	}
	key := "null"
	if v.exists && v.t != gjson.Null {
		key = v.raw
	}
	return ix.intern(ix.phaseRaw, key, func() int32 {
		p := phaseInfo{label: "(none)", json: []byte("null")}
		if key != "null" {
			p.json = AppendValue(nil, gjson.Parse(v.raw))
			p.label = string(p.json) + " (" + jsonType(v) + ")"
		}
		ix.phases = append(ix.phases, p)
		return int32(len(ix.phases) - 1)
	})
}

// jsonType names the type of a JSON value that is not a string or null.
func jsonType(v val) string {
	switch v.t {
	case gjson.Number:
		return "number"
	case gjson.True, gjson.False:
		return "boolean"
	}
	if strings.HasPrefix(v.raw, "[") {
		return "array"
	}
	return "object"
}

// badCountWhy says what is wrong with a count that countValue finds bad.
func badCountWhy(raw string) string {
	if r := gjson.Parse(raw); r.Type == gjson.Number && isIntLiteral(r.Raw) && !strings.HasPrefix(r.Raw, "-") {
		return "not a non-negative integer up to 9223372036854775807"
	}
	return "not a non-negative integer"
}

// shortRaw is a JSON value for a message, cut to 40 bytes.
func shortRaw(raw string) string {
	raw = strings.TrimSpace(raw)
	if len(raw) > 40 {
		cut := 37
		for cut > 0 && !utf8.RuneStart(raw[cut]) {
			cut--
		}
		raw = raw[:cut] + "..."
	}
	return raw
}

func (ix *Index) statusOf(v val) int32 {
	key := v.str
	if v.t != gjson.String {
		key = "\x00" + v.raw // not a status at all; kept apart from real ones
	}
	return ix.intern(ix.statusIx, key, func() int32 {
		ix.statuses = append(ix.statuses, strings.Clone(key))
		return int32(len(ix.statuses) - 1)
	})
}

// entry records a dispatch entry line.
func (ix *Index) entry(l *lineRec) {
	ix.Entries++
	st := l.status
	phase := ix.phaseOf(l.phase)
	status := ix.statusOf(st)
	statusText := st.str
	if st.t != gjson.String {
		statusText = ""
		ix.problem(Problem{Line: l.no, Seq: seqPtr(l.seq), Severity: SevError, Kind: "missing_status",
			Msg: fmt.Sprintf("seq %d has no status", l.seq)})
	} else if !contains(Statuses, statusText) {
		ix.problem(Problem{Line: l.no, Seq: seqPtr(l.seq), Severity: SevError, Kind: "unknown_status",
			Msg: fmt.Sprintf("seq %d has an unknown status %s", l.seq, PyRepr(statusText))})
	}
	for _, b := range l.bad {
		ix.problem(Problem{Line: l.no, Seq: seqPtr(l.seq), Severity: SevWarning, Kind: "invalid_count",
			Msg: fmt.Sprintf("seq %d has %s %s: %s", l.seq, b.key, shortRaw(b.raw), badCountWhy(b.raw))})
	}

	i, seen := ix.bySeq[l.seq]
	if !seen {
		if len(ix.slots) > 0 && l.seq < ix.maxSeq {
			ix.problem(Problem{Line: l.no, Seq: seqPtr(l.seq), Severity: SevWarning, Kind: "seq_out_of_order",
				Msg: fmt.Sprintf("seq %d first appears after seq %d", l.seq, ix.maxSeq)})
		}
		if len(ix.slots) == 0 || l.seq > ix.maxSeq {
			ix.maxSeq = l.seq
		}
		i = int32(len(ix.slots))
		ix.slots = append(ix.slots, slot{seq: l.seq, first: int32(l.no)})
		ix.bySeq[l.seq] = i
	}
	sl := &ix.slots[i]
	switch statusText {
	case "dispatched":
		if seen && sl.flags&flagFailedLast == 0 {
			prev := ix.statuses[sl.status]
			if prev == "dispatched" {
				ix.problem(Problem{Line: l.no, Seq: seqPtr(l.seq), Severity: SevWarning, Kind: "seq_dispatched_twice",
					Msg: fmt.Sprintf("seq %d dispatched again before it finished (line %d)", l.seq, sl.line)})
			} else {
				ix.problem(Problem{Line: l.no, Seq: seqPtr(l.seq), Severity: SevWarning, Kind: "seq_reused",
					Msg: fmt.Sprintf("seq %d dispatched again after it was %s (line %d)", l.seq, prev, sl.line)})
			}
		}
		sl.flags |= flagDispatched
	default:
		// An unknown status is reported once, as unknown_status above.
		if sl.flags&flagDispatched == 0 && contains(Statuses, statusText) {
			ix.problem(Problem{Line: l.no, Seq: seqPtr(l.seq), Severity: SevError, Kind: "completion_without_dispatch",
				Msg: fmt.Sprintf("seq %d is %s without a dispatched entry before it", l.seq, statusText)})
		}
	}
	if seen && sl.flags&flagFailedLast != 0 {
		sl.rework++
	}
	if statusText == "failed" || statusText == "error" {
		sl.flags |= flagFailedLast
	} else {
		sl.flags &^= flagFailedLast
	}
	// A replay takes a seq after the one it replays: a replay_of at or above
	// the entry's own seq (a cycle, a typo) replays nothing.
	if l.replayOf >= 0 && l.replayOf < l.seq {
		ix.replayOf[l.seq] = l.replayOf
	}
	if l.arm {
		sl.flags |= flagArm
	} else {
		sl.flags &^= flagArm
	}
	sl.off, sl.n, sl.line = l.off, int32(l.n), int32(l.no)
	sl.phase, sl.status = phase, status
	sl.entries++
}

// Seqs is the number of distinct seqs.
func (ix *Index) Seqs() int { return len(ix.slots) }

// Status returns the authoritative status of seq ("" when it has none).
func (ix *Index) Status(seq int64) (string, bool) {
	i, ok := ix.bySeq[seq]
	if !ok {
		return "", false
	}
	s := ix.statuses[ix.slots[i].status]
	if strings.HasPrefix(s, "\x00") {
		s = ""
	}
	return s, true
}

// Skipped lists the problems that made a line be skipped.
func (ix *Index) Skipped() []Problem {
	var out []Problem
	for _, p := range ix.Problems {
		if p.Skipped {
			out = append(out, p)
		}
	}
	return out
}

// InFlight lists, in seq order, the seqs still waited for: dispatched, with
// no completion recorded and no replay superseding them.
func (ix *Index) InFlight() []int64 {
	var out []int64
	for i := range ix.slots {
		sl := &ix.slots[i]
		if _, superseded := ix.ReplayedBy(sl.seq); !superseded && ix.statuses[sl.status] == "dispatched" {
			out = append(out, sl.seq)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	return out
}

// Phase is a phase of the pipeline and its dispatches: the authoritative entry
// of each seq whose authoritative entry is in this phase, ordered by seq.
type Phase struct {
	Label  string // the phase as text: "(none)" when missing or null, JSON and type when not a string
	JSON   []byte // the phase value as JSON
	Status string // "complete", "incomplete" or "in flight"
	Seqs   []int64
	slots  []int32
}

// Phase statuses.
const (
	PhaseComplete   = "complete"
	PhaseIncomplete = "incomplete"
	PhaseInFlight   = "in flight"
)

// ReplayedBy returns the re-dispatch that supersedes seq: the newest seq of
// its replay group, when that is not seq itself. replay_of names the seq a
// replay re-dispatches (rewind names the original; a chain of replays naming
// each other's seqs is followed too), so a dispatch, its failed replay and the
// replay that finished are one group, counted by the last.
func (ix *Index) ReplayedBy(seq int64) (int64, bool) {
	if ix.newest == nil {
		ix.groupReplays()
	}
	n, ok := ix.newest[seq]
	if !ok || n == seq {
		return 0, false
	}
	return n, true
}

// groupReplays builds ix.newest.
func (ix *Index) groupReplays() {
	root := func(s int64) int64 {
		for {
			r, ok := ix.replayOf[s]
			if !ok {
				return s
			}
			s = r // replay_of < seq: the walk ends
		}
	}
	newest := map[int64]int64{} // by the group's root
	for s := range ix.replayOf {
		if r := root(s); s > newest[r] {
			newest[r] = s
		}
	}
	ix.newest = newest // the roots, which are never replays themselves
	for s := range ix.replayOf {
		ix.newest[s] = newest[root(s)]
	}
}

// Phases groups the authoritative entries by phase, phases in order of first
// appearance in the manifest. A phase is in flight when one of its dispatches
// is, complete when every one completed or was skipped, else incomplete. A
// dispatch that a later one replays (replay_of) counts by its replay's status,
// which is the replay's own entry in the phase: a crash's in-flight dispatch
// that a replay finished leaves its phase complete.
func (ix *Index) Phases() []Phase {
	groups := make([][]int32, len(ix.phases))
	for i := range ix.slots {
		p := ix.slots[i].phase
		groups[p] = append(groups[p], int32(i))
	}
	var out []Phase
	for p, g := range groups {
		if len(g) == 0 {
			continue
		}
		sort.Slice(g, func(a, b int) bool { return ix.slots[g[a]].seq < ix.slots[g[b]].seq })
		ph := Phase{Label: ix.phases[p].label, JSON: ix.phases[p].json, Status: PhaseComplete, slots: g}
		ph.Seqs = make([]int64, len(g))
		for k, i := range g {
			ph.Seqs[k] = ix.slots[i].seq
			if _, superseded := ix.ReplayedBy(ix.slots[i].seq); superseded {
				continue
			}
			if ix.slots[i].flags&flagArm != 0 {
				continue // an A/B arm ran in a clone: it says nothing of the pipeline's state
			}
			switch st := ix.statuses[ix.slots[i].status]; {
			case st == "dispatched":
				ph.Status = PhaseInFlight
			case st != "completed" && st != "skipped" && ph.Status == PhaseComplete:
				ph.Status = PhaseIncomplete
			}
		}
		out = append(out, ph)
	}
	return out
}

// EachEntry calls fn with the authoritative line of each seq of the phase, in
// seq order. The line is valid only during the call.
func (ix *Index) EachEntry(ph Phase, fn func(seq int64, line []byte) error) error {
	for _, i := range ph.slots {
		s := &ix.slots[i]
		b, err := ix.win.get(s.off, int(s.n))
		if err != nil {
			return fmt.Errorf("read %s: %w", ix.Source, err)
		}
		if err := fn(s.seq, b); err != nil {
			return err
		}
	}
	return nil
}

// Each calls fn with the authoritative line of every seq, in the order the
// seqs first appear in the manifest (the order replay plans in). The line is
// valid only during the call.
func (ix *Index) Each(fn func(seq int64, line []byte) error) error {
	for i := range ix.slots {
		s := &ix.slots[i]
		b, err := ix.win.get(s.off, int(s.n))
		if err != nil {
			return fmt.Errorf("read %s: %w", ix.Source, err)
		}
		if err := fn(s.seq, b); err != nil {
			return err
		}
	}
	return nil
}

// Entry returns a copy of the authoritative line of seq.
func (ix *Index) Entry(seq int64) ([]byte, bool, error) {
	i, ok := ix.bySeq[seq]
	if !ok {
		return nil, false, nil
	}
	s := &ix.slots[i]
	b, err := ix.win.get(s.off, int(s.n))
	if err != nil {
		return nil, true, fmt.Errorf("read %s: %w", ix.Source, err)
	}
	return append([]byte(nil), b...), true, nil
}

// window serves reads of authoritative lines from a buffer of the file, so that
// lines read in (mostly) file order cost one read per buffer, not one each.
type window struct {
	f   io.ReaderAt
	buf []byte
	off int64
}

const windowSize = 1 << 20

func (w *window) get(off int64, n int) ([]byte, error) {
	if off >= w.off && off+int64(n) <= w.off+int64(len(w.buf)) {
		return w.buf[off-w.off : off-w.off+int64(n)], nil
	}
	size := windowSize
	if n > size {
		size = n
	}
	if cap(w.buf) < size {
		w.buf = make([]byte, size)
	}
	w.buf = w.buf[:size]
	m, err := w.f.ReadAt(w.buf, off)
	w.buf, w.off = w.buf[:m], off
	if m < n {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return w.buf[:n], nil
}
