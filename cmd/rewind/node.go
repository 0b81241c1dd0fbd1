package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/replay/node"
)

// `rewind node` snapshots, diffs, replays and verifies single nodes of a run,
// as cool-workflow's `cw node` does, and fails closed on drift. Every command
// prints one pretty JSON document (cool-workflow's layout) on stdout.

const nodeRunHelp = "RUN is a cool-workflow run directory (.cw/runs/<id>/, holding state.json), its state.json,\n" +
	"or a run id looked up in <work tree>/.cw/runs/; or a crucible dispatch directory (as\n" +
	"`rewind manifest show` takes it), whose nodes are its seqs. Snapshots and replays are\n" +
	"written under <run>/nodes/snapshots/<node>/. Times come from --now/REWIND_NOW, else the\n" +
	"epoch, as cool-workflow's do."

func nodeCommand() *cli.Command {
	strict := &cli.BoolFlag{Name: "strict", Usage: "also compare kind, loopStage and contractId, and fingerprint the node's whole content (default for crucible runs)"}
	return &cli.Command{
		Name:        "node",
		Usage:       "per-node snapshots, diffs and replays of a run, failing closed on drift",
		Description: nodeRunHelp,
		Subcommands: []*cli.Command{
			{
				Name:        "list",
				Usage:       "the run's nodes, with the snapshots and replays stored for each",
				ArgsUsage:   "RUN",
				Description: nodeRunHelp,
				Flags:       []cli.Flag{strict},
				Action:      nodeList,
			},
			{
				Name:        "snapshot",
				Usage:       "snapshot one node: its normalized body and a fingerprint of its source",
				ArgsUsage:   "RUN NODE",
				Description: nodeRunHelp,
				Flags:       []cli.Flag{strict},
				Action:      nodeSnapshot,
			},
			{
				Name:      "diff",
				Usage:     "compare two snapshots section by section; refuses a stale or absent one (exit 4)",
				ArgsUsage: "RUN BASELINE CANDIDATE",
				Description: nodeRunHelp + "\n\nBoth snapshots are checked against the run as it is now; one that is stale (its node\n" +
					"changed) or absent (its node or an artifact is gone) is refused, unless --allow-stale.",
				Flags: []cli.Flag{
					&cli.BoolFlag{Name: "allow-stale", Usage: "diff stale or absent snapshots too, with a warning"},
					strict,
				},
				Action: nodeDiff,
			},
			{
				Name:        "replay",
				Usage:       "replay a node from a snapshot; refuses a stale or absent snapshot (exit 4)",
				ArgsUsage:   "RUN SNAPSHOT",
				Description: nodeRunHelp + "\n\nTwo replays of one snapshot differ only in replayedAt (--now).",
				Action:      nodeReplay,
			},
			{
				Name:        "verify",
				Usage:       "compare a replay with its source node as it is now; exit 1 on drift",
				ArgsUsage:   "RUN REPLAY",
				Description: nodeRunHelp,
				Flags:       []cli.Flag{strict},
				Action:      nodeVerify,
			},
		},
	}
}

// nodeArgs checks the positional arguments' count.
func nodeArgs(c *cli.Context, names ...string) ([]string, error) {
	if c.NArg() != len(names) {
		return nil, usageErrorf("%s takes %s; got %d arguments", strings.TrimPrefix(c.Command.HelpName, "rewind "),
			strings.Join(names, " "), c.NArg())
	}
	return c.Args().Slice(), nil
}

// nodeRun checks the positional arguments (names, RUN first) and opens RUN;
// its errors are nodeFail's.
func nodeRun(c *cli.Context, names ...string) ([]string, *node.Run, error) {
	args, err := nodeArgs(c, names...)
	if err != nil {
		return nil, nil, nodeFail(c, "RUN", err)
	}
	run, err := openRun(c, args[0])
	if err != nil {
		return nil, nil, nodeFail(c, args[0], err)
	}
	return args, run, nil
}

// openRun opens RUN and prints how it was found.
func openRun(c *cli.Context, path string) (*node.Run, error) {
	o := opts(c)
	run, err := node.Open(path, o.WorkTree)
	if err != nil {
		if errors.Is(err, node.ErrNoRun) {
			return nil, withHint(err, strings.ReplaceAll(strings.SplitN(nodeRunHelp, " Snapshots", 2)[0], "\n", " "))
		}
		return nil, err
	}
	for _, n := range run.Notes {
		o.warnf("%s", n)
	}
	return run, nil
}

// nodeNow is --now/REWIND_NOW to the millisecond (cool-workflow's times carry
// milliseconds), else the zero time, which the node package writes as the
// epoch: the default is never the clock, so outputs stay reproducible.
func nodeNow(c *cli.Context) time.Time {
	if v := c.String("now"); v != "" {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil { // resolveOptions has checked it
			return t
		}
	}
	return time.Time{}
}

// strictMode is --strict when given, else the run's default. Crucible runs
// are always strict: their fingerprints cover the content by construction.
func strictMode(c *cli.Context, run *node.Run, recorded bool) (bool, error) {
	if c.IsSet("strict") {
		if !c.Bool("strict") && run.StrictByDefault() {
			return false, usageErrorf("--strict=false: %s runs are always strict", run.Kind)
		}
		return c.Bool("strict"), nil
	}
	return run.StrictByDefault() || recorded, nil
}

func printDoc(o *options, doc *node.Object) error {
	_, err := o.Stdout.Write(node.Pretty(doc))
	return err
}

// nodeFail gives a node error its exit code and hints; under --json run prints
// it as the error document, with the node's freshness, run and node as details.
func nodeFail(c *cli.Context, run string, err error, hints ...string) error {
	if err == nil {
		return nil
	}
	var ne *node.Error
	if errors.As(err, &ne) {
		switch {
		case ne.Code == node.CodeSnapshotStale:
			hints = append(hints, "take a new snapshot of the node as it is now: rewind node snapshot "+shellArg(run)+" "+shellArg(ne.NodeID))
			err = &cliError{code: exitGuard, err: err, hints: hints}
		case ne.Code == node.CodeSnapshotAbsent:
			hints = append(hints, "bring back what is gone, or see what the run holds now: rewind node list "+shellArg(run))
			err = &cliError{code: exitGuard, err: err, hints: hints}
		case ne.Code == node.CodeSnapshotNotFound || ne.Code == node.CodeReplayNotFound || ne.Code == node.CodeNodeAbsent:
			err = withHint(err, append(hints, "rewind node list "+shellArg(run)+" lists the run's nodes, snapshots and replays")...)
		}
	}
	return err
}

func nodeList(c *cli.Context) error {
	args, run, err := nodeRun(c, "RUN")
	if err != nil {
		return err
	}
	strict, err := strictMode(c, run, false)
	if err != nil {
		return nodeFail(c, args[0], err)
	}
	doc, err := run.ListDocument(strict)
	if err != nil {
		return nodeFail(c, args[0], err)
	}
	return printDoc(opts(c), doc)
}

func nodeSnapshot(c *cli.Context) error {
	args, run, err := nodeRun(c, "RUN", "NODE")
	if err != nil {
		return err
	}
	strict, err := strictMode(c, run, false)
	if err != nil {
		return nodeFail(c, args[0], err)
	}
	s, err := run.TakeSnapshot(args[1], strict, nodeNow(c))
	if err != nil {
		return nodeFail(c, args[0], err)
	}
	return printDoc(opts(c), s.Document())
}

func nodeDiff(c *cli.Context) error {
	o := opts(c)
	args, run, err := nodeRun(c, "RUN", "BASELINE", "CANDIDATE")
	if err != nil {
		return err
	}
	var snaps [2]*node.Snapshot
	for i, role := range []string{"baseline", "candidate"} {
		s, _, err := run.LoadSnapshot(args[1+i])
		if err != nil {
			return nodeFail(c, args[0], err)
		}
		if fr, reason := run.Freshness(s); fr != node.Valid {
			if !c.Bool("allow-stale") {
				code := node.CodeSnapshotStale
				if fr == node.Absent {
					code = node.CodeSnapshotAbsent
				}
				err := &node.Error{Code: code, Freshness: fr, RunID: run.ID, NodeID: s.NodeID,
					Message: fmt.Sprintf("%s snapshot %s is %s: %s", role, s.ID, fr, reason)}
				return nodeFail(c, args[0], err, "pass --allow-stale to compare it anyway")
			}
			o.warnf("%s snapshot %s is %s: %s", role, s.ID, fr, reason)
		}
		snaps[i] = s
	}
	strict, err := strictMode(c, run, snaps[0].Strict || snaps[1].Strict)
	if err != nil {
		return nodeFail(c, args[0], err)
	}
	return printDoc(o, node.DiffSnapshots(snaps[0], snaps[1], strict).Document())
}

func nodeReplay(c *cli.Context) error {
	args, run, err := nodeRun(c, "RUN", "SNAPSHOT")
	if err != nil {
		return err
	}
	s, _, err := run.LoadSnapshot(args[1])
	if err != nil {
		return nodeFail(c, args[0], err)
	}
	rp, err := run.TakeReplay(s, nodeNow(c))
	if err != nil {
		return nodeFail(c, args[0], err)
	}
	return printDoc(opts(c), rp.Document())
}

func nodeVerify(c *cli.Context) error {
	o := opts(c)
	args, run, err := nodeRun(c, "RUN", "REPLAY")
	if err != nil {
		return err
	}
	rp, _, err := run.LoadReplay(args[1])
	if err != nil {
		return nodeFail(c, args[0], err)
	}
	strict, err := strictMode(c, run, rp.Strict)
	if err != nil {
		return nodeFail(c, args[0], err)
	}
	v := run.Verify(rp, strict)
	if err := printDoc(o, v.Document()); err != nil {
		return err
	}
	if v.Pass {
		return nil
	}
	ids := make([]string, len(v.Findings))
	for i, f := range v.Findings {
		ids[i] = f.ID
	}
	// The verdict is the one document; the failure is told on stderr only.
	return exitErrorf(exitFailure, "replay %s does not match node %s as it is now: %s", rp.ID, rp.NodeID, strings.Join(ids, ", "))
}
