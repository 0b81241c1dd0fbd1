package replay

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile("testdata/crucible/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// strictReviewer is crucible's real build reviewer template with one section
// replaced and a placeholder the original does not have.
func strictReviewer(t *testing.T) string {
	orig := readTestdata(t, "build-reviewer-prompt.md")
	i := strings.Index(orig, "    <!-- CANONICAL: shared/reviewer-common.md — Verification Principle -->")
	j := strings.Index(orig, "    **DO:**")
	if i < 0 || j < 0 {
		t.Fatal("the template changed: no Verification Principle section")
	}
	repl := orig[:i] + "    ## Strict Checklist\n\n    [The plan's acceptance criteria]\n\n    Fail the review on any unchecked item.\n\n" + orig[j:]
	return repl
}

func TestMutateRealCrucibleTemplate(t *testing.T) {
	orig := readTestdata(t, "build-reviewer-prompt.md")
	body := readTestdata(t, "build-reviewer-dispatch-body.md")
	m := Mutate(orig, body, strictReviewer(t))
	if !m.Aligned || m.Ratio < 0.8 {
		t.Fatalf("aligned %v at %.2f, want a clear alignment", m.Aligned, m.Ratio)
	}
	for _, want := range []string{
		"## Task That Was Implemented\n\nTask 3: add a retry budget to the HTTP client.\n\n### Steps\n1. Count attempts per request.\n2. Stop at 5.\n\n## Cartographer Context\n\nmodule http: client.go owns retries; conventions: errors wrapped with %w.\n\n## Implementer's Report\n\nChanged client.go and budget.go; 4 tests added, all pass.\n\n## Strict Checklist\n\n[The plan's acceptance criteria]\n\nFail the review on any unchecked item.\n\n**DO:**",
	} {
		if !strings.Contains(m.Body, want) {
			t.Errorf("body lacks\n%s\n---- body:\n%s", want, m.Body)
		}
	}
	for _, gone := range []string{"# Build Reviewer Prompt Template", "Use this template", "prompt: |", "```", "Do Not Trust the Report", "[FULL TEXT"} {
		if strings.Contains(m.Body, gone) {
			t.Errorf("body still holds %q", gone)
		}
	}
	if !strings.HasPrefix(m.Body, "You are a reviewer on a build team.") {
		t.Errorf("body starts %q", m.Body[:40])
	}
	if got := strings.Join(m.Unfilled, ","); got != "[The plan's acceptance criteria]" {
		t.Errorf("unfilled %q", got)
	}
	if !contains(m.Recovered, "[FULL TEXT of the task spec from the plan]") || !contains(m.Recovered, "[What the implementer reported: files changed, what they built, test results]") {
		t.Errorf("recovered %q", m.Recovered)
	}
	if m.Added != 1 {
		t.Errorf("added %d sections, want 1 (cartographer)", m.Added)
	}
}

// The identity mutation (REPL = ORIG) gives the original body back.
func TestMutateIdentity(t *testing.T) {
	orig := readTestdata(t, "build-reviewer-prompt.md")
	body := readTestdata(t, "build-reviewer-dispatch-body.md")
	m := Mutate(orig, body, orig)
	if m.Body != body {
		t.Errorf("identity mutation changed the body:\n%s", lineDiff(body, m.Body))
	}
}

func TestMutateFallback(t *testing.T) {
	orig := "# Reviewer\n\nCheck the code of [task].\n\nBe thorough and list findings.\n"
	body := "Something else entirely, written by hand.\n\n## Defect Signatures\n\nnil map write in cache.go\n"
	m := Mutate(orig, body, "# Strict\n\nReview [task] strictly.\n")
	if m.Aligned {
		t.Fatalf("aligned at %.2f", m.Ratio)
	}
	want := "# Strict\n\nReview [task] strictly.\n\n## Defect Signatures\n\nnil map write in cache.go\n"
	if m.Body != want {
		t.Errorf("fallback body\n%q\nwant\n%q", m.Body, want)
	}
	if m.Added != 1 || len(m.Unfilled) != 1 {
		t.Errorf("added %d unfilled %q", m.Added, m.Unfilled)
	}
}

func TestMutateInlineAndAddedAtAnchor(t *testing.T) {
	orig := "Review task [task number] of [feature].\n\n## Rules\n\nBe strict.\n"
	body := "Review task 3 of the retry client.\n\n## Rules\n\nBe strict.\n\n## Defect Signatures\n\nsig-1\n"
	repl := "Review [feature], task [task number], in one pass.\n\n## Rules\n\nPass when clean.\n"
	m := Mutate(orig, body, repl)
	want := "Review the retry client, task 3, in one pass.\n\n## Rules\n\nPass when clean.\n\n## Defect Signatures\n\nsig-1\n"
	if m.Body != want {
		t.Errorf("got\n%q\nwant\n%q", m.Body, want)
	}
}

func TestPlaceholders(t *testing.T) {
	got := Placeholders("a [link](x) [ ] [x] [FULL TEXT]\n[one thing] and [FULL TEXT]\n")
	if strings.Join(got, "|") != "[FULL TEXT]|[one thing]" {
		t.Errorf("got %q", got)
	}
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n- " + x + "\n+ " + y
		}
	}
	return ""
}

func FuzzMutate(f *testing.F) {
	f.Add("Review [task].\n\n## A\n\nx\n", "Review 3.\n\n## A\n\nx\n\n## B\n\ny\n", "[task] again\n")
	f.Add("", "", "")
	f.Add("[a][b]\n[c]\n", "[a][b]\n\n", "[c]\n[a]\n")
	f.Fuzz(func(t *testing.T, orig, body, repl string) {
		m := Mutate(orig, body, repl)
		if m.Ratio < 0 || m.Ratio > 1 {
			t.Fatalf("ratio %v", m.Ratio)
		}
		if !m.Aligned && m.Recovered != nil {
			t.Fatalf("recovered placeholders %q without an alignment", m.Recovered)
		}
		if m.Aligned && strings.Contains(repl, "\n") && m.Body == "" && strings.TrimSpace(repl) != "" {
			t.Fatalf("aligned mutation lost all of REPL %q", repl)
		}
	})
}
