package main

import (
	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/replay"
)

// replayOutcome is what a replay did, beyond its plan, for `replay --json`: the
// restore, the state block, and each re-dispatch with its outcome. The
// document is printed once, when the replay ends (a replay stopped by a failed
// dispatch included: it says which).
type replayOutcome struct {
	mode      string // "dry_run", "delegate" or "exec"
	session   string // the replay session; "" for a dry run
	restored  *checkpoint.Restored
	headMoved bool
	csbFile   string
	csb       string
	waves     []replay.Wave
	taken     map[int]*checkpoint.Checkpoint // checkpoints taken before wave i
	outcomes  map[int]replay.Outcome         // by the new seq
	completed int
	result    string // "planned", "nothing_to_resume", "delegated", "completed" or "stopped"
}

func newReplayOutcome(mode string) *replayOutcome {
	return &replayOutcome{mode: mode, taken: map[int]*checkpoint.Checkpoint{}, outcomes: map[int]replay.Outcome{}}
}

// replayDoc is `replay --json`: the plan (planJSON) and what the replay did.
func replayDoc(r replay.Report, run *replayOutcome) map[string]any {
	doc := planJSON(r)
	doc["mode"] = run.mode
	doc["result"] = run.result
	doc["replay_session"] = strPtr(run.session)
	doc["csb_file"] = strPtr(run.csbFile)
	doc["csb"] = strPtr(run.csb)
	var restored any
	if res := run.restored; res != nil {
		restored = map[string]any{"checkpoint": toJSON(res.Target), "safety_checkpoint": toJSON(res.Safety),
			"write": nonNil(res.Write), "remove": nonNil(res.Remove), "head_moved": run.headMoved}
	}
	doc["restored"] = restored
	if plan, ok := doc["restore"].(map[string]any); ok && run.restored != nil {
		// With --yes the restore is not previewed: the plan's lists are what
		// the restore did, not the empty lists of a preview never made.
		plan["write"], plan["remove"] = nonNil(run.restored.Write), nonNil(run.restored.Remove)
	}
	waves := []any{}
	for i, w := range run.waves {
		jobs := []any{}
		for _, j := range w.Jobs {
			job := map[string]any{"seq": j.Seq, "replay_of": j.ReplayOf, "role": strPtr(j.From.Role), "phase": strPtr(j.From.Phase),
				"task": j.From.Task, "dispatch_file": j.DispatchFile, "status": nil, "exit_code": nil, "summary": nil, "output_chars": nil, "duration_s": nil}
			if out, ok := run.outcomes[j.Seq]; ok {
				if out.NotSent {
					job["status"] = "not_sent"
				} else {
					job["status"], job["exit_code"], job["summary"] = out.Status, out.ExitCode, strPtr(out.Summary)
					job["output_chars"], job["duration_s"] = out.OutputChars, out.Duration
				}
			}
			jobs = append(jobs, job)
		}
		var taken any
		if cp := run.taken[i]; cp != nil {
			taken = toJSON(cp)
		}
		waves = append(waves, map[string]any{"checkpoint_reason": strPtr(w.Checkpoint), "checkpoint": taken, "jobs": jobs})
	}
	doc["waves"] = waves
	var completed any
	if run.mode == "exec" && run.result != "nothing_to_resume" {
		completed = run.completed
	}
	doc["completed_count"] = completed
	return doc
}

// replayMode is the mode a replay's flags ask for.
func replayMode(dryRun bool, exec string) string {
	switch {
	case dryRun:
		return "dry_run"
	case exec != "":
		return "exec"
	}
	return "delegate"
}
