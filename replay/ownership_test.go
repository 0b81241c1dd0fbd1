package replay

import (
	"reflect"
	"testing"
	"time"
)

func TestCheckpointsOf(t *testing.T) {
	cps := []Checkpoint{
		{ID: "a", Reason: "pre-wave-1", Source: "build"},
		{ID: "b", Reason: "pre-qg-fix-round-1", Source: "quality-gate"},
		{ID: "c", Reason: "pre-wave-2", Source: ""},
		{ID: "d", Reason: "pre-restore-safety", Source: "checkpoint"},
	}
	ids := func(cps []Checkpoint) []string {
		var out []string
		for _, cp := range cps {
			out = append(out, cp.ID)
		}
		return out
	}
	own, unsourced, foreign := CheckpointsOf(cps, "build")
	if !reflect.DeepEqual(ids(own), []string{"a", "c"}) || !reflect.DeepEqual(ids(unsourced), []string{"c"}) ||
		!reflect.DeepEqual(ids(foreign), []string{"b", "d"}) {
		t.Errorf("own %v, unsourced %v, foreign %v", ids(own), ids(unsourced), ids(foreign))
	}
	own, unsourced, foreign = CheckpointsOf(cps, "")
	if len(own) != 4 || unsourced != nil || foreign != nil {
		t.Errorf("unknown skill: own %v, unsourced %v, foreign %v", ids(own), ids(unsourced), ids(foreign))
	}
}

func TestInFlightReplays(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 11, 0, 0, 0, time.UTC)
	attempts := []Attempt{
		{Seq: 4, Status: "dispatched", Time: t0.Add(-time.Hour)},
		{Seq: 5, Status: "dispatched", Time: t0.Add(-time.Hour)},
		{Seq: 6, Status: "completed", ReplayOf: intp(4), ReplaySession: "r1", Time: t0},
		{Seq: 7, Status: "dispatched", ReplayOf: intp(5), ReplaySession: "r1", Time: t0.Add(time.Minute)},
		{Seq: 8, Status: "dispatched", ReplaySession: "r0", Time: t0, TimeFrom: "header"},
		{Seq: 9, Status: "dispatched", ReplaySession: "r2", Time: t0, TimeFrom: "header"},
	}
	got := InFlightReplays(GroupAttempts(attempts), "r2")
	if len(got) != 2 || got[0].Session != "r0" || got[1].Session != "r1" ||
		len(got[1].Attempts) != 1 || got[1].Attempts[0].Seq != 7 {
		t.Errorf("in flight: %+v", got)
	}
	// The original run's own in-flight dispatches are no replay session's.
	if got := InFlightReplays(GroupAttempts(attempts[:2]), ""); len(got) != 0 {
		t.Errorf("original run taken for a replay: %+v", got)
	}
}
