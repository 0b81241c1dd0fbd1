package manifest

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tidwall/gjson"
)

// Report is the validation report of `rewind manifest check`.
type Report struct {
	Source       string
	Lines        int
	Entries      int
	Seqs         int
	Problems     []Problem // findings about a line in line order, then those about a seq
	MoreProblems int
	Errors       int
	Warnings     int
}

// Check validates the manifest read into ix: bad lines, lines over MaxLine,
// unknown or missing statuses, completions without a dispatch, seqs reused or
// first appearing out of order (found while reading), then seqs still in
// flight and gaps in the numbering (from seq 1 on), and, for an index from
// OpenCheck, counts that are not non-negative integers. A manifest with no
// valid entry is an error.
func Check(ix *Index) *Report {
	r := &Report{Source: ix.Source, Lines: ix.Lines, Entries: ix.Entries, Seqs: len(ix.slots),
		MoreProblems: ix.MoreProblems}
	r.Problems = append(r.Problems, ix.Problems...)
	legacyReplayed(r.Problems)
	extra := func(p Problem) {
		if len(r.Problems) >= MaxProblems {
			r.MoreProblems++
			return
		}
		r.Problems = append(r.Problems, p)
	}
	if len(ix.slots) == 0 {
		extra(Problem{Severity: SevError, Kind: "empty", Msg: "no valid dispatch entry"})
	}
	order := make([]int32, len(ix.slots))
	for i := range order {
		order[i] = int32(i)
	}
	sort.Slice(order, func(a, b int) bool { return ix.slots[order[a]].seq < ix.slots[order[b]].seq })
	// In flight, by the line of the authoritative entry; a dispatch a replay
	// re-dispatched is no longer waited for.
	byLine := append([]int32(nil), order...)
	sort.Slice(byLine, func(a, b int) bool { return ix.slots[byLine[a]].line < ix.slots[byLine[b]].line })
	for _, i := range byLine {
		s := &ix.slots[i]
		if _, superseded := ix.ReplayedBy(s.seq); superseded {
			continue
		}
		if ix.statuses[s.status] == "dispatched" {
			extra(Problem{Line: int(s.line), Seq: seqPtr(s.seq), Severity: SevWarning, Kind: "in_flight",
				Msg: fmt.Sprintf("seq %d is in flight: dispatched, no completion recorded", s.seq)})
		}
	}
	for k := 1; k < len(order); k++ {
		// Seqs start at 1: nothing below it is missing.
		lo, hi := ix.slots[order[k-1]].seq+1, ix.slots[order[k]].seq-1
		if lo < 1 {
			lo = 1
		}
		if lo > hi {
			continue
		}
		msg := fmt.Sprintf("seq %d is missing", lo)
		if hi > lo {
			msg = fmt.Sprintf("seqs %d to %d are missing", lo, hi)
		}
		extra(Problem{Seq: seqPtr(lo), Severity: SevWarning, Kind: "seq_gap", Msg: msg})
	}
	// Line findings in line order (in flight ones among them), then the
	// findings about a seq alone.
	sort.SliceStable(r.Problems, func(a, b int) bool {
		la, lb := r.Problems[a].Line, r.Problems[b].Line
		if la == 0 || lb == 0 {
			return la != 0 && lb == 0
		}
		return la < lb
	})
	for _, p := range r.Problems {
		if p.Severity == SevError {
			r.Errors++
		} else {
			r.Warnings++
		}
	}
	return r
}

// LegacyReplayed is the status an older replay wrote on the entries it
// re-dispatched, before replays used dispatched/completed with replay_of.
const LegacyReplayed = "replayed"

// legacyReplayed turns the unknown-status errors about LegacyReplayed into
// warnings: the status is a terminal one an older replay wrote, not
// corruption, and check must not fail on a manifest that carries it.
func legacyReplayed(problems []Problem) {
	for i := range problems {
		p := &problems[i]
		if p.Kind != "unknown_status" || p.Seq == nil ||
			p.Msg != fmt.Sprintf("seq %d has an unknown status %s", *p.Seq, PyRepr(LegacyReplayed)) {
			continue
		}
		p.Severity, p.Kind = SevWarning, "legacy_status"
		p.Msg = fmt.Sprintf("seq %d has the legacy status %s an older replay wrote (read as finished)", *p.Seq, PyRepr(LegacyReplayed))
	}
}

// Stats is the aggregation crucible's dispatch convention defines.
type Stats struct {
	Source      string
	Dispatches  int            // distinct seqs
	ByStatus    map[string]int // authoritative status ("replayed" when a replay supersedes it) -> seqs
	InputChars  int64
	OutputChars int64
	ByTier      []TierCount
	Rework      int     // failed/error entries that were retried
	ReworkSeqs  []int64 // the seqs retried
	Phases      []PhaseStats
	// LeftOut counts, per key (input_chars, output_chars, duration_s), the
	// authoritative values left out of the sums: not null and not a
	// non-negative integer within 64 bits.
	LeftOut map[string]int
}

// TierCount is the number of dispatches of one model tier ("" for none).
type TierCount struct {
	Tier       string
	Null       bool
	Dispatches int
}

// PhaseStats is the dispatch count and duration of a phase.
type PhaseStats struct {
	Label      string
	JSON       []byte
	Status     string
	Dispatches int
	Completed  int
	DurationS  int64
	InputChars int64
	OutChars   int64
}

// EstimatedTokens is the convention's estimate: characters / 4.
func EstimatedTokens(chars int64) int64 { return chars / 4 }

// ComputeStats aggregates the authoritative entries: characters in and out,
// dispatches by tier and status (a seq a replay superseded counts as
// "replayed"; its characters still count: it ran), rework (an earlier failed or error entry of a
// seq followed by a retry under the same seq, or a failed or error dispatch
// a replay took over), and per phase the dispatch count and the sum of
// duration_s.
func ComputeStats(ix *Index) (*Stats, error) {
	if len(ix.slots) == 0 {
		return nil, ErrEmpty
	}
	st := &Stats{Source: ix.Source, Dispatches: len(ix.slots), ByStatus: map[string]int{}, LeftOut: map[string]int{}}
	// sum adds a count to *dst, or counts it as left out.
	sum := func(dst *int64, line, key string) {
		n, ok, bad := countValue(gjson.Get(line, key))
		if ok {
			*dst += n
		} else if bad {
			st.LeftOut[key]++
		}
	}
	// A line lives in a read buffer that later reads overwrite, and so do the
	// strings gjson cuts from it. A map keeps the key of every assignment,
	// even to an existing entry, so keys must be stable copies: one per value.
	copies := map[string]string{}
	stable := func(s string) string {
		c, ok := copies[s]
		if !ok {
			c = strings.Clone(s)
			copies[c] = c
		}
		return c
	}
	tiers := map[string]int{}
	var tierOrder []string
	for _, ph := range ix.Phases() {
		ps := PhaseStats{Label: ph.Label, JSON: ph.JSON, Status: ph.Status, Dispatches: len(ph.Seqs)}
		err := ix.EachEntry(ph, func(seq int64, line []byte) error {
			s := bstr(line)
			status := gjson.Get(s, "status").Str
			if _, superseded := ix.ReplayedBy(seq); superseded {
				status = "replayed" // whatever it last was, a replay took it over
			}
			status = stable(status)
			st.ByStatus[status]++
			if status == "completed" {
				ps.Completed++
			}
			sum(&ps.InputChars, s, "input_chars")
			sum(&ps.OutChars, s, "output_chars")
			sum(&ps.DurationS, s, "duration_s")
			key := "\x00"
			if t := gjson.Get(s, "model_tier"); t.Type == gjson.String {
				key = t.Str
			}
			key = stable(key)
			if _, ok := tiers[key]; !ok {
				tierOrder = append(tierOrder, key)
			}
			tiers[key]++
			return nil
		})
		if err != nil {
			return nil, err
		}
		st.InputChars += ps.InputChars
		st.OutputChars += ps.OutChars
		st.Phases = append(st.Phases, ps)
	}
	sort.SliceStable(tierOrder, func(a, b int) bool {
		if tiers[tierOrder[a]] != tiers[tierOrder[b]] {
			return tiers[tierOrder[a]] > tiers[tierOrder[b]]
		}
		return tierOrder[a] < tierOrder[b]
	})
	for _, k := range tierOrder {
		tc := TierCount{Tier: k, Dispatches: tiers[k]}
		if k == "\x00" {
			tc.Tier, tc.Null = "", true
		}
		st.ByTier = append(st.ByTier, tc)
	}
	for i := range ix.slots {
		n := int(ix.slots[i].rework)
		// A failed dispatch a replay took over was redone too: rework, as a
		// retry under the same seq is.
		if status := ix.statuses[ix.slots[i].status]; status == "failed" || status == "error" {
			if _, superseded := ix.ReplayedBy(ix.slots[i].seq); superseded {
				n++
			}
		}
		if n > 0 {
			st.Rework += n
			st.ReworkSeqs = append(st.ReworkSeqs, ix.slots[i].seq)
		}
	}
	sort.Slice(st.ReworkSeqs, func(a, b int) bool { return st.ReworkSeqs[a] < st.ReworkSeqs[b] })
	return st, nil
}
