package report

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// DiffFile is the name of the replay diff records in a dispatch directory.
const DiffFile = "replay-diff.jsonl"

// DiffRecord is one {"type":"replay-diff",...} line of replay-diff.jsonl, as
// issue 12 names its fields (the replay seed's record, plus control_session,
// arm and repeat when they apply).
type DiffRecord struct {
	Line            int
	OriginalSession string
	ReplaySession   string
	ControlSession  string
	Arm             string
	Repeat          *int
	Mutations       []string
	Metrics         []MetricRow
	Outcome         []KeyValue // in key order
	Artifact        *ArtifactDiff
}

// MetricRow is one metric of a record, by whose value it is: the seed writes
// original_<m> and replayed_<m>; control_<m> and mutated_<m> are read the
// same way, and a key without such a prefix is a value of its own.
type MetricRow struct {
	Metric string
	Values map[string]*float64 // by column: "original", "control", "replayed", "mutated", "value"
}

// Columns are the metric table's columns, in order.
var Columns = []string{"original", "control", "replayed", "mutated", "value"}

// KeyValue is one field of the outcome object.
type KeyValue struct{ Key, Value string }

// ArtifactDiff is the record's artifact_diff.
type ArtifactDiff struct {
	FilesChanged, Insertions, Deletions *int64
}

// ReplayOutcome is the record's outcome of its replay session: the value
// under "replayed", else under its arm's name.
func (d DiffRecord) ReplayOutcome() string {
	for _, key := range []string{"replayed", d.Arm} {
		for _, kv := range d.Outcome {
			if key != "" && kv.Key == key {
				return kv.Value
			}
		}
	}
	return ""
}

// ParseDiffRecords reads replay-diff.jsonl: one JSON object per line. Lines
// that are not objects with "type":"replay-diff" (a torn last line, a row of
// another kind) are counted in bad and skipped; fields of an unexpected type
// are read as missing.
func ParseDiffRecords(r io.Reader) (records []DiffRecord, bad int, err error) {
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, rerr := br.ReadBytes('\n')
		if t := bytes.TrimSpace(line); len(t) > 0 {
			if d, ok := parseDiffRecord(t); ok {
				d.Line = n
				records = append(records, d)
			} else {
				bad++
			}
		}
		if rerr == io.EOF {
			return records, bad, nil
		}
		if rerr != nil {
			return records, bad, rerr
		}
	}
}

func parseDiffRecord(line []byte) (DiffRecord, bool) {
	var raw map[string]json.RawMessage
	if json.Unmarshal(line, &raw) != nil {
		return DiffRecord{}, false
	}
	var typ string
	if json.Unmarshal(raw["type"], &typ) != nil || typ != "replay-diff" {
		return DiffRecord{}, false
	}
	str := func(key string) string {
		var s string
		if json.Unmarshal(raw[key], &s) != nil {
			return ""
		}
		return s
	}
	d := DiffRecord{OriginalSession: str("original_session"), ReplaySession: str("replay_session"),
		ControlSession: str("control_session"), Arm: str("arm")}
	if n, ok := wholeNumber(raw["repeat"]); ok {
		i := int(n)
		d.Repeat = &i
	}
	var muts []any
	if json.Unmarshal(raw["mutations"], &muts) == nil {
		for _, m := range muts {
			if s, ok := m.(string); ok {
				d.Mutations = append(d.Mutations, s)
			}
		}
	}
	d.Metrics = metricRows(raw["metrics"])
	d.Outcome = outcome(raw["outcome"])
	var art map[string]json.RawMessage
	if json.Unmarshal(raw["artifact_diff"], &art) == nil && art != nil {
		d.Artifact = &ArtifactDiff{}
		for key, dst := range map[string]**int64{"files_changed": &d.Artifact.FilesChanged, "insertions": &d.Artifact.Insertions, "deletions": &d.Artifact.Deletions} {
			if n, ok := wholeNumber(art[key]); ok {
				*dst = &n
			}
		}
	}
	return d, true
}

// wholeNumber reads a JSON integer that fits in 53 bits (what every JSON
// reader agrees on).
func wholeNumber(raw json.RawMessage) (int64, bool) {
	var f float64
	if len(raw) == 0 || json.Unmarshal(raw, &f) != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, false
	}
	return int64(f), true
}

func metricRows(raw json.RawMessage) []MetricRow {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	rows := map[string]*MetricRow{}
	var names []string
	for key, v := range m {
		var f float64
		var val *float64
		if json.Unmarshal(v, &f) == nil && !math.IsInf(f, 0) {
			val = &f
		}
		col, name := "value", key
		for _, c := range Columns[:4] {
			if rest, ok := strings.CutPrefix(key, c+"_"); ok && rest != "" {
				col, name = c, rest
				break
			}
		}
		row := rows[name]
		if row == nil {
			row = &MetricRow{Metric: name, Values: map[string]*float64{}}
			rows[name] = row
			names = append(names, name)
		}
		row.Values[col] = val
	}
	sort.Strings(names)
	out := make([]MetricRow, 0, len(names))
	for _, n := range names {
		out = append(out, *rows[n])
	}
	return out
}

func outcome(raw json.RawMessage) []KeyValue {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []KeyValue
	for _, k := range keys {
		v := m[k]
		s, ok := v.(string)
		if !ok {
			b, _ := json.Marshal(v)
			s = string(b)
		}
		out = append(out, KeyValue{k, s})
	}
	return out
}

// Delta is the mutated (else replayed) value minus the control (else
// original) one: with a control arm, the comparison that decides is mutated
// against control ("" when either is missing).
func (m MetricRow) Delta() string {
	base, other := m.Values["control"], m.Values["mutated"]
	if base == nil {
		base = m.Values["original"]
	}
	if other == nil {
		other = m.Values["replayed"]
	}
	if base == nil || other == nil {
		return ""
	}
	return fmt.Sprintf("%+g", *other-*base)
}
