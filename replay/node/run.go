package node

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/rewind-cli/rewind/manifest"
)

// Run kinds.
const (
	KindCoolWorkflow = "cool-workflow"
	KindCrucible     = "crucible"
)

// Run is a source of nodes: a cool-workflow run or a crucible dispatch
// directory, as read at one moment.
type Run struct {
	Kind   string // KindCoolWorkflow or KindCrucible
	ID     string // cool-workflow: state.json's id; crucible: the dispatch directory's name
	Dir    string // the run directory; snapshots live under Dir/nodes/snapshots
	Source string // the file the nodes come from: state.json or manifest.jsonl
	// Notes say how the run was found (which of several manifests, say).
	Notes []string

	nodes []*Node
	byID  map[string]*Node
	// workTree resolves relative artifact paths of cool-workflow nodes, as
	// cool-workflow resolves them against its working directory: the root
	// holding .cw/runs/<id>, else the work tree (see projectRoot).
	workTree string
}

// Node is one node of a run.
type Node struct {
	ID     string
	Kind   string // as listed ("" when the node has none)
	Status string

	// projection is the raw projection (before Normalize) that the body is
	// made of; invalid says why it cannot be snapshotted ("" when it can).
	projection *Object
	invalid    string
	// inputs are the raw strings the source fingerprint hashes; content is the
	// strict mode's extra one.
	inputs  []string
	content string
	// artifacts are a cool-workflow node's artifacts with a path, checked for
	// existence before a replay.
	artifacts []artifactRef
	// files names a crucible node's files by artifact id ("dispatch-file",
	// "result", "stderr"), whether they exist or not (see crucibleMissing).
	files map[string]string
}

type artifactRef struct {
	id   string
	path any
}

// Nodes returns the run's nodes in their order in the source.
func (r *Run) Nodes() []*Node { return r.nodes }

// Node returns the node with id, or nil.
func (r *Run) Node(id string) *Node { return r.byID[id] }

// StrictByDefault reports whether strict mode is the default for the run.
func (r *Run) StrictByDefault() bool { return r.Kind == KindCrucible }

func (r *Run) add(n *Node) {
	if _, dup := r.byID[n.ID]; dup {
		return // the first node of an id wins, as cool-workflow's find() takes it
	}
	r.nodes = append(r.nodes, n)
	r.byID[n.ID] = n
}

// ErrNoRun means a RUN argument names neither kind of run.
var ErrNoRun = errors.New("not a cool-workflow run (no state.json) nor a dispatch directory (no manifest.jsonl)")

// safeRunID is cool-workflow's rule for a run id: one path segment.
var safeRunID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9._:-]+$`) })

// Open resolves path and reads its run: a cool-workflow run directory or its
// state.json; a cool-workflow run id, looked up in <workTree>/.cw/runs/; or
// anything `rewind manifest show` takes for a crucible run (a manifest.jsonl,
// a dispatch directory, a scratch directory with .pipeline-active, a directory
// of dispatch directories). Relative artifact paths of cool-workflow nodes are
// taken from <root> for a run at <root>/.cw/runs/<id>, else from workTree.
func Open(path, workTree string) (*Run, error) {
	fi, statErr := os.Stat(path)
	switch {
	case statErr == nil && fi.IsDir() && isFile(filepath.Join(path, "state.json")):
		return openCoolWorkflow(path, workTree)
	case statErr == nil && !fi.IsDir() && filepath.Base(path) == "state.json":
		return openCoolWorkflow(filepath.Dir(path), workTree)
	case statErr != nil && safeRunID().MatchString(path) && path != "." && path != "..":
		dir := filepath.Join(workTree, ".cw", "runs", path)
		if isFile(filepath.Join(dir, "state.json")) {
			return openCoolWorkflow(dir, workTree)
		}
	}
	if statErr != nil {
		if errors.Is(statErr, fs.ErrNotExist) {
			return nil, fmt.Errorf("%s: no such file or directory, and no run %s in %s", path, path, filepath.Join(workTree, ".cw", "runs"))
		}
		return nil, statErr
	}
	loc, err := manifest.Locate(path)
	if errors.Is(err, manifest.ErrNoManifest) {
		return nil, fmt.Errorf("%s: %w", path, ErrNoRun)
	}
	if err != nil {
		return nil, err
	}
	return openCrucible(loc)
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

// snapshotsDir is where the snapshots of all nodes of the run live.
func (r *Run) snapshotsDir() string { return filepath.Join(r.Dir, "nodes", "snapshots") }

// nodeDir is where one node's snapshots live.
func (r *Run) nodeDir(nodeID string) string {
	return filepath.Join(r.snapshotsDir(), SafeFileName(nodeID))
}

var unsafeRun = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-zA-Z0-9_.:-]+`) })

// SafeFileName is cool-workflow's safeFileName: every run of characters
// outside [a-zA-Z0-9_.:-] becomes one "_".
func SafeFileName(s string) string { return unsafeRun().ReplaceAllLiteralString(s, "_") }

// maxFileName is the longest file name Linux and macOS file systems take,
// in bytes.
const maxFileName = 255

// MaxSafeNodeID is the longest SafeFileName of a node id that names all of the
// node's files: its longest, a replay's
// "replay-snap-<safe>-<12 hex>-<8 hex>.json", is that plus 39 bytes, and it
// is written through a temporary ".<name>.tmp-<up to 10 digits>", 16 more.
const MaxSafeNodeID = maxFileName - len(".replay-snap-") - len("-123456789abc-12345678.json.tmp-1234567890")

// Snapshots lists the ids of the snapshots stored for a node, sorted: the
// files in its directory that record it as their nodeId. Ids whose safe names
// collide (a/b, "a b") share a directory; a file that records no node is no
// node's.
func (r *Run) Snapshots(nodeID string) ([]string, error) {
	return listJSON(r.nodeDir(nodeID), nodeID)
}

// Replays lists the ids of the replays stored for a node, sorted, as
// Snapshots does.
func (r *Run) Replays(nodeID string) ([]string, error) {
	return listJSON(filepath.Join(r.nodeDir(nodeID), "replays"), nodeID)
}

// recordsNode reports whether the JSON file at path is an object whose
// nodeId is nodeID.
func recordsNode(path, nodeID string) bool {
	data, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	v, err := ParseJSON(data)
	if err != nil {
		return false
	}
	doc, ok := v.(*Object)
	if !ok {
		return false
	}
	id, ok := doc.Vals["nodeId"].(string)
	return ok && id == nodeID
}

func listJSON(dir, nodeID string) ([]string, error) {
	if len(filepath.Base(filepath.Dir(dir))) > maxFileName || len(filepath.Base(dir)) > maxFileName {
		return []string{}, nil // no such directory can exist, so nothing was stored there
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, err
	}
	ids := []string{}
	for _, e := range entries {
		name := e.Name()
		if e.Type().IsRegular() && strings.HasSuffix(name, ".json") && !strings.HasPrefix(name, ".") &&
			recordsNode(filepath.Join(dir, name), nodeID) {
			ids = append(ids, strings.TrimSuffix(name, ".json"))
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// fingerprint is the node's source fingerprint, with strict mode's content
// hash or without.
func (n *Node) fingerprint(strict bool) string {
	in := n.inputs
	if strict {
		in = append(append([]string(nil), in...), n.content)
	}
	return FingerprintStrings(in)
}

// body is the snapshot body: the normalized projection.
func (n *Node) body() *Object { return Normalize(n.projection).(*Object) }

// ListDocument describes the run and its nodes, with the snapshots and
// replays stored for each.
func (r *Run) ListDocument(strict bool) (*Object, error) {
	doc := NewObject()
	doc.Set("schemaVersion", float64(1))
	doc.Set("runId", r.ID)
	doc.Set("runKind", r.Kind)
	doc.Set("runDir", r.Dir)
	doc.Set("source", r.Source)
	doc.Set("strict", strict)
	nodes := make([]any, 0, len(r.nodes))
	for _, n := range r.nodes {
		o := NewObject()
		o.Set("nodeId", n.ID)
		o.Set("kind", n.Kind)
		o.Set("status", n.Status)
		snaps, err := r.Snapshots(n.ID)
		if err != nil {
			return nil, err
		}
		replays, err := r.Replays(n.ID)
		if err != nil {
			return nil, err
		}
		o.Set("snapshots", stringList(snaps))
		o.Set("replays", stringList(replays))
		nodes = append(nodes, o)
	}
	doc.Set("nodes", nodes)
	return doc, nil
}

func stringList(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}
