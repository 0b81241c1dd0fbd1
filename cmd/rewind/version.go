package main

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/rewind-cli/rewind/gitexec"
)

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print rewind's version and the git it uses",
		Description: "Prints rewind's version, then the version of the git found on PATH. A missing git,\n" +
			"or one older than " + gitexec.MinVersion + ", is an error (exit 1): rewind cannot work without it.",
		Action: func(c *cli.Context) error {
			o := opts(c)
			if err := noArgs(c); err != nil {
				return err
			}
			gitVersion, gitErr := gitexec.Version(c.Context)
			if o.JSON {
				// git: null when no git was found (a git too old is named).
				doc := map[string]any{"version": version, "go": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH, "git": strPtr(gitVersion)}
				if err := writeJSON(o, doc); err != nil {
					return err
				}
				return gitErr
			}
			fmt.Fprintf(o.Stdout, "rewind %s\n", version)
			if gitErr != nil {
				return gitErr
			}
			fmt.Fprintf(o.Stdout, "git %s\n", gitVersion)
			return nil
		},
	}
}

// noArgs refuses positional arguments for a command that takes none.
func noArgs(c *cli.Context) error {
	if c.NArg() > 0 {
		return usageErrorf("%s takes no arguments; got %q", commandName(c), c.Args().First())
	}
	return nil
}

// commandName is the command being run as the user typed it: "checkpoint show".
func commandName(c *cli.Context) string {
	var names []string
	for _, ctx := range c.Lineage() {
		if ctx.Command != nil && ctx.Command.Name != "" && ctx.Command.Name != c.App.Name {
			names = append([]string{ctx.Command.Name}, names...)
		}
	}
	return strings.Join(names, " ")
}
