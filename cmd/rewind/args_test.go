package main

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// testApp has the global flags and a command tree shaped like the real one, so
// the argument handling is tested independently of which groups are registered.
func testApp(got *[]string, dryRun *bool) *cli.App {
	app := newApp(strings.NewReader(""), io.Discard, io.Discard)
	restore := &cli.Command{
		Name: "restore",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run"},
			&cli.StringSliceFlag{Name: "file"},
			&cli.IntFlag{Name: "limit"},
		},
		Action: func(c *cli.Context) error {
			*got = c.Args().Slice()
			*dryRun = c.Bool("dry-run")
			if !opts(c).JSON {
				return errors.New("--json was not seen")
			}
			return nil
		},
	}
	app.Commands = append(app.Commands, &cli.Command{Name: "group", Subcommands: []*cli.Command{restore}})
	setUsageErrors(app.Commands)
	return app
}

func TestFlagsAnywhere(t *testing.T) {
	for _, line := range []string{
		"group restore X --dry-run --json",
		"group restore --dry-run X --json",
		"--json group restore X --dry-run",
		"group --json restore X --dry-run=true",
		"group restore X --file a --dry-run --json --limit 3",
		"group restore --json -- X --dry-run-is-a-path",
	} {
		var got []string
		var dry bool
		app := testApp(&got, &dry)
		args, err := reorderArgs(app, append([]string{"rewind"}, strings.Fields(line)...))
		if err == nil {
			err = app.Run(args)
		}
		if err != nil {
			t.Errorf("%s: %v", line, err)
			continue
		}
		wantDry := !strings.Contains(line, "-- X")
		if len(got) == 0 || got[0] != "X" || dry != wantDry {
			t.Errorf("%s: args %q dry-run %v", line, got, dry)
		}
	}
}

func TestBadArguments(t *testing.T) {
	for line, want := range map[string]string{
		"group restore X -x":          "unknown flag -x for rewind group restore",
		"group restore -5":            "unknown flag -5 for rewind group restore",
		"group nosuch":                `unknown command "nosuch" for rewind group`,
		"nosuch":                      `unknown command "nosuch" for rewind`,
		"group restore X --limit":     "flag --limit needs a value",
		"group restore X --limit abc": `invalid value "abc" for --limit`,
	} {
		var got []string
		var dry bool
		app := testApp(&got, &dry)
		args, err := reorderArgs(app, append([]string{"rewind"}, strings.Fields(line)...))
		if err == nil {
			err = app.Run(args)
		}
		var ce *cliError
		if !errors.As(err, &ce) || ce.code != exitUsage || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want usage error containing %q", line, err, want)
		}
		if dry {
			t.Errorf("%s: the action ran", line)
		}
	}
}
