package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rewind-cli/rewind/manifest"
)

// Error codes, as cool-workflow's NodeSnapshotError and RecordValidationError
// name them.
const (
	CodeNodeAbsent       = "node-absent"
	CodeNodeInvalid      = "node-invalid" // rewind's: a node whose body cool-workflow could not read back
	CodeSnapshotNotFound = "snapshot-not-found"
	CodeReplayNotFound   = "replay-not-found"
	CodeSnapshotStale    = "snapshot-stale"
	CodeSnapshotAbsent   = "snapshot-absent"
	CodeRecordInvalid    = "record-shape-invalid"
)

// Freshness values.
const (
	Valid  = "valid"
	Stale  = "stale"
	Absent = "absent"
)

// Error is a structured, fail-closed refusal: cool-workflow's
// NodeSnapshotError {code, message, freshness, details}.
type Error struct {
	Code      string
	Message   string
	Freshness string // "" when none applies
	// RunID and NodeID are the details: the run, and the node the error is
	// about ("" when it names none: an unknown snapshot or replay id).
	RunID  string
	NodeID string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Guard reports whether the error is the fail-closed guard: a snapshot that
// is stale or absent.
func (e *Error) Guard() bool { return e.Code == CodeSnapshotStale || e.Code == CodeSnapshotAbsent }

// ISOTime formats a time as JavaScript's toISOString does; the zero time is the
// epoch, cool-workflow's default when no time is injected.
func ISOTime(t time.Time) string {
	if t.IsZero() {
		t = time.Unix(0, 0)
	}
	return t.UTC().Truncate(time.Millisecond).Format("2006-01-02T15:04:05.000Z")
}

// Snapshot is a NodeSnapshot.
type Snapshot struct {
	ID                string
	RunID             string
	NodeID            string
	CapturedAt        string
	SourceFingerprint string
	Strict            bool
	Body              *Object
}

// Document is the snapshot as cool-workflow writes it (with "strict": true
// after sourceFingerprint in strict mode).
func (s *Snapshot) Document() *Object {
	d := NewObject()
	d.Set("schemaVersion", float64(1))
	d.Set("snapshotId", s.ID)
	d.Set("runId", s.RunID)
	d.Set("nodeId", s.NodeID)
	d.Set("capturedAt", s.CapturedAt)
	d.Set("sourceFingerprint", s.SourceFingerprint)
	if s.Strict {
		d.Set("strict", true)
	}
	d.Set("body", s.Body)
	return d
}

// Replay is a NodeReplayRun.
type Replay struct {
	ID                string
	RunID             string
	NodeID            string
	SnapshotID        string
	ReplayedAt        string
	Freshness         string
	ContractValidated bool
	OutputFingerprint string
	Strict            bool
	Body              *Object
}

// Document is the replay as cool-workflow writes it.
func (r *Replay) Document() *Object {
	d := NewObject()
	d.Set("schemaVersion", float64(1))
	d.Set("replayId", r.ID)
	d.Set("runId", r.RunID)
	d.Set("nodeId", r.NodeID)
	d.Set("snapshotId", r.SnapshotID)
	d.Set("replayedAt", r.ReplayedAt)
	d.Set("freshness", r.Freshness)
	d.Set("contractValidated", r.ContractValidated)
	d.Set("outputFingerprint", r.OutputFingerprint)
	if r.Strict {
		d.Set("strict", true)
	}
	d.Set("body", r.Body)
	return d
}

// TakeSnapshot snapshots one node and writes it under
// nodes/snapshots/<node>/<snapshotId>.json. The id is content-addressed: a
// second snapshot of an unchanged node rewrites the same file.
func (r *Run) TakeSnapshot(nodeID string, strict bool, now time.Time) (*Snapshot, error) {
	s, err := r.snapshot(nodeID, strict, now)
	if err != nil {
		return nil, err
	}
	if err := r.write(r.nodeDir(nodeID), s.ID, s.Document()); err != nil {
		return nil, err
	}
	return s, nil
}

func (r *Run) snapshot(nodeID string, strict bool, now time.Time) (*Snapshot, error) {
	n := r.Node(nodeID)
	if n == nil {
		return nil, &Error{Code: CodeNodeAbsent, Freshness: Absent, RunID: r.ID, NodeID: nodeID,
			Message: fmt.Sprintf("cannot snapshot: node %s not found in run %s", nodeID, r.ID)}
	}
	if safe := SafeFileName(nodeID); safe == "." || safe == ".." {
		n = &Node{invalid: "its id names no directory of its own (" + safe + ")"}
	} else if len(safe) > MaxSafeNodeID {
		n = &Node{invalid: fmt.Sprintf("its id is too long to name its snapshot files (%d bytes as a file name, at most %d)", len(safe), MaxSafeNodeID)}
	}
	if n.invalid != "" {
		return nil, &Error{Code: CodeNodeInvalid, RunID: r.ID, NodeID: nodeID,
			Message: fmt.Sprintf("cannot snapshot: node %s of run %s is not a valid node: %s", nodeID, r.ID, n.invalid)}
	}
	fp := n.fingerprint(strict)
	return &Snapshot{
		ID:                "snap-" + SafeFileName(nodeID) + "-" + strings.TrimPrefix(fp, "sha256:")[:12],
		RunID:             r.ID,
		NodeID:            nodeID,
		CapturedAt:        ISOTime(now),
		SourceFingerprint: fp,
		Strict:            strict,
		Body:              n.body(),
	}, nil
}

// write writes doc as dir/<id>.json, whole or not at all, mode 0600 as
// cool-workflow's writeJson.
func (r *Run) write(dir, id string, doc *Object) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return manifest.WriteFileAtomic(filepath.Join(dir, SafeFileName(id)+".json"), Pretty(doc), 0o600)
}

// Freshness checks a snapshot against the run as it is now, as
// cool-workflow's loadNodeSnapshot does (first match wins): the node gone or
// an artifact path gone is absent, a different source fingerprint is stale.
// The snapshot's own mode (strict or not) is the one recomputed.
func (r *Run) Freshness(s *Snapshot) (freshness, reason string) {
	n := r.Node(s.NodeID)
	if n == nil {
		return Absent, fmt.Sprintf("source node %s is gone from run %s", s.NodeID, r.ID)
	}
	if reason, gone := r.filesGone(n, s.Body); gone {
		return Absent, reason
	}
	if n.fingerprint(s.Strict) != s.SourceFingerprint {
		return Stale, fmt.Sprintf("source node %s changed since capture", s.NodeID)
	}
	return Valid, ""
}

// filesGone is why a node is absent though it is still in the run: a file it
// references (cool-workflow: an artifact path of the node as it is now;
// crucible: the dispatch file or an output artifact that body, a snapshot's or
// a replay's, recorded) is gone.
func (r *Run) filesGone(n *Node, body *Object) (reason string, gone bool) {
	var missing string
	if r.Kind == KindCrucible {
		missing, gone = r.crucibleMissing(n, body)
	} else {
		missing, gone = r.coolWorkflowMissing(n)
	}
	if !gone {
		return "", false
	}
	return "referenced artifact path is unreadable: " + missing, true
}

// TakeReplay replays a node from its snapshot and writes the replay under
// nodes/snapshots/<node>/replays/<replayId>.json. A snapshot that is not
// valid is refused (snapshot-stale, snapshot-absent) before anything is
// built. The replay's bytes depend on the snapshot alone, but for replayedAt.
func (r *Run) TakeReplay(s *Snapshot, now time.Time) (*Replay, error) {
	if fr, reason := r.Freshness(s); fr != Valid {
		code := CodeSnapshotAbsent
		if fr == Stale {
			code = CodeSnapshotStale
		}
		return nil, &Error{Code: code, Message: reason, Freshness: fr, RunID: r.ID, NodeID: s.NodeID}
	}
	body := Normalize(s.Body).(*Object)
	bodyJSON, _ := StableString(body, true)
	out := FingerprintStrings([]string{bodyJSON})
	rp := &Replay{
		ID:                "replay-" + s.ID + "-" + strings.TrimPrefix(out, "sha256:")[:8],
		RunID:             r.ID,
		NodeID:            s.NodeID,
		SnapshotID:        s.ID,
		ReplayedAt:        ISOTime(now),
		Freshness:         Valid,
		ContractValidated: truthy(body.Vals["contractId"]),
		OutputFingerprint: out,
		Strict:            s.Strict,
		Body:              body,
	}
	if err := r.write(filepath.Join(r.nodeDir(s.NodeID), "replays"), rp.ID, rp.Document()); err != nil {
		return nil, err
	}
	return rp, nil
}

// LoadSnapshot finds a stored snapshot by id, in any node's directory, and
// checks its shape as cool-workflow does when it reads one back.
func (r *Run) LoadSnapshot(id string) (*Snapshot, string, error) {
	path, doc, err := r.find(id, "", "NodeSnapshot")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", &Error{Code: CodeSnapshotNotFound, Freshness: Absent, RunID: r.ID,
				Message: fmt.Sprintf("node snapshot %s not found in run %s", id, r.ID)}
		}
		return nil, "", err
	}
	s := &Snapshot{}
	problem := checkStrings(doc, map[string]*string{"snapshotId": &s.ID, "runId": &s.RunID, "nodeId": &s.NodeID,
		"capturedAt": &s.CapturedAt, "sourceFingerprint": &s.SourceFingerprint}, "snapshotId", "runId", "nodeId", "capturedAt", "sourceFingerprint")
	if problem == "" {
		problem = r.checkTail(doc, &s.Strict, &s.Body)
	}
	if problem != "" {
		return nil, "", r.invalidRecord(path, "NodeSnapshot", problem, doc)
	}
	return s, path, nil
}

// LoadReplay finds a stored replay by id and checks its shape.
func (r *Run) LoadReplay(id string) (*Replay, string, error) {
	path, doc, err := r.find(id, "replays", "NodeReplayRun")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", &Error{Code: CodeReplayNotFound, Freshness: Absent, RunID: r.ID,
				Message: fmt.Sprintf("node replay %s not found in run %s", id, r.ID)}
		}
		return nil, "", err
	}
	rp := &Replay{}
	problem := checkStrings(doc, map[string]*string{"replayId": &rp.ID, "runId": &rp.RunID, "nodeId": &rp.NodeID,
		"snapshotId": &rp.SnapshotID, "replayedAt": &rp.ReplayedAt, "outputFingerprint": &rp.OutputFingerprint},
		"replayId", "runId", "nodeId", "snapshotId", "replayedAt", "outputFingerprint")
	if problem == "" {
		fr, _ := doc.Vals["freshness"].(string)
		cv, isBool := doc.Vals["contractValidated"].(bool)
		switch {
		case fr != Valid && fr != Stale && fr != Absent:
			problem = "freshness must be a valid NodeSnapshotFreshness"
		case !isBool:
			problem = "contractValidated must be a boolean"
		default:
			rp.Freshness, rp.ContractValidated = fr, cv
			problem = r.checkTail(doc, &rp.Strict, &rp.Body)
		}
	}
	if problem != "" {
		return nil, "", r.invalidRecord(path, "NodeReplayRun", problem, doc)
	}
	return rp, path, nil
}

// invalidRecord is record-shape-invalid, naming the node the record names
// when it names one (doc nil: it could not be read as an object).
func (r *Run) invalidRecord(path, typ, problem string, doc *Object) error {
	e := &Error{Code: CodeRecordInvalid, RunID: r.ID, Message: fmt.Sprintf("%s: invalid persisted %s: %s", path, typ, problem)}
	if doc != nil {
		e.NodeID, _ = doc.Vals["nodeId"].(string)
	}
	return e
}

// find scans nodes/snapshots/*/[sub/]<safe id>.json, node directories in name
// order, as cool-workflow's readNodeSnapshot does, and parses the first found.
func (r *Run) find(id, sub, typ string) (string, *Object, error) {
	entries, err := os.ReadDir(r.snapshotsDir())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", nil, err
	}
	for _, e := range entries {
		path := filepath.Join(r.snapshotsDir(), e.Name(), sub, SafeFileName(id)+".json")
		if !isFile(path) {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return "", nil, err
		}
		v, err := ParseJSON(data)
		if err != nil {
			return "", nil, r.invalidRecord(path, typ, err.Error(), nil)
		}
		doc, ok := v.(*Object)
		if !ok {
			return "", nil, r.invalidRecord(path, typ, "not an object", nil)
		}
		if sv, _ := doc.Vals["schemaVersion"].(float64); sv != 1 {
			return "", nil, r.invalidRecord(path, typ, "schemaVersion must equal 1", doc)
		}
		return path, doc, nil
	}
	return "", nil, fs.ErrNotExist
}

func checkStrings(doc *Object, dst map[string]*string, order ...string) string {
	for _, k := range order {
		s, ok := doc.Vals[k].(string)
		if !ok {
			return k + " must be a string"
		}
		*dst[k] = s
	}
	return ""
}

// checkTail reads strict and body, and checks that the record belongs to
// this run.
func (r *Run) checkTail(doc *Object, strict *bool, body **Object) string {
	if v, ok := doc.Get("strict"); ok {
		b, isBool := v.(bool)
		if !isBool {
			return "strict must be a boolean"
		}
		*strict = b
	}
	b, ok := doc.Vals["body"].(*Object)
	if !ok {
		return "body must be a NodeSnapshotBody object"
	}
	if p := bodyProblem(b, r.Kind == KindCoolWorkflow); p != "" {
		return "body." + p
	}
	*body = b
	if id, _ := doc.Vals["runId"].(string); id != r.ID {
		return fmt.Sprintf("runId %q is not this run's (%s)", id, r.ID)
	}
	return ""
}
