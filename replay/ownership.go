package replay

import "sort"

// This file keeps one pipeline from taking another's state: the checkpoints
// it may resume from, and the replay sessions still at work on its manifest.

// CheckpointsOf splits checkpoints by the skill that took them: own holds
// those of skill and those with no source (a store written by hand; the caller
// notes them), unsourced those of own without a source, foreign those another
// skill took in the same work tree (a quality-gate fix round's checkpoint is no
// state of the build pipeline). With skill unknown, every checkpoint is own.
func CheckpointsOf(cps []Checkpoint, skill string) (own, unsourced, foreign []Checkpoint) {
	for _, cp := range cps {
		switch {
		case skill == "":
			own = append(own, cp)
		case cp.Source == "":
			own = append(own, cp)
			unsourced = append(unsourced, cp)
		case cp.Source == skill:
			own = append(own, cp)
		default:
			foreign = append(foreign, cp)
		}
	}
	return own, unsourced, foreign
}

// InFlightSession is a replay session whose dispatches are still in flight.
type InFlightSession struct {
	Session  string
	Attempts []Attempt // the in-flight attempts, in seq order
}

// InFlightReplays lists the replay sessions other than current that still
// have a dispatch in flight: the newest attempt of a logical dispatch is a
// `dispatched` entry a replay wrote. Such a session is at work (a skill
// carrying out its plan, or a replay --exec still running): a second replay
// would redo its dispatches under it.
func InFlightReplays(ds []Dispatch, current string) []InFlightSession {
	bySession := map[string]*InFlightSession{}
	var names []string
	for _, d := range ds {
		a := d.Latest()
		if a.Status != "dispatched" || a.ReplaySession == "" || a.ReplaySession == current {
			continue
		}
		s := bySession[a.ReplaySession]
		if s == nil {
			s = &InFlightSession{Session: a.ReplaySession}
			bySession[a.ReplaySession] = s
			names = append(names, a.ReplaySession)
		}
		s.Attempts = append(s.Attempts, a)
	}
	sort.Strings(names)
	out := make([]InFlightSession, 0, len(names))
	for _, n := range names {
		s := bySession[n]
		sort.Slice(s.Attempts, func(i, j int) bool { return s.Attempts[i].Seq < s.Attempts[j].Seq })
		out = append(out, *s)
	}
	return out
}
