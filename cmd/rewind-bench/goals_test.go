package bench

import (
	"fmt"
	"strings"
)

// The goal table: the rows of an issue's table of goals, declared by the
// workload that measures them (in the order) and filled in as it
// measures; printed after every workload, one row per goal, each beside its
// baseline measured in the same rounds. A row nothing filled in is printed
// too, saying why it was not measured.
type goalRow struct {
	id       string
	workload string  // the wording of the row
	goal     float64 // the ratio to reach (≤); 0: no ratio goal
	stretch  float64 // the stretch ratio (≤); 0: none
	goalText string  // the goal as printed

	// Filled in by the measurement.
	files    string // the scale it was measured at ("100k", or "20k*" for a 100k row at quick scale)
	rewind   string // rewind's figure (a median, or a size)
	baseline string // what it is compared with
	base     string // the baseline's figure
	ratio    float64
	extra    string // a further condition's verdict ("" when none, else "ok" or why not)
	skipped  string // why the row was not measured, when it was not
	measured bool
}

var goals []*goalRow

// declareGoals sets the rows of the table (every row, measured or not).
func declareGoals(rows ...*goalRow) { goals = append(goals, rows...) }

func goalByID(id string) *goalRow {
	for _, g := range goals {
		if g.id == id {
			return g
		}
	}
	panic("no goal row " + id)
}

// goalTimes fills in row id with rewind's median against a baseline's.
func (b *bench) goalTimes(id, files string, rw, base result) {
	g := goalByID(id)
	g.files, g.rewind, g.baseline, g.base = files, round(rw.median), base.label, round(base.median)
	g.ratio = float64(rw.median) / float64(base.median)
	g.measured = true
	b.note("goal row: %s = %.2fx (%s)", g.workload, g.ratio, g.verdict())
}

// goalFigures fills in row id with two figures already printed and their ratio.
func (b *bench) goalFigures(id, files, rw, baseline, base string, ratio float64) {
	g := goalByID(id)
	g.files, g.rewind, g.baseline, g.base, g.ratio, g.measured = files, rw, baseline, base, ratio, true
	b.note("goal row: %s = %.2fx (%s)", g.workload, g.ratio, g.verdict())
}

// goalSkip records why row id is not measured in this run.
func goalSkip(id, why string) {
	g := goalByID(id)
	if !g.measured {
		g.skipped = why
	}
}

func (g *goalRow) verdict() string {
	if !g.measured {
		return "not measured"
	}
	v := "missed"
	switch {
	case g.stretch > 0 && g.ratio <= g.stretch:
		v = "stretch met"
	case g.goal == 0 || g.ratio <= g.goal:
		v = "met"
	}
	if g.extra != "" && g.extra != "ok" {
		if v == "missed" {
			return "missed; " + g.extra
		}
		return "missed (" + g.extra + ")"
	}
	return v
}

// printGoals prints the table, then the closing note: machine, rounds, load.
func printGoals(machine string, runs int, scale, loadStart, loadEnd string) {
	if len(goals) == 0 {
		return
	}
	head := []string{"workload", "files", "rewind", "baseline", "baseline median", "ratio", "goal", "verdict"}
	var rows [][]string
	quickStar := false
	met, missed, notRun := 0, 0, 0
	for _, g := range goals {
		if strings.HasSuffix(g.files, "*") {
			quickStar = true
		}
		if !g.measured {
			why := g.skipped
			if why == "" {
				why = "not measured"
			}
			rows = append(rows, []string{g.workload, "-", "-", "-", "-", "-", g.goalText, why})
			notRun++
			continue
		}
		v := g.verdict()
		if strings.HasPrefix(v, "missed") {
			missed++
		} else {
			met++
		}
		rows = append(rows, []string{g.workload, g.files, g.rewind, g.baseline, g.base, fmt.Sprintf("%.2fx", g.ratio), g.goalText, v})
	}
	width := make([]int, len(head))
	for _, r := range append([][]string{head}, rows...) {
		for i, c := range r {
			if n := len([]rune(c)); n > width[i] {
				width[i] = n
			}
		}
	}
	line := func(r []string) {
		var sb strings.Builder
		sb.WriteString("|")
		for i, c := range r {
			sb.WriteString(" " + c + strings.Repeat(" ", width[i]-len([]rune(c))) + " |")
		}
		fmt.Println(sb.String())
	}
	fmt.Printf("\n== goals (issue 10): medians of %s, scale %s\n", plural(runs, "interleaved round"), scale)
	line(head)
	sep := make([]string, len(head))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
	}
	line(sep)
	for _, r := range rows {
		line(r)
	}
	if quickStar {
		fmt.Println("* quick scale: a row the issue states at 100,000 files, measured at 20,000 (REWIND_BENCH_SCALE=quick)")
	}
	fmt.Printf("%d met, %d missed, %d not measured in this run\n", met, missed, notRun)
	fmt.Printf("machine: %s; %s; load average %s at the start, %s at the end (1, 5, 15 min)\n", machine, plural(runs, "round"), loadStart, loadEnd)
	if runs < 7 {
		fmt.Printf("fewer rounds than the 7 the goals are stated for (REWIND_BENCH_RUNS=%d): read the verdicts as indicative\n", runs)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
