package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/gitexec"
	"github.com/rewind-cli/rewind/manifest"
	"github.com/rewind-cli/rewind/replay"
	"github.com/rewind-cli/rewind/replay/node"
	"github.com/rewind-cli/rewind/replay/portable"
	"github.com/rewind-cli/rewind/replay/state"
)

// The --json contract, in one place: under --json every command prints
// exactly one JSON document on stdout, whatever happens. A command prints its
// own document; when it ends with an error before printing one (a usage error
// found while parsing the command line included), run prints the error
// document here:
//
//	{"error": {"code": "...", "exit": N, "message": "...", "hints": [...], "details": null}}
//
// beside the usual `rewind: ...` lines on stderr, with the same exit code.

// errorJSON is the error document's one member.
type errorJSON struct {
	Code    string   `json:"code"`
	Exit    int      `json:"exit"`
	Message string   `json:"message"`
	Hints   []string `json:"hints"`
	Details any      `json:"details"`
}

// nodeDetailsJSON is what a node error adds: cool-workflow's freshness and the
// run and node it names.
type nodeDetailsJSON struct {
	Freshness *string `json:"freshness"`
	RunID     *string `json:"run_id"`
	NodeID    *string `json:"node_id"`
}

// wantsJSON reports whether the command line asks for --json, read from the
// raw arguments, so that even an error found while parsing them (an unknown
// command, a bad flag value) is printed as the error document.
func wantsJSON(args []string) bool {
	want := false
	for _, a := range args[min(1, len(args)):] {
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "json" {
			continue
		}
		if !hasValue {
			want = true
			continue
		}
		if b, err := strconv.ParseBool(value); err == nil {
			want = b
		}
	}
	return want
}

// countingWriter counts what a command wrote on stdout, so run knows whether
// the command printed its document before it failed.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeErrorJSON prints err's error document (one line) on w.
func writeErrorJSON(w io.Writer, err error, exit int, hints []string) error {
	doc := errorJSON{Code: errorCode(err, exit), Exit: exit, Message: err.Error(), Hints: append([]string{}, hints...)}
	if exit == exitInterrupted {
		doc.Message = "interrupted"
	}
	var ne *node.Error
	if errors.As(err, &ne) {
		doc.Message = ne.Message
		doc.Details = nodeDetailsJSON{Freshness: strPtr(ne.Freshness), RunID: strPtr(ne.RunID), NodeID: strPtr(ne.NodeID)}
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(map[string]errorJSON{"error": doc})
}

// strPtr is s, or nil (JSON null) for "".
func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// errorCode is the error's stable name in the error document: what a script
// branches on, with the exit code. The README lists them; a new one is added
// there too.
func errorCode(err error, exit int) string {
	var ce *cliError
	if errors.As(err, &ce) && ce.name != "" {
		return ce.name
	}
	var (
		ne          *node.Error
		busy        *checkpoint.BusyError
		refErr      *checkpoint.RefError
		interrupted *checkpoint.InterruptedError
		failed      *checkpoint.RestoreFailedError
		readOnly    *checkpoint.ReadOnlyError
		foreign     *checkpoint.ForeignStoreError
		adopt       *checkpoint.AdoptError
		verr        *gitexec.VersionError
		crashed     *manifest.CrashedError
		taken       *manifest.SessionTakenError
		de          *manifest.DispatchError
		schema      *state.SchemaError
		validation  *state.ValidationError
	)
	switch {
	case errors.Is(err, context.Canceled) || exit == exitInterrupted:
		return "interrupted"
	case errors.As(err, &ne):
		// cool-workflow's codes, in the contract's snake_case.
		return strings.ReplaceAll(ne.Code, "-", "_")
	case errors.As(err, &busy):
		return "busy"
	case errors.As(err, &interrupted):
		return "restore_interrupted"
	case errors.As(err, &failed):
		return "restore_failed"
	case errors.As(err, &readOnly):
		return "store_read_only"
	case errors.As(err, &foreign):
		return "store_foreign"
	case errors.As(err, &adopt):
		return "adopt_refused"
	case errors.Is(err, checkpoint.ErrStoreInGitDir):
		return "store_in_git_dir"
	case errors.Is(err, checkpoint.ErrRefusedWorkTree):
		return "work_tree_refused"
	case errors.Is(err, checkpoint.ErrBadLabel):
		return "bad_label"
	case errors.Is(err, checkpoint.ErrBadPath):
		return "bad_path"
	case errors.As(err, &refErr) && errors.Is(err, checkpoint.ErrAmbiguousRef):
		return "checkpoint_ambiguous"
	case errors.As(err, &refErr) && errors.Is(err, checkpoint.ErrNoCheckpoint):
		return "no_checkpoints"
	case errors.As(err, &refErr):
		return "checkpoint_not_found"
	case errors.Is(err, checkpoint.ErrBadBundle), errors.Is(err, portable.ErrBadMeta):
		return "bundle_invalid"
	case errors.Is(err, checkpoint.ErrNoProjectID):
		return "no_project_id"
	case errors.Is(err, checkpoint.ErrRemote):
		return "remote_failed"
	case errors.Is(err, gitexec.ErrGitNotFound):
		return "git_not_found"
	case errors.As(err, &verr):
		return "git_too_old"
	case errors.As(err, &crashed) && crashed.Live == manifest.Running:
		return "pipeline_running"
	case errors.As(err, &crashed):
		return "pipeline_crashed"
	case errors.As(err, &taken):
		return "session_taken"
	case errors.Is(err, manifest.ErrNoMarker):
		return "no_pipeline"
	case errors.Is(err, manifest.ErrNoManifest):
		return "no_manifest"
	case errors.Is(err, manifest.ErrEmpty), errors.Is(err, replay.ErrEmpty):
		return "manifest_empty"
	case errors.As(err, &de) && de.Usage:
		return "usage"
	case errors.As(err, &de):
		return "dispatch_refused"
	case errors.Is(err, replay.ErrNoBoundary):
		return "no_boundary"
	case errors.Is(err, replay.ErrUnfaithful):
		return "replay_unfaithful"
	case errors.Is(err, replay.ErrHeadRefused):
		return "head_move_refused"
	case errors.Is(err, node.ErrNoRun):
		return "no_run"
	case errors.Is(err, state.ErrInterrupted):
		return "state_interrupted"
	case errors.Is(err, state.ErrCorrupt), errors.As(err, &schema):
		return "state_corrupt"
	case errors.Is(err, state.ErrNoState):
		return "no_state"
	case errors.As(err, &validation):
		return "state_invalid"
	}
	switch exit {
	case exitUsage:
		return "usage"
	case exitConfirm:
		return "confirmation_needed"
	case exitGuard:
		return "guard"
	case exitBusy:
		return "busy"
	}
	return "failure"
}

// named gives err a stable code for the error document, keeping its exit code
// and hints. err is a *cliError (usageErrorf, withHint, silentExit, ...) or an
// error that carries none: a wrapper around a *cliError would hide its code
// and hints from report.
func named(code string, err error) error {
	if err == nil {
		return nil
	}
	var ce *cliError
	if errors.As(err, &ce) && ce == err {
		ce.name = code
		return ce
	}
	return &cliError{err: err, name: code}
}

// nullIfEmpty is s, or JSON null for "": an absent value is null, never "".
func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}
