package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
)

// `rewind demo ab` shows an A/B replay on the demo's crashed pipeline: the
// implementer template is mutated to ask for a table test with each task,
// both arms re-dispatch the crashed wave in clones of the project, and the
// report shows the mutation winning over the control (its acceptance tests
// pass, the control's fail), while the project's work tree is left as it
// was.

func demoABCommand() *cli.Command {
	return &cli.Command{
		Name:      "ab",
		Usage:     "build the demo's crashed pipeline and run an A/B replay of it with a mutated template",
		ArgsUsage: " ",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "keep", Usage: "build in `DIR` (must not exist) and keep it", TakesFile: true},
		},
		Action: demoABRun,
	}
}

// demoImplementerTemplate is the template the demo's implementer dispatch
// files were written from; demoTestedTemplate is the mutation.
const demoImplementerTemplate = `# Implementer Prompt Template

` + "```" + `
  prompt: |
    You are the [role] of phase [phase]. Implement task [task number]: write [file] and commit it as "task [task number]: ...".
` + "```" + `
`

const demoTestedTemplate = `# Implementer Prompt Template (tested)

` + "```" + `
  prompt: |
    You are the [role] of phase [phase]. Implement task [task number]: write [file] and commit it as "task [task number]: ...".

    With it, write a table test and run the acceptance tests before you commit.
` + "```" + `
`

func demoABRun(c *cli.Context) error {
	o := opts(c)
	if err := noArgs(c); err != nil {
		return err
	}
	d, cleanup, err := newDemo(c, "rewind-demo-ab-")
	defer cleanup()
	if err != nil {
		return err
	}
	root := d.root
	templates := filepath.Join(root, "templates")
	if err := os.MkdirAll(templates, 0o755); err != nil {
		return err
	}
	old := demoTime(-60) // the templates predate the run: no staleness warning
	for name, text := range map[string]string{
		filepath.Join(templates, "implementer.md"):   demoImplementerTemplate,
		filepath.Join(root, "implementer-tested.md"): demoTestedTemplate,
	} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			return err
		}
		if err := os.Chtimes(name, old, old); err != nil {
			return err
		}
	}
	if o.JSON {
		return d.abJSON(templates, filepath.Join(root, "implementer-tested.md"), c.String("keep") != "")
	}
	return d.ab(templates, filepath.Join(root, "implementer-tested.md"))
}

// abJSON is demo ab under --json: the same steps, each command's own --json
// document in one document, and whether the project was left as it was. The
// commands' notes go to stderr.
func (d *demo) abJSON(templates, mutation string, kept bool) error {
	doc := map[string]any{"root": d.root, "root_kept": kept, "project": d.proj, "scratch_dir": d.scratch,
		"dispatch_dir": d.dispatchDir, "store": d.store, "templates_dir": templates, "mutation_file": mutation}
	before, err := treeDigest(d.proj)
	if err != nil {
		return err
	}
	agent, err := demoAgentCommand()
	if err != nil {
		return err
	}
	mutate := "implementer.md=" + mutation
	if err := d.jsonStep(doc, "replay_plan", demoTime(30), "replay", d.scratch, "--mutate", mutate, "--templates", templates, "--dry-run"); err != nil {
		return err
	}
	defer setDemoRunEnv("demo-ab")()
	if err := d.jsonStep(doc, "replay_run", demoTime(30), "replay", d.scratch, "--mutate", mutate, "--templates", templates,
		"--exec", agent, "--diff"); err != nil {
		return err
	}
	after, err := treeDigest(d.proj)
	if err != nil {
		return err
	}
	doc["project_unchanged"] = before == after
	if err := d.jsonStep(doc, "checkpoint_list", demoTime(40), "checkpoint", "list", "--limit", "2"); err != nil {
		return err
	}
	return writeJSON(d.o, doc)
}

func (d *demo) ab(templates, mutation string) error {
	w := d.o.Stdout
	fmt.Fprintf(w, "rewind demo ab: an A/B replay of a crashed build pipeline, in %s\n", d.root)
	fmt.Fprintf(w, "  project:  %s (git, branch main)\n  dispatch: %s\n  template: %s\n  mutation: %s\n",
		d.proj, d.dispatchDir, filepath.Join(templates, "implementer.md"), mutation)
	before, err := treeDigest(d.proj)
	if err != nil {
		return err
	}
	agent, err := demoAgentCommand()
	if err != nil {
		return err
	}
	mutate := "implementer.md=" + mutation
	d.section("The mutation, changing nothing: rewind replay " + d.scratch + " --mutate " + mutate + " --templates " + templates + " --dry-run")
	var plan strings.Builder
	if err := d.rewind(&plan, demoTime(30), "replay", d.scratch, "--mutate", mutate, "--templates", templates, "--dry-run"); err != nil {
		return err
	}
	// The resume plan is the first demo's; the A/B part is what is new here.
	text := plan.String()
	if i := strings.Index(text, "\n## Template Mutations"); i >= 0 {
		text = text[i+1:]
	}
	fmt.Fprint(w, text)

	d.section("Both arms, in clones of the project: rewind replay " + d.scratch + " --mutate " + mutate + " --templates " + templates + " --exec \"" + agent + "\" --diff")
	defer setDemoRunEnv("demo-ab")()
	if err := d.rewind(w, demoTime(30), "replay", d.scratch, "--mutate", mutate, "--templates", templates, "--exec", agent, "--diff"); err != nil {
		return err
	}
	after, err := treeDigest(d.proj)
	if err != nil {
		return err
	}
	d.section("The project's work tree and .git")
	if before == after {
		fmt.Fprintln(w, "Unchanged, byte for byte: the arms ran in clones.")
	} else {
		fmt.Fprintln(w, "CHANGED: this is a bug in rewind.")
	}
	d.section("The arms' trees are checkpoints: the mutated one can be restored into the project")
	if err := d.rewind(w, demoTime(40), "checkpoint", "list", "--limit", "2"); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nrewind checkpoint restore ab-demo-ab-mutated-1 takes the winning tree.\n")
	return nil
}

// treeDigest lists every file under dir, .git included, with its size and
// content, as one string to compare.
func treeDigest(dir string) (string, error) {
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %v %d\n", rel, fi.Mode(), fi.Size())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.Write(data)
		}
		return nil
	})
	return b.String(), err
}
