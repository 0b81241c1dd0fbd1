package node

// Sections are the diff sections, in cool-workflow's fixed order; links is
// {parents, children} as one unit.
var Sections = []string{"status", "inputs", "outputs", "artifacts", "evidence", "errors", "links", "metadata"}

// StrictSections are the fields cool-workflow never diffs, which strict mode
// adds after the eight.
var StrictSections = []string{"kind", "loopStage", "contractId"}

// Section changes.
const (
	Same    = "same"
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// SectionDiff is one section of a diff; Baseline and Candidate are set when
// Change is not same (present false: the value is missing).
type SectionDiff struct {
	Section      string
	Change       string
	Baseline     any
	HasBaseline  bool
	Candidate    any
	HasCandidate bool
}

// Diff is a NodeSnapshotDiff.
type Diff struct {
	RunID               string
	BaselineSnapshotID  string
	CandidateSnapshotID string
	BaselineNodeID      string
	CandidateNodeID     string
	Changed             bool
	Sections            []SectionDiff
}

func sectionValue(body *Object, section string) (any, bool) {
	if section == "links" {
		links := NewObject()
		if v, ok := body.Get("parents"); ok {
			links.Set("parents", v)
		}
		if v, ok := body.Get("children"); ok {
			links.Set("children", v)
		}
		return links, true
	}
	return body.Get(section)
}

// DiffBodies compares two snapshot bodies section by section, as
// cool-workflow's diffNodeSnapshots does: same when the normalized bytes are
// equal, else added (no baseline), removed (no candidate) or changed.
func DiffBodies(baseline, candidate *Object, strict bool) []SectionDiff {
	names := Sections
	if strict {
		names = append(append([]string(nil), Sections...), StrictSections...)
	}
	out := make([]SectionDiff, 0, len(names))
	for _, name := range names {
		b, hasB := sectionValue(baseline, name)
		c, hasC := sectionValue(candidate, name)
		bs, _ := StableString(b, hasB)
		cs, _ := StableString(c, hasC)
		d := SectionDiff{Section: name, Change: Same}
		switch {
		case hasB == hasC && bs == cs:
		case !hasB:
			d.Change = Added
		case !hasC:
			d.Change = Removed
		default:
			d.Change = Changed
		}
		if d.Change != Same {
			d.Baseline, d.HasBaseline, d.Candidate, d.HasCandidate = b, hasB, c, hasC
		}
		out = append(out, d)
	}
	return out
}

// DiffSnapshots is diffNodeSnapshots.
func DiffSnapshots(baseline, candidate *Snapshot, strict bool) *Diff {
	d := &Diff{
		RunID:               baseline.RunID,
		BaselineSnapshotID:  baseline.ID,
		CandidateSnapshotID: candidate.ID,
		BaselineNodeID:      baseline.NodeID,
		CandidateNodeID:     candidate.NodeID,
		Sections:            DiffBodies(baseline.Body, candidate.Body, strict),
	}
	for _, s := range d.Sections {
		if s.Change != Same {
			d.Changed = true
		}
	}
	return d
}

// Document is the diff as cool-workflow prints it.
func (d *Diff) Document() *Object {
	doc := NewObject()
	doc.Set("schemaVersion", float64(1))
	doc.Set("runId", d.RunID)
	doc.Set("baselineSnapshotId", d.BaselineSnapshotID)
	doc.Set("candidateSnapshotId", d.CandidateSnapshotID)
	doc.Set("baselineNodeId", d.BaselineNodeID)
	doc.Set("candidateNodeId", d.CandidateNodeID)
	doc.Set("changed", d.Changed)
	secs := make([]any, len(d.Sections))
	for i, s := range d.Sections {
		o := NewObject()
		o.Set("section", s.Section)
		o.Set("change", s.Change)
		// JSON.stringify leaves out an undefined value: a missing side has no key.
		if s.HasBaseline {
			o.Set("baseline", s.Baseline)
		}
		if s.HasCandidate {
			o.Set("candidate", s.Candidate)
		}
		secs[i] = o
	}
	doc.Set("sections", secs)
	return doc
}

// Finding is a verify finding.
type Finding struct {
	ID, Severity, Category, Reason string
	BaselineRef, ReplayRef         string // "" when none
}

// Verdict is a NodeReplayVerdict.
type Verdict struct {
	RunID, NodeID, ReplayID string
	Pass                    bool
	Freshness               string
	Findings                []Finding
}

// Verify compares a replay with a fresh (unwritten) snapshot of its source
// node, as cool-workflow's verifyNodeReplay does: each section that differs
// is a drift:<section> finding; a node that is gone is source-absent. It never
// fails on drift. Unlike cool-workflow, which passes a node one of whose
// files is gone, it fails closed there too, strict or not: freshness absent
// and a source-absent finding that names the file, before any drift
// findings. In strict mode the strict sections are compared too, and
// freshness is the replay's snapshot's real freshness when that snapshot is
// still stored (cool-workflow always says valid).
func (r *Run) Verify(rp *Replay, strict bool) *Verdict {
	v := &Verdict{RunID: r.ID, NodeID: rp.NodeID, ReplayID: rp.ID, Findings: []Finding{}}
	n := r.Node(rp.NodeID)
	if n == nil {
		v.Freshness = Absent
		v.Findings = append(v.Findings, Finding{ID: "source-absent", Severity: "error", Category: "source",
			Reason: "source node " + rp.NodeID + " is gone"})
		return v
	}
	v.Freshness = Valid
	if reason, gone := r.filesGone(n, rp.Body); gone {
		v.Freshness = Absent
		v.Findings = append(v.Findings, Finding{ID: "source-absent", Severity: "error", Category: "source", Reason: reason})
	} else if strict {
		if s, _, err := r.LoadSnapshot(rp.SnapshotID); err == nil {
			v.Freshness, _ = r.Freshness(s)
		}
	}
	for _, s := range DiffBodies(n.body(), rp.Body, strict) {
		if s.Change == Same {
			continue
		}
		v.Findings = append(v.Findings, Finding{ID: "drift:" + s.Section, Severity: "error", Category: s.Section,
			Reason: "replay diverged from source in " + s.Section, BaselineRef: rp.SnapshotID, ReplayRef: rp.ID})
	}
	v.Pass = len(v.Findings) == 0
	return v
}

// Document is the verdict as cool-workflow prints it.
func (v *Verdict) Document() *Object {
	doc := NewObject()
	doc.Set("schemaVersion", float64(1))
	doc.Set("runId", v.RunID)
	doc.Set("nodeId", v.NodeID)
	doc.Set("replayId", v.ReplayID)
	doc.Set("pass", v.Pass)
	doc.Set("freshness", v.Freshness)
	fs := make([]any, len(v.Findings))
	for i, f := range v.Findings {
		o := NewObject()
		o.Set("id", f.ID)
		o.Set("severity", f.Severity)
		o.Set("category", f.Category)
		o.Set("reason", f.Reason)
		if f.BaselineRef != "" {
			o.Set("baselineRef", f.BaselineRef)
		}
		if f.ReplayRef != "" {
			o.Set("replayRef", f.ReplayRef)
		}
		fs[i] = o
	}
	doc.Set("findings", fs)
	return doc
}
