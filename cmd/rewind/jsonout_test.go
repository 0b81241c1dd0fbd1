package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/manifest"
	"github.com/rewind-cli/rewind/replay/node"
)

func TestWantsJSON(t *testing.T) {
	for _, c := range []struct {
		args string
		want bool
	}{
		{"rewind --json version", true},
		{"rewind version --json", true},
		{"rewind version -json", true},
		{"rewind version --json=true", true},
		{"rewind version --json=1", true},
		{"rewind version --json=false", false},
		{"rewind --json version --json=false", false},
		{"rewind version", false},
		{"rewind checkpoint show -- --json", false},
		{"rewind checkpoint show x -- --json", false},
		{"rewind checkpoint create --reason json", false},
		{"rewind --jsonx version", false},
		{"--json", false}, // the program name is never a flag
	} {
		if got := wantsJSON(strings.Fields(c.args)); got != c.want {
			t.Errorf("%s: %v, want %v", c.args, got, c.want)
		}
	}
	if wantsJSON(nil) {
		t.Error("no arguments: want false")
	}
}

func FuzzWantsJSON(f *testing.F) {
	f.Add("rewind\x00--json\x00version")
	f.Add("rewind\x00version\x00--json=false\x00--\x00--json")
	f.Fuzz(func(t *testing.T, joined string) {
		args := strings.Split(joined, "\x00")
		got := wantsJSON(args)
		// Whatever follows a "--" never changes the answer.
		if got != wantsJSON(append(append([]string{}, args...), "--", "--json")) {
			t.Errorf("%q: an argument after -- changed the answer", args)
		}
	})
}

func TestErrorCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		exit int
		want string
	}{
		{errors.New("x"), exitFailure, "failure"},
		{usageErrorf("x"), exitUsage, "usage"},
		{named("unknown_flag", usageErrorf("x")), exitUsage, "unknown_flag"},
		{withHint(named("unknown_flag", usageErrorf("x")), "h"), exitUsage, "unknown_flag"},
		{errors.New("x"), exitConfirm, "confirmation_needed"},
		{errors.New("x"), exitGuard, "guard"},
		{fmt.Errorf("wrapped: %w", context.Canceled), exitInterrupted, "interrupted"},
		{&checkpoint.RefError{Ref: "x", Err: checkpoint.ErrUnknownRef}, exitFailure, "checkpoint_not_found"},
		{&checkpoint.RefError{Ref: "x", Err: checkpoint.ErrAmbiguousRef}, exitFailure, "checkpoint_ambiguous"},
		{&checkpoint.RefError{Ref: "x", Err: checkpoint.ErrNoCheckpoint}, exitFailure, "no_checkpoints"},
		{fmt.Errorf("s: %w", manifest.ErrNoMarker), exitFailure, "no_pipeline"},
		{&manifest.DispatchError{Msg: "m"}, exitFailure, "dispatch_refused"},
		{&manifest.DispatchError{Msg: "m", Usage: true}, exitUsage, "usage"},
		{&node.Error{Code: node.CodeSnapshotStale}, exitGuard, "snapshot_stale"},
	} {
		if got := errorCode(c.err, c.exit); got != c.want {
			t.Errorf("%v (exit %d): %q, want %q", c.err, c.exit, got, c.want)
		}
	}
}

// TestErrorDocument: the document is one line, every member there, hints []
// when none, the node's details when it is a node error.
func TestErrorDocument(t *testing.T) {
	var b bytes.Buffer
	if err := writeErrorJSON(&b, errors.New("boom <&>"), exitFailure, nil); err != nil {
		t.Fatal(err)
	}
	if want := `{"error":{"code":"failure","exit":1,"message":"boom <&>","hints":[],"details":null}}` + "\n"; b.String() != want {
		t.Errorf("got %s want %s", b.String(), want)
	}
	b.Reset()
	writeErrorJSON(&b, &node.Error{Code: node.CodeNodeAbsent, Message: "gone", Freshness: node.Absent, RunID: "r"}, exitFailure, []string{"h"})
	var doc struct{ Error errorJSON }
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Error.Code != "node_absent" || doc.Error.Message != "gone" || fmt.Sprint(doc.Error.Details) != "map[freshness:absent node_id:<nil> run_id:r]" {
		t.Errorf("node error: %+v", doc.Error)
	}
}

// TestErrorCodesInREADME: every code the error document can carry is in the
// README's table, and the table names no code that does not exist.
func TestErrorCodesInREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| (`[a-z_]+`(?:, `[a-z_]+`)*) \\| [0-9, ]+ \\|").FindAllStringSubmatch(string(readme), -1) {
		for _, c := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(m[1], -1) {
			listed[c[1]] = true
		}
	}
	used := map[string]bool{}
	files, _ := filepath.Glob("*.go")
	codeRE := regexp.MustCompile(`(?:return|named\() ?"([a-z][a-z0-9_]*)"`)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, _ := os.ReadFile(f)
		for _, m := range codeRE.FindAllStringSubmatch(string(src), -1) {
			if f == "jsonout.go" || strings.HasPrefix(m[0], "named") {
				used[m[1]] = true
			}
		}
	}
	// The node codes, cool-workflow's in snake_case.
	for _, c := range []string{node.CodeNodeAbsent, node.CodeNodeInvalid, node.CodeSnapshotNotFound, node.CodeReplayNotFound,
		node.CodeSnapshotStale, node.CodeSnapshotAbsent, node.CodeRecordInvalid} {
		used[strings.ReplaceAll(c, "-", "_")] = true
	}
	var missing, stale []string
	for c := range used {
		if !listed[c] {
			missing = append(missing, c)
		}
	}
	for c := range listed {
		if !used[c] {
			stale = append(stale, c)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 || len(stale) > 0 {
		t.Errorf("README error codes: missing %v; listed but never produced %v", missing, stale)
	}
}
