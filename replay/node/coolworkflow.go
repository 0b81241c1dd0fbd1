package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// projectedFields are the 13 fields of cool-workflow's rawNodeProjection, the
// snapshot body (no schemaVersion, createdAt or updatedAt).
var projectedFields = []string{
	"id", "kind", "status", "loopStage", "inputs", "outputs", "artifacts",
	"evidence", "errors", "parents", "children", "contractId", "metadata",
}

// openCoolWorkflow reads <dir>/state.json. Its nodes are state.json's nodes[]
// as they are: cool-workflow's loader fills in run defaults, never node ones.
func openCoolWorkflow(dir, workTree string) (*Run, error) {
	src := filepath.Join(dir, "state.json")
	data, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	v, err := ParseJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src, err)
	}
	state, ok := v.(*Object)
	if !ok {
		return nil, fmt.Errorf("%s: not a cool-workflow run state: not a JSON object", src)
	}
	if sv, ok := state.Get("schemaVersion"); ok {
		if f, isNum := sv.(float64); !isNum || (f != 0 && f != 1) {
			return nil, fmt.Errorf("%s: unsupported run-state schemaVersion %s (this reads 0 and 1)", src, AppendCompact(nil, sv))
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r := &Run{Kind: KindCoolWorkflow, Dir: abs, Source: src, byID: map[string]*Node{}, workTree: projectRoot(abs, workTree)}
	// The id defaults to the run directory's name, as the loader's does.
	r.ID = filepath.Base(abs)
	if id, ok := state.Vals["id"].(string); ok && id != "" {
		r.ID = id
	}
	nodes, present := state.Get("nodes")
	if !present {
		return r, nil
	}
	list, ok := nodes.([]any)
	if !ok {
		return nil, fmt.Errorf("%s: nodes is not an array", src)
	}
	for _, e := range list {
		raw, ok := e.(*Object)
		if !ok {
			continue
		}
		id, ok := raw.Vals["id"].(string)
		if !ok {
			continue // no lookup by a command-line argument can match it
		}
		r.add(coolWorkflowNode(id, raw))
	}
	return r, nil
}

// projectRoot is the directory relative artifact paths of the run in dir are
// taken from: <root> for a run at <root>/.cw/runs/<id>, the directory
// cool-workflow runs from (it finds runs in <cwd>/.cw/runs/ and checks
// artifact paths from its cwd), whatever the current directory is; else the
// work tree.
func projectRoot(dir, workTree string) string {
	runs := filepath.Dir(dir)
	if filepath.Base(runs) == "runs" && filepath.Base(filepath.Dir(runs)) == ".cw" {
		return filepath.Dir(filepath.Dir(runs))
	}
	return workTree
}

// jsTemplate is `${v}` for a property that may be missing.
func jsTemplate(o *Object, key string) string {
	v, ok := o.Get(key)
	if !ok {
		return "undefined"
	}
	return ToString(v)
}

func coolWorkflowNode(id string, raw *Object) *Node {
	n := &Node{ID: id}
	n.Kind, _ = raw.Vals["kind"].(string)
	n.Status, _ = raw.Vals["status"].(string)

	n.projection = NewObject()
	for _, k := range projectedFields {
		if v, ok := raw.Get(k); ok {
			n.projection.Set(k, v)
		}
	}
	n.content = "content:" + sha256Hex(sortedCompact(nil, raw))

	// sourceFingerprint's strings, raw: `node:${id}:${status}:${updatedAt}`,
	// `artifact:${a.id}:${a.path}`, `evidence:${e.id}:${e.path || ""}`.
	n.inputs = []string{"node:" + id + ":" + jsTemplate(raw, "status") + ":" + jsTemplate(raw, "updatedAt")}
	artifacts, aok := objectArray(raw, "artifacts")
	evidence, eok := objectArray(raw, "evidence")
	for _, a := range artifacts {
		n.inputs = append(n.inputs, "artifact:"+jsTemplate(a, "id")+":"+jsTemplate(a, "path"))
		if p := a.Vals["path"]; truthy(p) {
			n.artifacts = append(n.artifacts, artifactRef{id: jsTemplate(a, "id"), path: p})
		}
	}
	for _, e := range evidence {
		path := ""
		if p := e.Vals["path"]; truthy(p) {
			path = ToString(p)
		}
		n.inputs = append(n.inputs, "evidence:"+jsTemplate(e, "id")+":"+path)
	}
	switch {
	case !aok:
		n.invalid = "artifacts must be an array of objects"
	case !eok:
		n.invalid = "evidence must be an array of objects"
	default:
		n.invalid = bodyProblem(n.body(), true)
	}
	return n
}

// objectArray returns o[key] when it is an array of objects.
func objectArray(o *Object, key string) ([]*Object, bool) {
	list, ok := o.Vals[key].([]any)
	if !ok {
		return nil, false
	}
	out := make([]*Object, 0, len(list))
	for _, e := range list {
		obj, ok := e.(*Object)
		if !ok {
			return nil, false
		}
		out = append(out, obj)
	}
	return out, true
}

// bodyProblem is cool-workflow's NodeSnapshotBody shape guard: the reason a
// body would be refused when read back, or "". Crucible bodies have no
// loopStage.
func bodyProblem(body *Object, needLoopStage bool) string {
	str := []string{"id", "kind", "status"}
	if needLoopStage {
		str = append(str, "loopStage")
	}
	for _, k := range str {
		if _, ok := body.Vals[k].(string); !ok {
			return k + " must be a string"
		}
	}
	for _, k := range []string{"inputs", "outputs"} {
		if _, ok := body.Vals[k].(*Object); !ok {
			return k + " must be an object"
		}
	}
	for _, k := range []string{"artifacts", "evidence", "errors"} {
		if _, ok := objectArray(body, k); !ok {
			return k + " must be an array of objects"
		}
	}
	for _, k := range []string{"parents", "children"} {
		list, ok := body.Vals[k].([]any)
		if !ok {
			return k + " must be an array of strings"
		}
		for _, e := range list {
			if _, ok := e.(string); !ok {
				return k + " must be an array of strings"
			}
		}
	}
	return ""
}

// coolWorkflowMissing is the first artifact of the node's with a path that
// does not exist now (fs.existsSync: a path that is not a string never does).
// Relative paths are taken from the project root (see projectRoot).
func (r *Run) coolWorkflowMissing(n *Node) (string, bool) {
	for _, a := range n.artifacts {
		p, ok := a.path.(string)
		if ok && !strings.ContainsRune(p, 0) {
			if !filepath.IsAbs(p) {
				p = filepath.Join(r.workTree, p)
			}
			if _, err := os.Stat(p); err == nil {
				continue
			}
		}
		return a.id, true
	}
	return "", false
}
