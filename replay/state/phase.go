package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The files of style 2, under the project root.
const (
	StateDir      = "memory/state"
	PhaseFile     = "phase.json"
	ExecutionFile = "execution.json"
	ArchiveDir    = ".archive"
)

// Phases are the phases of a style-2 workflow, in order.
var Phases = []string{"REQUIREMENTS", "ARCHITECTURE", "IMPLEMENTATION", "VERIFICATION", "REFLECTION"}

// PhaseIndex is the position of phase in Phases, or -1.
func PhaseIndex(phase string) int {
	for i, p := range Phases {
		if p == phase {
			return i
		}
	}
	return -1
}

// The phase statuses and task statuses the schemas allow.
var (
	PhaseStatuses = []string{"pending", "in_progress", "complete", "failed"}
	TaskStatuses  = []string{"pending", "running", "complete", "failed", "skipped"}
)

// SchemaError is a style-2 document that is not valid JSON or does not fit its
// schema; Problems names each misfit by its JSON path.
type SchemaError struct {
	File     string
	Problems []string
}

func (e *SchemaError) Error() string {
	msg := e.File + ": " + e.Problems[0]
	if n := len(e.Problems) - 1; n == 1 {
		msg += " (and 1 more problem)"
	} else if n > 1 {
		msg += fmt.Sprintf(" (and %d more problems)", n)
	}
	return msg
}

func (e *SchemaError) Unwrap() error { return ErrCorrupt }

// PhaseState is memory/state/phase.json.
type PhaseState struct {
	WorkflowID       string
	StartedAt        string
	LastUpdated      string
	CurrentPhase     string
	PhaseStatus      string
	CompletedPhases  []CompletedPhase
	UserCheckpoints  []UserCheckpoint
	InterruptionSafe bool
	extra            map[string]json.RawMessage // keys the schema does not name, kept
}

// CompletedPhase is one entry of completed_phases.
type CompletedPhase struct {
	Phase       string
	CompletedAt string
	Output      string // "" when absent or null
	extra       map[string]json.RawMessage
}

// UserCheckpoint is one entry of user_checkpoints: a phase a user approved.
type UserCheckpoint struct {
	Phase      string
	ApprovedAt string
	extra      map[string]json.RawMessage
}

// Execution is memory/state/execution.json: the executor's task-level
// progress.
type Execution struct {
	WorkflowID  string // "" when absent
	LastUpdated string // "" when absent
	Tasks       []Task
	extra       map[string]json.RawMessage
}

// Task is one entry of tasks.
type Task struct {
	ID          string
	Status      string
	Attempts    int64
	StartedAt   string // "" when null or absent
	CompletedAt string // "" when null or absent
	Output      string // "" when null or absent
	extra       map[string]json.RawMessage
}

// object is a decoded JSON object that records what it could not read.
type object struct {
	fields   map[string]json.RawMessage
	path     string
	problems *[]string
	used     map[string]bool
}

func (o *object) problem(key, format string, a ...any) {
	where := o.path + key
	if key == "" {
		where = strings.TrimSuffix(o.path, ".")
	}
	if where == "" {
		*o.problems = append(*o.problems, fmt.Sprintf(format, a...))
		return
	}
	*o.problems = append(*o.problems, where+": "+fmt.Sprintf(format, a...))
}

// raw returns the field and whether it is present and not null.
func (o *object) raw(key string, required bool) (json.RawMessage, bool) {
	o.used[key] = true
	v, ok := o.fields[key]
	if !ok {
		if required {
			o.problem(key, "required")
		}
		return nil, false
	}
	if string(v) == "null" {
		if required {
			o.problem(key, "must not be null")
		}
		return nil, false
	}
	return v, true
}

func (o *object) str(key string, required bool) string {
	v, ok := o.raw(key, required)
	if !ok {
		return ""
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		o.problem(key, "must be a string, not %s", jsonKind(v))
		return ""
	}
	if required && s == "" {
		o.problem(key, "must not be empty")
	}
	return s
}

func (o *object) enum(key string, set []string) string {
	s := o.str(key, true)
	if s != "" && !oneOf(s, set) {
		o.problem(key, "%q is not one of %s", clip(s), strings.Join(set, ", "))
	}
	return s
}

func (o *object) time(key string, required bool) string {
	s := o.str(key, required)
	if s != "" {
		if _, err := ParseTime(s); err != nil {
			o.problem(key, "%q is not an ISO 8601 time (such as 2026-01-02T15:04:05Z)", clip(s))
		}
	}
	return s
}

func (o *object) boolean(key string) bool {
	v, ok := o.raw(key, true)
	if !ok {
		return false
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		o.problem(key, "must be true or false, not %s", jsonKind(v))
	}
	return b
}

func (o *object) count(key string) int64 {
	v, ok := o.raw(key, true)
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 {
		o.problem(key, "must be a whole number from 0, not %s", clip(string(v)))
	}
	return n
}

// array returns the elements of an array field, each as an object.
func (o *object) array(key string, required bool) []*object {
	v, ok := o.raw(key, required)
	if !ok {
		return nil
	}
	var elems []json.RawMessage
	if err := json.Unmarshal(v, &elems); err != nil {
		o.problem(key, "must be an array, not %s", jsonKind(v))
		return nil
	}
	var out []*object
	for i, e := range elems {
		sub := &object{path: fmt.Sprintf("%s%s[%d].", o.path, key, i), problems: o.problems, used: map[string]bool{}}
		if err := json.Unmarshal(e, &sub.fields); err != nil || sub.fields == nil {
			sub.problem("", "must be an object, not %s", jsonKind(e))
			continue
		}
		out = append(out, sub)
	}
	return out
}

// rest is every field the schema did not name.
func (o *object) rest() map[string]json.RawMessage {
	var m map[string]json.RawMessage
	for k, v := range o.fields {
		if !o.used[k] {
			if m == nil {
				m = map[string]json.RawMessage{}
			}
			m[k] = v
		}
	}
	return m
}

func jsonKind(v json.RawMessage) string {
	t := bytes.TrimSpace(v)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// decodeObject reads data as exactly one JSON object.
func decodeObject(file string, data []byte) (*object, error) {
	if len(data) > maxStateSize {
		return nil, &SchemaError{File: file, Problems: []string{fmt.Sprintf("%d bytes: too large for a state file", len(data))}}
	}
	if !utf8.Valid(data) {
		return nil, &SchemaError{File: file, Problems: []string{"not valid UTF-8"}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return nil, &SchemaError{File: file, Problems: []string{"invalid JSON: " + jsonErr(err, data)}}
	}
	if fields == nil {
		return nil, &SchemaError{File: file, Problems: []string{"not a JSON object"}}
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, &SchemaError{File: file, Problems: []string{"invalid JSON: more data after the object"}}
	}
	return &object{fields: fields, problems: &[]string{}, used: map[string]bool{}}, nil
}

// jsonErr words a decoding error with the line it happened on.
func jsonErr(err error, data []byte) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		return fmt.Sprintf("%v (line %d)", se, line)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return "not a JSON object"
	}
	if err.Error() == "unexpected EOF" {
		return "the document ends early (a torn write?)"
	}
	return err.Error()
}

// ParsePhase reads phase.json and checks it against the schema.
func ParsePhase(file string, data []byte) (*PhaseState, error) {
	o, err := decodeObject(file, data)
	if err != nil {
		return nil, err
	}
	s := &PhaseState{
		WorkflowID:   o.str("workflow_id", true),
		StartedAt:    o.time("started_at", true),
		LastUpdated:  o.time("last_updated", true),
		CurrentPhase: o.enum("current_phase", Phases),
		PhaseStatus:  o.enum("phase_status", PhaseStatuses),
	}
	for _, c := range o.array("completed_phases", true) {
		s.CompletedPhases = append(s.CompletedPhases, CompletedPhase{
			Phase: c.enum("phase", Phases), CompletedAt: c.time("completed_at", true), Output: c.str("output", false), extra: c.rest()})
	}
	for _, c := range o.array("user_checkpoints", true) {
		s.UserCheckpoints = append(s.UserCheckpoints, UserCheckpoint{
			Phase: c.enum("phase", Phases), ApprovedAt: c.time("approved_at", true), extra: c.rest()})
	}
	s.InterruptionSafe = o.boolean("interruption_safe")
	s.extra = o.rest()
	if len(*o.problems) > 0 {
		return nil, &SchemaError{File: file, Problems: *o.problems}
	}
	return s, nil
}

// ParseExecution reads execution.json and checks it against the schema.
func ParseExecution(file string, data []byte) (*Execution, error) {
	o, err := decodeObject(file, data)
	if err != nil {
		return nil, err
	}
	e := &Execution{WorkflowID: o.str("workflow_id", false), LastUpdated: o.time("last_updated", false)}
	seen := map[string]int{}
	for i, t := range o.array("tasks", true) {
		task := Task{
			ID:          t.str("id", true),
			Status:      t.enum("status", TaskStatuses),
			Attempts:    t.count("attempts"),
			StartedAt:   t.time("started_at", false),
			CompletedAt: t.time("completed_at", false),
			Output:      t.str("output", false),
			extra:       t.rest(),
		}
		if first, dup := seen[task.ID]; dup && task.ID != "" {
			t.problem("id", "%q is also the id of tasks[%d]", clip(task.ID), first)
		}
		seen[task.ID] = i
		e.Tasks = append(e.Tasks, task)
	}
	e.extra = o.rest()
	if len(*o.problems) > 0 {
		return nil, &SchemaError{File: file, Problems: *o.problems}
	}
	return e, nil
}

// encoder writes an object's fields in a fixed order, then the fields the
// schema does not name in key order, indented as the skill's examples are.
type encoder struct {
	buf   bytes.Buffer
	first bool
}

func newObject() *encoder {
	e := &encoder{first: true}
	e.buf.WriteByte('{')
	return e
}

func (e *encoder) key(k string) {
	if !e.first {
		e.buf.WriteByte(',')
	}
	e.first = false
	e.buf.Write(jsonString(k))
	e.buf.WriteByte(':')
}

func (e *encoder) str(k, v string) { e.key(k); e.buf.Write(jsonString(v)) }

// nullable writes "" as null.
func (e *encoder) nullable(k, v string) {
	e.key(k)
	if v == "" {
		e.buf.WriteString("null")
		return
	}
	e.buf.Write(jsonString(v))
}

func (e *encoder) raw(k string, v []byte) { e.key(k); e.buf.Write(v) }

func (e *encoder) extras(m map[string]json.RawMessage) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var c bytes.Buffer
		if json.Compact(&c, m[k]) != nil {
			c.Reset()
			c.Write(m[k])
		}
		e.raw(k, c.Bytes())
	}
}

func (e *encoder) close() []byte { e.buf.WriteByte('}'); return e.buf.Bytes() }

func jsonString(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func indent(compact []byte) []byte {
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		panic("state: encoding produced invalid JSON: " + err.Error())
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// Bytes renders phase.json: the schema's keys in the skill's order, then any
// others.
func (s *PhaseState) Bytes() []byte {
	e := newObject()
	e.str("workflow_id", s.WorkflowID)
	e.str("started_at", s.StartedAt)
	e.str("last_updated", s.LastUpdated)
	e.str("current_phase", s.CurrentPhase)
	e.str("phase_status", s.PhaseStatus)
	var list [][]byte
	for _, c := range s.CompletedPhases {
		ce := newObject()
		ce.str("phase", c.Phase)
		ce.str("completed_at", c.CompletedAt)
		ce.nullable("output", c.Output)
		ce.extras(c.extra)
		list = append(list, ce.close())
	}
	e.raw("completed_phases", joinArray(list))
	list = nil
	for _, c := range s.UserCheckpoints {
		ce := newObject()
		ce.str("phase", c.Phase)
		ce.str("approved_at", c.ApprovedAt)
		ce.extras(c.extra)
		list = append(list, ce.close())
	}
	e.raw("user_checkpoints", joinArray(list))
	e.raw("interruption_safe", []byte(strconv.FormatBool(s.InterruptionSafe)))
	e.extras(s.extra)
	return indent(e.close())
}

// Bytes renders execution.json.
func (x *Execution) Bytes() []byte {
	e := newObject()
	if x.WorkflowID != "" {
		e.str("workflow_id", x.WorkflowID)
	}
	if x.LastUpdated != "" {
		e.str("last_updated", x.LastUpdated)
	}
	var list [][]byte
	for _, t := range x.Tasks {
		te := newObject()
		te.str("id", t.ID)
		te.str("status", t.Status)
		te.raw("attempts", []byte(strconv.FormatInt(t.Attempts, 10)))
		te.nullable("started_at", t.StartedAt)
		te.nullable("completed_at", t.CompletedAt)
		te.nullable("output", t.Output)
		te.extras(t.extra)
		list = append(list, te.close())
	}
	e.raw("tasks", joinArray(list))
	e.extras(x.extra)
	return indent(e.close())
}

func joinArray(elems [][]byte) []byte {
	return append(append([]byte{'['}, bytes.Join(elems, []byte{','})...), ']')
}
