package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/manifest"
)

const manifestPathHelp = "PATH is a manifest.jsonl, a dispatch directory, a scratch directory whose .pipeline-active\n" +
	"names the dispatch directory (the durable copy <scratch>/crucible-dispatch-<id>/ wins over\n" +
	"/tmp), or a directory holding crucible-dispatch-*/ or dispatch-*/ directories (the newest)."

func manifestCommand() *cli.Command {
	return &cli.Command{
		Name:  "manifest",
		Usage: "read a dispatch manifest: the run record, per phase; validate it; aggregate it",
		Subcommands: []*cli.Command{
			{
				Name:      "show",
				Usage:     "the authoritative entry of each seq, grouped by phase, with each phase's status",
				ArgsUsage: "PATH",
				Description: manifestPathHelp + "\n\nA line that is not a dispatch entry is skipped with a warning naming its line; the\n" +
					"last entry of a seq wins. --json prints {\"source\", \"phases\": [{\"phase\", \"status\",\n" +
					"\"entries\"}], \"warnings\"}.",
				Action: manifestShow,
			},
			{
				Name:        "check",
				Usage:       "validate a manifest; exit 1 when it has errors",
				ArgsUsage:   "PATH",
				Description: manifestPathHelp,
				Action:      manifestCheck,
			},
			{
				Name:        "stats",
				Usage:       "characters, estimated tokens, tiers, rework and per-phase counts and durations",
				ArgsUsage:   "PATH",
				Description: manifestPathHelp,
				Action:      manifestStats,
			},
		},
	}
}

// openManifest resolves PATH, prints the resolution notes as warnings and reads
// the manifest (with check, validating every entry's counts too). The notes are
// returned for --json documents.
func openManifest(c *cli.Context, check bool) (*manifest.Index, []string, error) {
	o := opts(c)
	if c.NArg() != 1 {
		return nil, nil, usageErrorf("%s takes one PATH argument; got %d", strings.TrimPrefix(c.Command.HelpName, "rewind "), c.NArg())
	}
	path := c.Args().First()
	loc, err := manifest.Locate(path)
	if err != nil {
		return nil, nil, manifestPathError(path, err)
	}
	var notes []string
	for _, n := range locateNotes(loc, path) {
		o.warnf("%s", n)
		notes = append(notes, n)
	}
	if len(loc.Candidates) > 1 {
		for _, cand := range loc.Candidates {
			o.warnf("  %s", cand)
		}
	}
	open := manifest.Open
	if check {
		open = manifest.OpenCheck
	}
	ix, err := open(loc.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", loc.Path, err)
	}
	return ix, notes, nil
}

func manifestPathError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s: no such file or directory", path)
	case errors.Is(err, manifest.ErrNoManifest):
		return withHint(err, strings.ReplaceAll(manifestPathHelp, "\n", " "))
	}
	return err
}

// skippedWarnings prints (and returns) one warning per skipped line.
func skippedWarnings(o *options, ix *manifest.Index) []string {
	var out []string
	listed := 0
	for _, p := range ix.Skipped() {
		msg := fmt.Sprintf("%s:%d: %s, line skipped", ix.Source, p.Line, p.Msg)
		o.warnf("%s", msg)
		out = append(out, msg)
		listed++
	}
	if more := ix.SkippedLines - listed; more > 0 {
		msg := fmt.Sprintf("%s: %d more lines skipped, not listed", ix.Source, more)
		o.warnf("%s", msg)
		out = append(out, msg)
	}
	return out
}

func manifestShow(c *cli.Context) error {
	o := opts(c)
	ix, notes, err := openManifest(c, false)
	if err != nil {
		return err
	}
	defer ix.Close()
	warnings := append(notes, skippedWarnings(o, ix)...)
	if ix.Seqs() == 0 {
		return manifest.ErrEmpty
	}
	phases := ix.Phases()
	w := bufio.NewWriterSize(o.Stdout, 256<<10)
	if o.JSON {
		err = showJSON(w, ix, phases, warnings)
	} else {
		err = showText(w, ix, phases)
	}
	if err != nil {
		return err
	}
	return w.Flush()
}

// showJSON streams the document: the authoritative lines are copied as they
// are in the file (they are valid JSON objects), so memory stays flat.
func showJSON(w *bufio.Writer, ix *manifest.Index, phases []manifest.Phase, warnings []string) error {
	w.WriteString(`{"manifest":`)
	w.Write(manifest.AppendString(nil, ix.Source))
	w.WriteString(`,"phases":[`)
	for i, ph := range phases {
		if i > 0 {
			w.WriteByte(',')
		}
		w.WriteString(`{"phase":`)
		w.Write(ph.JSON)
		w.WriteString(`,"status":`)
		w.Write(manifest.AppendString(nil, ph.Status))
		w.WriteString(`,"entries":[`)
		first := true
		err := ix.EachEntry(ph, func(_ int64, line []byte) error {
			if !first {
				w.WriteByte(',')
			}
			first = false
			_, err := w.Write(bytes.TrimSpace(line))
			return err
		})
		if err != nil {
			return err
		}
		w.WriteString("]}")
	}
	w.WriteString(`],"warnings":[`)
	for i, s := range warnings {
		if i > 0 {
			w.WriteByte(',')
		}
		w.Write(manifest.AppendString(nil, s))
	}
	_, err := w.WriteString("]}\n")
	return err
}

func showText(w *bufio.Writer, ix *manifest.Index, phases []manifest.Phase) error {
	n := 0
	for _, ph := range phases {
		n += len(ph.Seqs)
	}
	fmt.Fprintf(w, "%s: %s in %s\n", ix.Source, plural(n, "dispatch", "dispatches"), plural(len(phases), "phase", "phases"))
	for _, ph := range phases {
		fmt.Fprintf(w, "\nphase %s: %s (%s)\n", ph.Label, ph.Status, plural(len(ph.Seqs), "dispatch", "dispatches"))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		err := ix.EachEntry(ph, func(seq int64, line []byte) error {
			s := string(line)
			summary := oneLine(gjson.Get(s, "summary"), 72)
			if arm := gjson.Get(s, "arm"); arm.Type == gjson.String {
				// An A/B replay's run, in a clone of the project.
				note := fmt.Sprintf("(A/B %s, replays %s)", gjson.Get(s, "replay_session").String(), gjson.Get(s, "replay_of").Raw)
				if summary == "-" {
					summary = note
				} else {
					summary += " " + note
				}
			}
			if by, ok := ix.ReplayedBy(seq); ok {
				// Its phase's status counts the replay instead; say why.
				note := fmt.Sprintf("(replayed by %d)", by)
				if summary == "-" {
					summary = note
				} else {
					summary += " " + note
				}
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\n", seq, field(gjson.Get(s, "status")), field(gjson.Get(s, "role")),
				field(gjson.Get(s, "file")), summary)
			return nil
		})
		if err != nil {
			return err
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// field renders a value for a text column: "-" when missing or null.
func field(v gjson.Result) string {
	switch v.Type {
	case gjson.Null:
		return "-"
	case gjson.String:
		return oneLineStr(v.Str, 40)
	}
	return v.Raw
}

func oneLine(v gjson.Result, max int) string {
	if v.Type != gjson.String {
		return "-"
	}
	return oneLineStr(v.Str, max)
}

// oneLineStr makes s safe for one line of a column: control characters and
// tabs become spaces, and it is cut to max characters.
func oneLineStr(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			return ' '
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max-3]) + "..."
	}
	if s == "" {
		return "-"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

type findingJSON struct {
	Line     *int   `json:"line"`
	Seq      *int64 `json:"seq"`
	Severity string `json:"severity"`
	Kind     string `json:"kind"`
	Message  string `json:"message"`
}

type checkJSON struct {
	Source       string        `json:"manifest"`
	Lines        int           `json:"lines"`
	Entries      int           `json:"entries_count"`
	Seqs         int           `json:"seqs_count"`
	Errors       int           `json:"errors_count"`
	Warnings     int           `json:"warnings_count"`
	Findings     []findingJSON `json:"findings"`
	MoreFindings int           `json:"more_findings"`
}

func manifestCheck(c *cli.Context) error {
	o := opts(c)
	ix, _, err := openManifest(c, true)
	if err != nil {
		return err
	}
	defer ix.Close()
	r := manifest.Check(ix)
	if o.JSON {
		doc := checkJSON{Source: r.Source, Lines: r.Lines, Entries: r.Entries, Seqs: r.Seqs, Errors: r.Errors,
			Warnings: r.Warnings, Findings: []findingJSON{}, MoreFindings: r.MoreProblems}
		for _, p := range r.Problems {
			f := findingJSON{Seq: p.Seq, Severity: p.Severity, Kind: p.Kind, Message: p.Msg}
			if p.Line > 0 {
				line := p.Line
				f.Line = &line
			}
			doc.Findings = append(doc.Findings, f)
		}
		if err := writeJSON(o, doc); err != nil {
			return err
		}
	} else {
		w := bufio.NewWriter(o.Stdout)
		fmt.Fprintf(w, "%s: %s, %s, %s\n", r.Source, plural(r.Lines, "line", "lines"), plural(r.Entries, "entry", "entries"), plural(r.Seqs, "seq", "seqs"))
		for _, p := range r.Problems {
			where := r.Source
			if p.Line > 0 {
				where += ":" + strconv.Itoa(p.Line)
			}
			fmt.Fprintf(w, "%s: %s: %s\n", where, p.Severity, p.Msg)
		}
		if r.MoreProblems > 0 {
			fmt.Fprintf(w, "%d more findings not listed\n", r.MoreProblems)
		}
		fmt.Fprintf(w, "%s, %s\n", plural(r.Errors, "error", "errors"), plural(r.Warnings, "warning", "warnings"))
		if err := w.Flush(); err != nil {
			return err
		}
	}
	if r.Errors > 0 {
		return named("manifest_invalid", silentExit(exitFailure, fmt.Sprintf("%s: %s", r.Source, plural(r.Errors, "error", "errors"))))
	}
	return nil
}

type statsJSON struct {
	Source                string         `json:"manifest"`
	Dispatches            int            `json:"dispatches_count"`
	ByStatus              map[string]int `json:"by_status"`
	InputChars            int64          `json:"input_chars"`
	OutputChars           int64          `json:"output_chars"`
	EstimatedInputTokens  int64          `json:"estimated_input_tokens"`
	EstimatedOutputTokens int64          `json:"estimated_output_tokens"`
	ByTier                []tierJSON     `json:"by_tier"`
	Rework                reworkJSON     `json:"rework"`
	Phases                []phaseJSON    `json:"phases"`
	LeftOut               map[string]int `json:"left_out"`
}

type tierJSON struct {
	ModelTier  *string `json:"model_tier"`
	Dispatches int     `json:"dispatches_count"`
}

type reworkJSON struct {
	Retries int     `json:"retries"`
	Seqs    []int64 `json:"seqs"`
}

type phaseJSON struct {
	Phase       json.RawMessage `json:"phase"`
	Status      string          `json:"status"`
	Dispatches  int             `json:"dispatches_count"`
	Completed   int             `json:"completed_count"`
	DurationS   int64           `json:"duration_s"`
	InputChars  int64           `json:"input_chars"`
	OutputChars int64           `json:"output_chars"`
}

func manifestStats(c *cli.Context) error {
	o := opts(c)
	ix, _, err := openManifest(c, false)
	if err != nil {
		return err
	}
	defer ix.Close()
	skippedWarnings(o, ix)
	st, err := manifest.ComputeStats(ix)
	if err != nil {
		return err
	}
	if o.JSON {
		doc := statsJSON{Source: st.Source, Dispatches: st.Dispatches, ByStatus: st.ByStatus,
			InputChars: st.InputChars, OutputChars: st.OutputChars,
			EstimatedInputTokens: manifest.EstimatedTokens(st.InputChars), EstimatedOutputTokens: manifest.EstimatedTokens(st.OutputChars),
			Rework: reworkJSON{Retries: st.Rework, Seqs: append([]int64{}, st.ReworkSeqs...)}, LeftOut: st.LeftOut}
		for _, t := range st.ByTier {
			tj := tierJSON{Dispatches: t.Dispatches}
			if !t.Null {
				tier := t.Tier
				tj.ModelTier = &tier
			}
			doc.ByTier = append(doc.ByTier, tj)
		}
		for _, p := range st.Phases {
			doc.Phases = append(doc.Phases, phaseJSON{Phase: p.JSON, Status: p.Status, Dispatches: p.Dispatches, Completed: p.Completed,
				DurationS: p.DurationS, InputChars: p.InputChars, OutputChars: p.OutChars})
		}
		return writeJSON(o, doc)
	}
	w := bufio.NewWriter(o.Stdout)
	var statuses []string
	for s := range st.ByStatus {
		statuses = append(statuses, s)
	}
	sort.Slice(statuses, func(a, b int) bool {
		if st.ByStatus[statuses[a]] != st.ByStatus[statuses[b]] {
			return st.ByStatus[statuses[a]] > st.ByStatus[statuses[b]]
		}
		return statuses[a] < statuses[b]
	})
	var parts []string
	for _, s := range statuses {
		label := s
		if label == "" {
			label = "(no status)"
		}
		parts = append(parts, fmt.Sprintf("%d %s", st.ByStatus[s], label))
	}
	fmt.Fprintf(w, "%s\n", st.Source)
	fmt.Fprintf(w, "dispatches: %d (%s)\n", st.Dispatches, strings.Join(parts, ", "))
	fmt.Fprintf(w, "input: %d chars (~%d tokens)\n", st.InputChars, manifest.EstimatedTokens(st.InputChars))
	fmt.Fprintf(w, "output: %d chars (~%d tokens)\n", st.OutputChars, manifest.EstimatedTokens(st.OutputChars))
	if left := leftOutText(st.LeftOut); left != "" {
		fmt.Fprintf(w, "left out of the sums: %s (not non-negative integers; see rewind manifest check)\n", left)
	}
	parts = parts[:0]
	for _, t := range st.ByTier {
		label := t.Tier
		if t.Null {
			label = "(none)"
		}
		parts = append(parts, fmt.Sprintf("%s %d", label, t.Dispatches))
	}
	fmt.Fprintf(w, "by tier: %s\n", strings.Join(parts, ", "))
	if st.Rework == 0 {
		fmt.Fprintf(w, "rework: none\n")
	} else {
		var seqs []string
		for _, s := range st.ReworkSeqs {
			seqs = append(seqs, strconv.FormatInt(s, 10))
		}
		fmt.Fprintf(w, "rework: %s after failed or error (seq %s)\n", plural(st.Rework, "retry", "retries"), strings.Join(seqs, ", "))
	}
	fmt.Fprintf(w, "phases:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, p := range st.Phases {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%d completed\t%ds\n", p.Label, p.Status, plural(p.Dispatches, "dispatch", "dispatches"), p.Completed, p.DurationS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return w.Flush()
}

// leftOutText lists the values left out of the sums, per key, in the order
// of the manifest's keys ("" when none).
func leftOutText(left map[string]int) string {
	var parts []string
	for _, k := range manifest.CountKeys {
		if n := left[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return strings.Join(parts, ", ")
}

// writeJSON prints one JSON document on stdout, without HTML escaping.
func writeJSON(o *options, doc any) error {
	enc := json.NewEncoder(o.Stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}

// locateNotes are the notes of a located manifest worth a warning. "No durable
// copy" is one only when the /tmp copy is all there is and the pipeline is not
// running: while it runs, the copy is made at its end (dispatch cleanup), and
// every call of a live pipeline would warn.
func locateNotes(loc *manifest.Located, scratch string) []string {
	if loc.LiveOnly {
		if m, err := manifest.ReadMarker(scratch); err == nil {
			if state, _ := pipelineState(m, "", hostname()); state == "running" {
				return nil
			}
		}
	}
	return loc.Notes
}
