package state

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// PlaybookFile is the name of the recovery playbook's state file, kept in the
// feature folder specs/<NNN>-<feature>/.
const PlaybookFile = ".pipeline-state.md"

// The playbook's statuses.
const (
	StatusInProgress      = "IN_PROGRESS"
	StatusWaitingForHuman = "WAITING_FOR_HUMAN"
	StatusAborted         = "ABORTED"
	StatusComplete        = "COMPLETE"
	StatusFailed          = "FAILED"
	StatusCancelled       = "CANCELLED"
)

var playbookStatuses = []string{StatusInProgress, StatusWaitingForHuman, StatusAborted, StatusComplete, StatusFailed, StatusCancelled}

// Stages are the playbook's stages, in the order a run goes through them.
var Stages = []string{"spec", "clarify", "architect", "tasks", "tdd", "programmer", "testrunner", "code-review", "security", "refactor"}

// StageIndex is the position of stage in Stages, or -1.
func StageIndex(stage string) int {
	for i, s := range Stages {
		if s == stage {
			return i
		}
	}
	return -1
}

// Unfinished reports whether a run with this status is one the playbook
// resumes.
func Unfinished(status string) bool {
	return status == StatusInProgress || status == StatusWaitingForHuman || status == StatusAborted
}

// maxStateSize bounds what is read of a state file: state files are small, and
// a huge one is not one.
const maxStateSize = 4 << 20

// ErrCorrupt marks a state file that cannot be read as its style's format (a
// *ParseError or *SchemaError wraps it).
var ErrCorrupt = errors.New("state file is corrupt")

// ParseError is a playbook state file that does not follow the format, with the
// line (1-based; 0 for the whole file) where it stops following it.
type ParseError struct {
	File string
	Line int
	Msg  string
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

func (e *ParseError) Unwrap() error { return ErrCorrupt }

// Playbook is a parsed .pipeline-state.md. It keeps the file's lines, so a
// rewrite changes only the lines it means to change.
type Playbook struct {
	Header      map[string]string // every `key: value` line of the header block
	Completed   []StageEntry      // ## Completed Stages, in file order
	Checkpoints []HumanCheckpoint // ## Human Checkpoints, in file order
	Notes       string            // ## Notes, trimmed; "" without the section
	NotesLine   int               // the line of the ## Notes heading, 0 without one

	lines      []string       // the file's lines, without line ends
	cr         []bool         // lines[i] ended with \r\n, kept as it was
	crlf       bool           // new lines end with \r\n (the file's first line does)
	headerLine map[string]int // key -> index into lines
	headerEnd  int            // index of the first line after the header block
	sections   map[string]section
}

// section is a ## section of the file: the heading's index and the index of the
// first line after it.
type section struct{ start, end int }

// StageEntry is one `- [x] <stage> — <artifact>` line.
type StageEntry struct {
	Stage    string
	Artifact string // "" when the line names none
	Done     bool
	line     int // index into lines
}

// HumanCheckpoint is one `- [x] <checkpoint>` (cleared) or `- [ ] <checkpoint>`
// (pending) line.
type HumanCheckpoint struct {
	Name    string
	Cleared bool
	line    int
}

// The header's fields.
func (p *Playbook) Status() string        { return p.Header["status"] }
func (p *Playbook) Feature() string       { return p.Header["feature"] }
func (p *Playbook) SpecHash() string      { return p.Header["spec_hash"] }
func (p *Playbook) CurrentStage() string  { return p.Header["current_stage"] }
func (p *Playbook) StartedAt() string     { return p.Header["started_at"] }
func (p *Playbook) LastUpdatedAt() string { return p.Header["last_updated_at"] }

// PendingCheckpoint is the first human checkpoint not yet cleared, or "".
func (p *Playbook) PendingCheckpoint() string {
	for _, c := range p.Checkpoints {
		if !c.Cleared {
			return c.Name
		}
	}
	return ""
}

// ClearedCheckpoints are the human checkpoints already cleared, never asked
// again.
func (p *Playbook) ClearedCheckpoints() []string {
	var out []string
	for _, c := range p.Checkpoints {
		if c.Cleared {
			out = append(out, c.Name)
		}
	}
	return out
}

var (
	headerKeyRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+(.*))?$`) })
	checkItemRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[-*][ \t]+\[([ xX])\][ \t]*(.*)$`) })
	// The separators a Completed Stages line may put between stage and artifact:
	// an em dash as the playbook writes it, an en dash, " - ", " -- " or ": ".
	artifactSepRE = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`^(\S+)(?:[ \t]+(?:—|–|--|-)[ \t]+|:[ \t]+)(.*)$`)
	})
)

// Section names, as the headings spell them (matched without regard to case).
const (
	sectionCompleted   = "completed stages"
	sectionCheckpoints = "human checkpoints"
	sectionNotes       = "notes"
)

// ParsePlaybook reads a .pipeline-state.md. file names it in errors. It checks
// the format and the values it knows (status, stage names, timestamps); what a
// decision needs beyond that (a spec hash, a current stage) DecidePlaybook
// checks.
func ParsePlaybook(file string, data []byte) (*Playbook, error) {
	perr := func(line int, format string, a ...any) error {
		return &ParseError{File: file, Line: line, Msg: fmt.Sprintf(format, a...)}
	}
	if len(data) > maxStateSize {
		return nil, perr(0, "%d bytes: too large for a state file", len(data))
	}
	if !utf8.Valid(data) {
		return nil, perr(0, "not valid UTF-8")
	}
	if strings.IndexByte(string(data), 0) >= 0 {
		return nil, perr(0, "holds a NUL byte: not a text file")
	}
	text := string(data)
	p := &Playbook{Header: map[string]string{}, headerLine: map[string]int{}, sections: map[string]section{}}
	if i := strings.IndexByte(text, '\n'); i > 0 && text[i-1] == '\r' {
		p.crlf = true
	}
	text = strings.TrimSuffix(text, "\n")
	if text != "" {
		p.lines = strings.Split(text, "\n")
	}
	p.cr = make([]bool, len(p.lines))
	for i, l := range p.lines {
		if i < len(p.lines)-1 || strings.HasSuffix(string(data), "\n") {
			p.cr[i] = strings.HasSuffix(l, "\r")
			p.lines[i] = strings.TrimSuffix(l, "\r")
		}
	}

	// The header block: everything before the first ## heading.
	i := 0
	for ; i < len(p.lines); i++ {
		l := strings.TrimSpace(p.lines[i])
		if strings.HasPrefix(l, "## ") || l == "##" {
			break
		}
		if l == "" || strings.HasPrefix(l, "# ") || l == "#" || (strings.HasPrefix(l, "<!--") && strings.HasSuffix(l, "-->")) {
			continue
		}
		m := headerKeyRE().FindStringSubmatch(l)
		if m == nil {
			return nil, perr(i+1, "not a `key: value` line in the header: %q", clip(l))
		}
		key, value := strings.ToLower(m[1]), strings.TrimSpace(m[2])
		if _, dup := p.Header[key]; dup {
			return nil, perr(i+1, "%s given twice (first on line %d)", key, p.headerLine[key]+1)
		}
		p.Header[key], p.headerLine[key] = value, i
	}
	p.headerEnd = i

	// The sections.
	var cur string
	for ; i < len(p.lines); i++ {
		l := strings.TrimSpace(p.lines[i])
		if strings.HasPrefix(l, "## ") || l == "##" {
			name := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
			if prev, dup := p.sections[name]; dup && name != "" {
				return nil, perr(i+1, "section %q given twice (first on line %d)", strings.TrimSpace(strings.TrimLeft(l, "#")), prev.start+1)
			}
			if cur != "" {
				s := p.sections[cur]
				s.end = i
				p.sections[cur] = s
			}
			cur = name
			p.sections[name] = section{start: i, end: len(p.lines)}
			continue
		}
		switch cur {
		case sectionCompleted:
			if l == "" {
				continue
			}
			e, err := parseStageEntry(l)
			if err != nil {
				return nil, perr(i+1, "%v", err)
			}
			for _, prev := range p.Completed {
				if prev.Stage == e.Stage {
					return nil, perr(i+1, "stage %s listed twice under Completed Stages (first on line %d)", e.Stage, prev.line+1)
				}
			}
			e.line = i
			p.Completed = append(p.Completed, e)
		case sectionCheckpoints:
			if l == "" {
				continue
			}
			m := checkItemRE().FindStringSubmatch(l)
			if m == nil || strings.TrimSpace(m[2]) == "" {
				return nil, perr(i+1, "not a human checkpoint line (`- [x] <checkpoint>` or `- [ ] <checkpoint>`): %q", clip(l))
			}
			p.Checkpoints = append(p.Checkpoints, HumanCheckpoint{Name: strings.TrimSpace(m[2]), Cleared: m[1] != " ", line: i})
		}
	}
	if s, ok := p.sections[sectionNotes]; ok {
		p.NotesLine = s.start + 1
		p.Notes = strings.TrimSpace(strings.Join(p.lines[s.start+1:s.end], "\n"))
	}

	if err := p.checkHeader(perr); err != nil {
		return nil, err
	}
	return p, nil
}

func parseStageEntry(l string) (StageEntry, error) {
	m := checkItemRE().FindStringSubmatch(l)
	if m == nil {
		return StageEntry{}, fmt.Errorf("not a completed stage line (`- [x] <stage> — <artifact path>`): %q", clip(l))
	}
	e := StageEntry{Done: m[1] != " "}
	rest := strings.TrimSpace(m[2])
	if sm := artifactSepRE().FindStringSubmatch(rest); sm != nil {
		e.Stage, e.Artifact = sm[1], strings.TrimSpace(sm[2])
	} else {
		e.Stage = rest
	}
	e.Stage = strings.Trim(e.Stage, "`*")
	e.Artifact = strings.Trim(e.Artifact, "`")
	if StageIndex(e.Stage) < 0 {
		return StageEntry{}, fmt.Errorf("unknown stage %q: the stages are %s", clip(e.Stage), strings.Join(Stages, " "))
	}
	return e, nil
}

func (p *Playbook) checkHeader(perr func(int, string, ...any) error) error {
	status, ok := p.Header["status"]
	if !ok {
		return perr(0, "no status line in the header (status: IN_PROGRESS, WAITING_FOR_HUMAN, ABORTED, COMPLETE, FAILED or CANCELLED)")
	}
	if !oneOf(status, playbookStatuses) {
		return perr(p.headerLine["status"]+1, "unknown status %q: want one of %s", clip(status), strings.Join(playbookStatuses, ", "))
	}
	if st := p.Header["current_stage"]; st != "" && StageIndex(st) < 0 {
		return perr(p.headerLine["current_stage"]+1, "unknown current_stage %q: the stages are %s", clip(st), strings.Join(Stages, " "))
	}
	for _, key := range []string{"started_at", "last_updated_at"} {
		if v := p.Header[key]; v != "" {
			if _, err := ParseTime(v); err != nil {
				return perr(p.headerLine[key]+1, "%s %q is not an ISO 8601 time (such as 2026-01-02T15:04:05Z)", key, clip(v))
			}
		}
	}
	return nil
}

// Bytes renders the playbook, each line with the line end it had (new lines
// with the file's), and a final line end.
func (p *Playbook) Bytes() []byte {
	var b strings.Builder
	for i, l := range p.lines {
		b.WriteString(l)
		if p.cr[i] {
			b.WriteByte('\r')
		}
		b.WriteByte('\n')
	}
	return []byte(b.String())
}

// setHeader sets key to value: its line is rewritten in place, a new key goes
// after the last header line.
func (p *Playbook) setHeader(key, value string) {
	line := key + ": " + value
	if i, ok := p.headerLine[key]; ok {
		if p.Header[key] == value {
			return // keep the line as the file spells it
		}
		p.lines[i] = line
		p.Header[key] = value
		return
	}
	at := 0
	for _, i := range p.headerLine {
		if i+1 > at {
			at = i + 1
		}
	}
	if len(p.headerLine) == 0 {
		at = p.headerEnd
		for at > 0 && strings.TrimSpace(p.lines[at-1]) == "" {
			at--
		}
	}
	p.insertLines(at, line)
	p.Header[key], p.headerLine[key] = value, at
}

// insertLines inserts lines before index at and shifts every recorded index.
func (p *Playbook) insertLines(at int, lines ...string) {
	n := len(lines)
	p.lines = append(p.lines[:at], append(append([]string{}, lines...), p.lines[at:]...)...)
	crs := make([]bool, n)
	for i := range crs {
		crs[i] = p.crlf
	}
	p.cr = append(p.cr[:at], append(crs, p.cr[at:]...)...)
	shift := func(i int) int {
		if i >= at {
			return i + n
		}
		return i
	}
	for k, i := range p.headerLine {
		p.headerLine[k] = shift(i)
	}
	if p.headerEnd >= at {
		p.headerEnd += n
	}
	for k, s := range p.sections {
		if s.start >= at {
			s.start += n
		}
		if s.end >= at {
			s.end += n
		}
		p.sections[k] = s
	}
	for i := range p.Completed {
		p.Completed[i].line = shift(p.Completed[i].line)
	}
	for i := range p.Checkpoints {
		p.Checkpoints[i].line = shift(p.Checkpoints[i].line)
	}
}

// setStageDone rewrites a Completed Stages line's checkbox, or adds a line for a
// stage the section does not list.
func (p *Playbook) setStageDone(stage, artifact string, done bool) {
	box := "[ ]"
	if done {
		box = "[x]"
	}
	for i := range p.Completed {
		e := &p.Completed[i]
		if e.Stage != stage {
			continue
		}
		m := checkItemRE().FindStringSubmatchIndex(strings.TrimSpace(p.lines[e.line]))
		indent := p.lines[e.line][:len(p.lines[e.line])-len(strings.TrimLeft(p.lines[e.line], " \t"))]
		trimmed := strings.TrimSpace(p.lines[e.line])
		p.lines[e.line] = indent + trimmed[:m[2]-1] + box + trimmed[m[3]+1:]
		e.Done = done
		return
	}
	line := "- " + box + " " + stage
	if artifact != "" {
		line += " — " + artifact
	}
	s, ok := p.sections[sectionCompleted]
	if !ok {
		p.appendSection("## Completed Stages", line)
		s = p.sections[sectionCompleted]
	} else {
		at := s.start + 1
		for j := s.start + 1; j < s.end; j++ {
			if strings.TrimSpace(p.lines[j]) != "" {
				at = j + 1
			}
		}
		if at == s.start+1 {
			// An empty section: keep a blank line under the heading.
			p.insertLines(at, "")
			at++
		}
		p.insertLines(at, line)
	}
	p.Completed = append(p.Completed, StageEntry{Stage: stage, Artifact: artifact, Done: done, line: p.lastItemLine(sectionCompleted)})
}

func (p *Playbook) lastItemLine(name string) int {
	s := p.sections[name]
	for j := s.end - 1; j > s.start; j-- {
		if strings.TrimSpace(p.lines[j]) != "" {
			return j
		}
	}
	return s.start
}

// appendSection adds a ## section with lines at the end of the file.
func (p *Playbook) appendSection(heading string, lines ...string) {
	at := len(p.lines)
	var add []string
	if at > 0 && strings.TrimSpace(p.lines[at-1]) != "" {
		add = append(add, "")
	}
	add = append(add, heading, "")
	add = append(add, lines...)
	p.lines = append(p.lines, add...)
	for range add {
		p.cr = append(p.cr, p.crlf)
	}
	name := strings.ToLower(strings.TrimSpace(strings.TrimLeft(heading, "#")))
	p.sections[name] = section{start: at + len(add) - len(lines) - 2, end: len(p.lines)}
}

// addNote appends a `- ` note to the Notes section, creating it when missing.
func (p *Playbook) addNote(note string) {
	line := "- " + note
	s, ok := p.sections[sectionNotes]
	if !ok {
		p.appendSection("## Notes", line)
	} else {
		at := s.start + 1
		for j := s.start + 1; j < s.end; j++ {
			if strings.TrimSpace(p.lines[j]) != "" {
				at = j + 1
			}
		}
		if at == s.start+1 {
			p.insertLines(at, "")
			at++
		}
		p.insertLines(at, line)
	}
	s = p.sections[sectionNotes]
	p.NotesLine = s.start + 1
	p.Notes = strings.TrimSpace(strings.Join(p.lines[s.start+1:s.end], "\n"))
}

// ParseTime reads an ISO 8601 timestamp as the state files write them: RFC 3339
// (fractional seconds allowed), or without a zone, then taken in local time.
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05", "2006-01-02T15:04:05Z0700"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an ISO 8601 time", s)
}

func oneOf(s string, set []string) bool {
	for _, x := range set {
		if s == x {
			return true
		}
	}
	return false
}

// clip shortens what an error quotes from a file.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	cut := 77
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
