package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/checkpoint"
	"github.com/rewind-cli/rewind/manifest"
	"github.com/rewind-cli/rewind/replay"
	runreport "github.com/rewind-cli/rewind/replay/report"
)

func reportCommand() *cli.Command {
	return &cli.Command{
		Name:      "report",
		Usage:     "draw a run as one self-contained HTML page: phase lanes, crash, resume, A/B arms",
		ArgsUsage: "PATH -o FILE",
		Description: "PATH is what rewind replay takes: a manifest.jsonl, a dispatch directory, a scratch directory whose\n" +
			".pipeline-active names the dispatch directory, or a directory of crucible-dispatch-*/ directories.\n\n" +
			"The page (-o FILE) needs nothing but a browser: CSS, script and SVG are inline. Bars start at each\n" +
			"dispatch file's audit header Timestamp (else its modification time) and end at start + duration_s\n" +
			"(else the result file's modification time); what is inferred is drawn dashed and said so.\n" +
			"--json prints a summary document (with -o, the page is written too).",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "write the HTML page to `FILE` (- for stdout)", TakesFile: true},
			&cli.StringFlag{Name: "scratch", EnvVars: []string{"REWIND_SCRATCH"}, Usage: "the pipeline's scratch `DIR`, where dispatch files are also looked for (default: PATH when it is one)", TakesFile: true},
		},
		Action: reportRun,
	}
}

func reportRun(c *cli.Context) error {
	o := opts(c)
	if c.NArg() != 1 {
		return withHint(usageErrorf("report takes one PATH argument (a manifest, a dispatch directory or a scratch directory); got %d", c.NArg()),
			"rewind report PATH -o report.html")
	}
	output := c.String("output")
	if output == "" && !o.JSON {
		return withHint(usageErrorf("report needs -o FILE, the HTML page to write"), "rewind report "+shellArg(c.Args().First())+" -o report.html")
	}
	toStdout := output == "-" // as Unix tools take -: the page on stdout, no file named "-"
	if toStdout && o.JSON {
		return withHint(usageErrorf("-o - (the page on stdout) and --json both write stdout; use one"),
			"rewind report "+shellArg(c.Args().First())+" -o report.html --json")
	}
	if output != "" && !toStdout {
		if fi, err := os.Stat(output); err == nil && fi.IsDir() {
			return withHint(usageErrorf("-o %s is a directory", output), "name the page's file, such as "+filepath.Join(output, "report.html"))
		}
		if fi, err := os.Stat(filepath.Dir(output)); err != nil || !fi.IsDir() {
			return withHint(usageErrorf("-o %s: directory %s does not exist", output, filepath.Dir(output)), "create it first, or write the page elsewhere")
		}
		if err := checkReplaceable(output); err != nil {
			return err
		}
	}
	writeTo := output
	if real, err := filepath.EvalSymlinks(output); err == nil && !toStdout {
		writeTo = real // a link to a page is rewritten through, and stays a link
	}
	src, ix, err := openReplaySource(c, c.Args().First())
	if err != nil {
		return err
	}
	defer ix.Close()
	var notes []string
	if loc, err := manifest.Locate(c.Args().First()); err == nil {
		notes = loc.Notes // resolveReplaySource printed them
	}
	warnings := skippedWarnings(o, ix)
	if ix.Seqs() == 0 {
		return manifest.ErrEmpty
	}
	diffs, diffWarnings := readDiffRecords(src.lookup)
	for _, w := range diffWarnings {
		o.warnf("%s", w)
	}
	warnings = append(warnings, diffWarnings...)
	cps, cpWarning := reportCheckpoints(c)
	if cpWarning != "" {
		o.warnf("%s", cpWarning)
		warnings = append(warnings, cpWarning)
	}
	run, err := runreport.Build(runreport.Input{Index: ix, Source: src.manifest, Dirs: src.lookup, Marker: src.marker,
		Checkpoints: cps, Diffs: diffs, Loc: time.Local, Now: o.Now()})
	if err != nil {
		return err
	}
	run.Notes, run.Warnings = notes, warnings
	if !run.Timed {
		o.warnf("no dispatch of %s has a time (no dispatch files found): the timeline lays the bars out in seq order", src.manifest)
	}
	if output != "" {
		var page bytes.Buffer
		if err := runreport.Write(&page, run); err != nil {
			return err
		}
		if toStdout {
			_, err := o.Stdout.Write(page.Bytes())
			return err
		}
		if err := manifest.WriteFileAtomic(writeTo, page.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", output, err)
		}
	}
	if o.JSON {
		return writeJSON(o, runreport.Summarize(run, output))
	}
	fmt.Fprintf(o.Stdout, "wrote %s: %s in %s\n", output, plural(len(run.Bars), "dispatch", "dispatches"), plural(len(run.Lanes), "phase", "phases"))
	return nil
}

// checkReplaceable refuses to overwrite a file that is not a page rewind
// report wrote (a manifest named by mistake would be lost).
func checkReplaceable(output string) error {
	f, err := os.Open(output)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("-o %s: %w", output, err)
	}
	defer f.Close()
	head := make([]byte, 1024)
	n, _ := io.ReadFull(f, head)
	if bytes.Contains(head[:n], []byte(runreport.Generator)) {
		return nil
	}
	return named("output_not_report", withHint(exitErrorf(exitFailure, "-o %s exists and is not a page rewind report wrote; not overwriting it", output),
		"name a new file, or remove this one first"))
}

// readDiffRecords reads replay-diff.jsonl from the first of dirs that has one.
func readDiffRecords(dirs []string) ([]runreport.DiffRecord, []string) {
	for _, dir := range dirs {
		path := filepath.Join(dir, runreport.DiffFile)
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, []string{fmt.Sprintf("%s: %v; no diff tables", path, err)}
		}
		defer f.Close()
		records, bad, err := runreport.ParseDiffRecords(f)
		var warnings []string
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: %v", path, err))
		}
		if bad > 0 {
			warnings = append(warnings, fmt.Sprintf("%s: %s not a replay-diff record, skipped", path, plural(bad, "line", "lines")))
		}
		return records, warnings
	}
	return nil, nil
}

// reportCheckpoints reads the checkpoints of the work tree's store, read-only
// (the report keeps the boundaries of the run's own skill). A work tree without a store has none; one that
// cannot be read is a warning, not an error: the page is drawn without them.
func reportCheckpoints(c *cli.Context) ([]replay.Checkpoint, string) {
	o := opts(c)
	store, err := checkpoint.OpenReadOnly(o.WorkTree, o.Store)
	if errors.Is(err, checkpoint.ErrRefusedWorkTree) {
		return nil, ""
	}
	if err != nil {
		return nil, fmt.Sprintf("checkpoints not read (%v): the page has no checkpoint marks", err)
	}
	list, err := store.List(c.Context)
	if err != nil {
		return nil, fmt.Sprintf("checkpoints not read from %s (%v): the page has no checkpoint marks", store.Dir, err)
	}
	var all []replay.Checkpoint
	for _, cp := range list {
		all = append(all, replay.Checkpoint{ID: cp.ID, Reason: cp.Reason, Source: cp.Source, Time: cp.Time})
	}
	return all, ""
}
