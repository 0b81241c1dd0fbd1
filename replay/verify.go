package replay

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Commit is one commit of the project's history, as verification needs it.
type Commit struct {
	ID       string
	Time     time.Time // committed
	Authored time.Time // the work's own time, which an amend or a rebase keeps
	Message  string
}

// LogFormat is the `git log` format ParseLog reads: run
// `git log -z --format=` + LogFormat. -z ends each record with NUL, which no
// commit message can contain.
const LogFormat = "%H %ct %at%n%B"

// ParseLog reads the output of `git log -z --format=` + LogFormat.
func ParseLog(out []byte) []Commit {
	var commits []Commit
	for _, rec := range bytes.Split(out, []byte{0}) {
		head, msg, _ := strings.Cut(strings.TrimLeft(string(rec), "\n"), "\n")
		f := strings.Fields(head)
		if len(f) < 2 || f[0] == "" {
			continue
		}
		secs, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		c := Commit{ID: f[0], Time: time.Unix(secs, 0).UTC(), Message: msg}
		c.Authored = c.Time
		if len(f) > 2 {
			if a, err := strconv.ParseInt(f[2], 10, 64); err == nil {
				c.Authored = time.Unix(a, 0).UTC()
			}
		}
		commits = append(commits, c)
	}
	return commits
}

// Verification is what verifying completed dispatches looks at.
type Verification struct {
	Kinds       RoleKinds
	Commits     []Commit    // the project's history
	ResultDirs  []string    // where result files live: the dispatch directory, its scratch copy
	Checkpoints []time.Time // boundary checkpoint times: the latest a dispatch's commits can be
	Warn        func(string)
	// CleanedUp says the pipeline finished and crucible's success cleanup
	// kept only its manifest and receipt ledger: a missing result file is then
	// expected, not evidence against the dispatch. The seqs taken as completed
	// on that ground are collected in Unkept.
	CleanedUp bool
	Unkept    []int
	// Lineage, when set, lets a redone mutating dispatch be verified by an
	// earlier attempt's commit whose changes are still all in the work tree
	// (see commitLineage).
	Lineage *LineageEvidence

	// WorkTree is where relative output paths named by dispatch files are
	// looked for first (evidence.go).
	WorkTree string
	// NoEvidence collects the output dispatches taken on their manifest
	// status because the run leaves no per-dispatch output evidence at all.
	NoEvidence []int
	// Replayed holds the seqs that replay an earlier dispatch: what they
	// left is not evidence of the replayed run's convention.
	Replayed map[int]bool

	evidence *runEvidence
	warned   map[string]bool
}

// commitSlack is how long after a dispatch ended its commit may still land.
const commitSlack = 60 * time.Second

// Verify checks one completed attempt by its role's kind.
func (v *Verification) Verify(d Dispatch, a Attempt) Finding {
	kind, known := v.Kinds.Kind(a.Role)
	if !known && v.Warn != nil {
		if v.warned == nil {
			v.warned = map[string]bool{}
		}
		if !v.warned[a.Role] {
			v.warned[a.Role] = true
			v.Warn(fmt.Sprintf("role %q is not in the role table; verified as output (set it with --role-kind %s=mutating|output|none)", a.Role, a.Role))
		}
	}
	f := Finding{Seq: a.Seq, Role: a.Role, Kind: kind}
	switch kind {
	case NoCheck:
		f.OK, f.Detail = true, "nothing to check"
	case Output:
		f.OK, f.Detail = v.outputEvidence(a)
	case Mutating:
		f.OK, f.Detail = v.commitLineage(d, a)
	}
	return f
}

// ResultFile is the name of the file an output-producing dispatch leaves:
// "<seq>-<template>-result.md".
func ResultFile(a Attempt) string {
	return fmt.Sprintf("%d-%s-result.md", a.Seq, Template(a))
}

// Template is the template name of a dispatch: its file name without the seq
// prefix and the .md suffix ("4-code-reviewer.md" -> "code-reviewer").
func Template(a Attempt) string {
	name := strings.TrimSuffix(a.File, ".md")
	if rest, ok := strings.CutPrefix(name, strconv.Itoa(a.Seq)+"-"); ok {
		return rest
	}
	if a.Role != "" && name == "" {
		return a.Role
	}
	return name
}

func (v *Verification) commit(a Attempt) (bool, string) {
	if found := v.commitsFor(a); len(found) > 0 {
		return true, found[0].why
	}
	start, end := v.window(a)
	if start.IsZero() {
		return false, "no commit names the task or matches the summary (the dispatch's time is unknown)"
	}
	window := "from " + start.Format(time.RFC3339)
	if !end.IsZero() {
		window += " to " + end.Format(time.RFC3339)
	}
	return false, "no commit " + window + " names the task or matches the summary"
}

// window is the time a's commits can carry: from its dispatch to its end plus
// commitSlack, or, without a duration, to the next boundary checkpoint (zero:
// unbounded).
func (v *Verification) window(a Attempt) (start, end time.Time) {
	start = a.Time
	if a.Duration != nil {
		return start, start.Add(time.Duration(*a.Duration)*time.Second + commitSlack)
	}
	// No duration recorded: the work must at least be committed before the
	// next boundary checkpoint was taken.
	for _, t := range v.Checkpoints {
		if t.After(start) && (end.IsZero() || t.Before(end)) {
			end = t
		}
	}
	return start, end
}

// commitEvidence is a commit that shows an attempt's work, and why.
type commitEvidence struct {
	commit Commit
	why    string
}

// commitsFor lists the commits that show a's work, strongest first: those in
// its window naming its task, then those matching its summary.
func (v *Verification) commitsFor(a Attempt) []commitEvidence {
	start, end := v.window(a)
	var inWindow []Commit
	for _, c := range v.Commits {
		// An unknown time (the dispatch file is gone, as after the cleanup of
		// a finished pipeline) leaves the whole history read as the window.
		// A commit counts when it was made, or its work authored, in the
		// window: an amend or a rebase moves the first, not the second.
		in := func(t time.Time) bool { return !t.Before(start) && (end.IsZero() || !t.After(end)) }
		if start.IsZero() || in(c.Time) || in(c.Authored) {
			inWindow = append(inWindow, c)
		}
	}
	// A commit naming the task is the strongest evidence; the summary's words
	// are the fallback for dispatches without a task.
	var found []commitEvidence
	if a.Task != nil {
		for _, c := range inWindow {
			if namesTask(c.Message, *a.Task) {
				found = append(found, commitEvidence{c, fmt.Sprintf("commit %s names task %d", short(c.ID), *a.Task)})
			}
		}
	}
	if words := significantWords(a.Summary); len(words) > 0 {
		for _, c := range inWindow {
			if a.Task != nil && (namesOtherTask(c.Message, *a.Task) || namesTask(c.Message, *a.Task)) {
				continue // another task's commit, whatever words it shares; or one found above
			}
			if sharesHalf(c.Message, words) {
				found = append(found, commitEvidence{c, fmt.Sprintf("commit %s matches the summary", short(c.ID))})
			}
		}
	}
	return found
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// namesTask reports whether a commit message names task k: "task 3", "Task-3",
// "task 3:", "TASK #3".
func namesTask(msg string, k int) bool {
	re := regexp.MustCompile(`(?i)\btask[\s_-]*#?` + strconv.Itoa(k) + `\b`)
	return re.MatchString(msg)
}

var anyTask = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?i)\btask[\s_-]*#?(\d+)\b`) })

// namesOtherTask reports whether a commit message names a task other than k.
func namesOtherTask(msg string, k int) bool {
	for _, m := range anyTask().FindAllStringSubmatch(msg, -1) {
		if m[1] != strconv.Itoa(k) {
			return true
		}
	}
	return false
}

var stopWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`about above after again against also because been before being below between both
		could does doing done down during each from further have having here into just like made make more most
		once only other over same should some such than that their them then there these they this those through
		under until very were what when where which while will with would your added adds update updated
		task tasks done	`) {
		stopWords[w] = true
	}
}

// significantWords are the distinct lower-case words of four or more letters
// that are not stop words.
func significantWords(s string) []string {
	seen := map[string]bool{}
	var out []string
	for _, w := range words(s) {
		if len([]rune(w)) >= 4 && !stopWords[w] && !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	return out
}

func words(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127)
	})
}

// sharesHalf reports whether msg contains at least half of words.
func sharesHalf(msg string, want []string) bool {
	have := map[string]bool{}
	for _, w := range words(msg) {
		have[w] = true
	}
	n := 0
	for _, w := range want {
		if have[w] {
			n++
		}
	}
	return 2*n >= len(want)
}
