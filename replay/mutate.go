package replay

import (
	"regexp"
	"strings"
	"sync"
)

// Template mutation (A/B replay): a dispatch whose template is ORIG is
// re-dispatched with REPL's text, carrying over what the orchestrator put into
// the original dispatch file.
//
// Crucible's templates hold free-text placeholders in brackets ("[FULL TEXT of
// the task spec from the plan]") that the orchestrator fills in, and the
// orchestrator adds sections the template does not have (cartographer
// context, defect signatures). Both are recovered by aligning the original
// template with the original dispatch body line by line:
//
//   - A template line without a placeholder matches a body line with the same
//     text (leading and trailing blanks aside: crucible's templates indent the
//     prompt inside a code block, and the dispatch file holds it unindented).
//   - A line with placeholders among other text matches a body line of that
//     shape; the text in place of each placeholder is its filling.
//   - A line that is a placeholder alone fills the body lines between the
//     matched lines around it (several lines, or none).
//   - Body lines between two matched lines that no placeholder explains are a
//     section the orchestrator added; so is the tail of a placeholder's filling
//     from a heading of the same or a higher level than the template's section
//     it sits in (a task spec's "### Steps" stays in the filling, a "##
//     Cartographer Context" after it is added). An added section keeps its
//     place relative to the template: after the same placeholder in REPL, else
//     after the same template line, else at the end.
//
// The lines are matched by a longest common subsequence, so a template line
// the dispatch lacks (a template's own title and usage notes around its prompt
// block) and a body line the template lacks never shift the rest.
//
// The alignment counts when at least MinAlignment of the template's literal
// text (its characters outside placeholders, on non-blank lines) is matched;
// below that, the template no longer describes the dispatch (it changed since
// the run, or the dispatch was written by hand) and the caller falls back to
// REPL's text with the original's added sections appended.

// MinAlignment is the share of the original template's literal text that must
// be found in the dispatch body for placeholder recovery to be trusted.
const MinAlignment = 0.5

// maxAlignCells bounds the alignment's table (template lines times body
// lines, 4 bytes each): a larger pair is taken as not aligned.
const maxAlignCells = 16 << 20

// Mutation is the result of carrying one dispatch over to a replacement
// template.
type Mutation struct {
	Body      string   // the new dispatch body (below the audit header)
	Aligned   bool     // the original template aligned with the body
	Ratio     float64  // the share of the template's literal text matched
	Recovered []string // REPL's placeholders filled from the original, in REPL order
	Unfilled  []string // REPL's placeholders the original template did not have
	Added     int      // sections the orchestrator added, carried over
}

// placeholderRE finds a bracketed placeholder. Markdown links ("[text](url)"),
// checkboxes ("[ ]", "[x]") and short tokens are not placeholders (see
// placeholders).
var placeholderRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[[^\[\]\n]+\]`) })

// placeholders returns the placeholder spans in line (start, end pairs).
func placeholders(line string) [][]int {
	var out [][]int
	for _, m := range placeholderRE().FindAllStringIndex(line, -1) {
		inner := line[m[0]+1 : m[1]-1]
		if len(strings.TrimSpace(inner)) < 3 || !strings.ContainsFunc(inner, isLetter) {
			continue
		}
		if m[1] < len(line) && line[m[1]] == '(' {
			continue // a markdown link
		}
		out = append(out, m)
	}
	return out
}

func isLetter(r rune) bool { return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' }

// tline is a template line as the alignment sees it.
type tline struct {
	text    string         // the line, unchanged
	trim    string         // without leading and trailing blanks
	block   string         // the placeholder when the line is one alone
	pattern *regexp.Regexp // for a line with placeholders among text
	names   []string       // its placeholders, in order
	literal int            // its literal characters (outside placeholders)
	heading int            // markdown heading level (0: not a heading)
}

func parseTemplate(text string) []tline {
	lines := splitLines(text)
	out := make([]tline, len(lines))
	for i, l := range lines {
		t := tline{text: l, trim: strings.TrimSpace(l), heading: headingLevel(l)}
		spans := placeholders(t.trim)
		switch {
		case len(spans) == 1 && spans[0][0] == 0 && spans[0][1] == len(t.trim):
			t.block = t.trim
		case len(spans) > 0:
			var re strings.Builder
			re.WriteString("^")
			prev := 0
			for _, s := range spans {
				re.WriteString(regexp.QuoteMeta(t.trim[prev:s[0]]))
				re.WriteString("(.*?)")
				t.names = append(t.names, t.trim[s[0]:s[1]])
				t.literal += len(strings.TrimSpace(t.trim[prev:s[0]]))
				prev = s[1]
			}
			re.WriteString(regexp.QuoteMeta(t.trim[prev:]))
			re.WriteString("$")
			t.literal += len(strings.TrimSpace(t.trim[prev:]))
			if t.pattern, _ = regexp.Compile(re.String()); t.pattern == nil {
				// Not valid UTF-8: matched as plain text.
				t.names, t.literal = nil, len(t.trim)
			}
		default:
			t.literal = len(t.trim)
		}
		out[i] = t
	}
	return out
}

// splitLines splits text into lines without their newlines; a final newline
// ends the last line rather than starting an empty one.
func splitLines(text string) []string {
	if text == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

func headingLevel(line string) int {
	t := strings.TrimSpace(line)
	n := 0
	for n < len(t) && t[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || n == len(t) || t[n] != ' ' {
		return 0
	}
	return n
}

// matches reports whether template line t can stand for body line b, with
// the fillings of t's inline placeholders.
func (t tline) matches(b string) (bool, []string) {
	bt := strings.TrimSpace(b)
	switch {
	case t.block != "" || t.trim == "":
		return false, nil
	case t.pattern != nil:
		m := t.pattern.FindStringSubmatch(bt)
		if m == nil {
			return false, nil
		}
		return true, m[1:]
	default:
		return bt == t.trim, nil
	}
}

// addedSection is a run of body lines the template does not explain, and
// where it sat: after template line anchor (-1: before the first), after the
// filling of placeholder afterPlaceholder when there is one.
type addedSection struct {
	lines            []string
	anchor           string // the trimmed template line it follows ("" at the start)
	afterPlaceholder string
}

// alignment is what the original dispatch body says about its template.
type alignment struct {
	ratio    float64
	fillings map[string][]string // placeholder -> its filling's lines (inline: one)
	added    []addedSection
	// kept[i] tells whether template line i was carried into the dispatch.
	kept   []bool
	indent int // leading blanks the orchestrator removed from template lines
}

// align matches the template's lines with the body's (a longest common
// subsequence over the lines that can match), then reads the fillings and
// the added sections from the gaps.
func align(tmpl []tline, body []string) alignment {
	n, m := len(tmpl), len(body)
	if n*m > maxAlignCells {
		return alignment{fillings: map[string][]string{}, kept: make([]bool, n)}
	}
	// lcs[i][j]: the longest match of tmpl[i:] and body[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			best := max(lcs[i+1][j], lcs[i][j+1])
			if ok, _ := tmpl[i].matches(body[j]); ok && lcs[i+1][j+1]+1 > best {
				best = lcs[i+1][j+1] + 1
			}
			lcs[i][j] = best
		}
	}
	type pair struct{ t, b int }
	var pairs []pair
	for i, j := 0, 0; i < n && j < m; {
		if ok, _ := tmpl[i].matches(body[j]); ok && lcs[i][j] == lcs[i+1][j+1]+1 {
			pairs = append(pairs, pair{i, j})
			i, j = i+1, j+1
			continue
		}
		if lcs[i+1][j] >= lcs[i][j+1] {
			i++
		} else {
			j++
		}
	}

	a := alignment{fillings: map[string][]string{}, kept: make([]bool, n)}
	total, matched := 0, 0
	for _, t := range tmpl {
		total += t.literal
	}
	indents := map[int]int{}
	for _, p := range pairs {
		t := tmpl[p.t]
		a.kept[p.t] = true
		matched += t.literal
		if _, fills := t.matches(body[p.b]); len(fills) > 0 {
			for k, name := range t.names {
				if _, seen := a.fillings[name]; !seen {
					a.fillings[name] = []string{fills[k]}
				}
			}
		}
		indents[leadingBlanks(t.text)-leadingBlanks(body[p.b])]++
	}
	if total > 0 {
		a.ratio = float64(matched) / float64(total)
	}
	bestCount := 0
	for d, c := range indents {
		if c > bestCount || c == bestCount && d < a.indent {
			a.indent, bestCount = d, c
		}
	}
	if a.indent < 0 {
		a.indent = 0
	}

	// The gaps: before the first pair, between pairs, after the last.
	bounds := append([]pair{{-1, -1}}, pairs...)
	bounds = append(bounds, pair{n, m})
	for k := 0; k+1 < len(bounds); k++ {
		lo, hi := bounds[k], bounds[k+1]
		anchor := ""
		if lo.t >= 0 {
			anchor = tmpl[lo.t].trim
		}
		a.gap(tmpl, lo.t, hi.t, body[lo.b+1:hi.b], anchor)
	}
	return a
}

// gap reads one stretch of body lines between two matched lines: the filling
// of the template's block placeholders there, and the sections added.
func (a *alignment) gap(tmpl []tline, tlo, thi int, lines []string, anchor string) {
	var blocks []string
	level := 0 // the heading level of the template section the gap is in
	for i := tlo; i >= 0; i-- {
		if tmpl[i].heading > 0 {
			level = tmpl[i].heading
			break
		}
	}
	for i := tlo + 1; i < thi; i++ {
		if tmpl[i].block != "" {
			blocks = append(blocks, tmpl[i].block)
			a.kept[i] = true
		}
	}
	lines = trimBlank(lines)
	if len(blocks) == 0 {
		if len(lines) > 0 {
			a.added = append(a.added, addedSection{lines: lines, anchor: anchor})
		}
		return
	}
	// The filling ends where a heading of the section's level (or higher)
	// starts a section of the orchestrator's own.
	cut := len(lines)
	for i, l := range lines {
		if h := headingLevel(l); h > 0 && (level == 0 || h <= level) {
			cut = i
			break
		}
	}
	if _, seen := a.fillings[blocks[0]]; !seen {
		a.fillings[blocks[0]] = trimBlank(lines[:cut])
	}
	for _, b := range blocks[1:] {
		// Several placeholders in one gap cannot be told apart: the first
		// takes the text, the others are filled with nothing.
		if _, seen := a.fillings[b]; !seen {
			a.fillings[b] = nil
		}
	}
	if rest := trimBlank(lines[cut:]); len(rest) > 0 {
		a.added = append(a.added, addedSection{lines: rest, anchor: anchor, afterPlaceholder: blocks[len(blocks)-1]})
	}
}

func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

func leadingBlanks(s string) int {
	return len(s) - len(strings.TrimLeft(s, " \t"))
}

// Mutate carries a dispatch body written from template orig over to the
// replacement template repl (see the comment at the top of this file).
func Mutate(orig, body, repl string) Mutation {
	tmpl := parseTemplate(orig)
	bodyLines := splitLines(body)
	a := align(tmpl, bodyLines)
	r := parseTemplate(repl)
	res := Mutation{Ratio: a.ratio, Aligned: a.ratio >= MinAlignment && len(tmpl) > 0}
	if !res.Aligned {
		return fallback(tmpl, bodyLines, repl, res)
	}

	// The template lines the orchestrator left out around what it used (a
	// template's title, usage notes and the code block its prompt sits in)
	// are left out of REPL too: REPL's lines before its first line the
	// original carried, up to the last of them the orchestrator left out of
	// the original ("prompt: |", the opening fence), go; so do its lines
	// after its last carried line from the first the orchestrator left out
	// (the closing fence). REPL's own new lines in between stay.
	kept, dropped := map[string]bool{}, map[string]bool{}
	for i, t := range tmpl {
		if t.trim == "" || t.block != "" {
			continue
		}
		if a.kept[i] {
			kept[t.trim] = true
		} else {
			dropped[t.trim] = true
		}
	}
	carried := func(t tline) bool {
		return t.trim != "" && (kept[t.trim] || t.block != "" && a.fillings[t.block] != nil)
	}
	first, last := -1, -1
	for i, t := range r {
		if carried(t) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	skip := make([]bool, len(r))
	if first >= 0 {
		cut := -1
		for i := 0; i < first; i++ {
			if dropped[r[i].trim] {
				cut = i
			}
		}
		for i := 0; i <= cut; i++ {
			skip[i] = true
		}
		for i := cut + 1; i < first && strings.TrimSpace(r[i].text) == ""; i++ {
			skip[i] = true
		}
		cut = len(r)
		for i := len(r) - 1; i > last; i-- {
			if dropped[r[i].trim] {
				cut = i
			}
		}
		for i := cut; i < len(r); i++ {
			skip[i] = true
		}
		for i := cut - 1; i > last && strings.TrimSpace(r[i].text) == ""; i-- {
			skip[i] = true
		}
	}

	var out []string
	placed := make([]bool, len(a.added))
	emitAdded := func(match func(addedSection) bool) {
		for k, s := range a.added {
			if !placed[k] && match(s) {
				placed[k] = true
				out = append(out, "")
				out = append(out, s.lines...)
			}
		}
	}
	emitAdded(func(s addedSection) bool { return s.anchor == "" && s.afterPlaceholder == "" })
	seen := map[string]bool{}
	note := func(name string, filled bool) {
		if seen[name] {
			return
		}
		seen[name] = true
		if filled {
			res.Recovered = append(res.Recovered, name)
		} else {
			res.Unfilled = append(res.Unfilled, name)
		}
	}
	rPlaceholders := map[string]bool{}
	rLines := map[string]bool{}
	for _, t := range r {
		rLines[t.trim] = true
		if t.block != "" {
			rPlaceholders[t.block] = true
		}
	}
	for i, t := range r {
		if skip[i] {
			continue
		}
		switch {
		case t.block != "":
			fill, ok := a.fillings[t.block]
			note(t.block, ok)
			if ok {
				out = append(out, fill...)
			} else {
				out = append(out, unindent(t.text, a.indent))
			}
			emitAdded(func(s addedSection) bool { return s.afterPlaceholder == t.block })
			continue
		case t.pattern != nil:
			line := unindent(t.text, a.indent)
			for _, name := range t.names {
				fill, ok := a.fillings[name]
				note(name, ok)
				if ok && len(fill) > 0 {
					line = strings.Replace(line, name, strings.Join(fill, "\n"), 1)
				}
			}
			out = append(out, line)
		default:
			out = append(out, unindent(t.text, a.indent))
		}
		if t.trim != "" {
			emitAdded(func(s addedSection) bool {
				return s.anchor == t.trim && (s.afterPlaceholder == "" || !rPlaceholders[s.afterPlaceholder])
			})
		}
	}
	// Sections whose place REPL no longer has go at the end.
	emitAdded(func(addedSection) bool { return true })
	res.Added = len(a.added)
	res.Body = joinLines(out, strings.HasSuffix(repl, "\n"))
	return res
}

// fallback is REPL's text as it is, with the original's added sections
// appended: the sections of the body (from a heading to the next of its level)
// whose heading neither the original template nor REPL has.
func fallback(tmpl []tline, body []string, repl string, res Mutation) Mutation {
	known := map[string]bool{}
	for _, t := range append(tmpl, parseTemplate(repl)...) {
		if t.heading > 0 {
			known[t.trim] = true
		}
	}
	out := splitLines(repl)
	for i := 0; i < len(body); i++ {
		h := headingLevel(body[i])
		if h == 0 || known[strings.TrimSpace(body[i])] {
			continue
		}
		end := i + 1
		for end < len(body) {
			if k := headingLevel(body[end]); k > 0 && k <= h {
				break
			}
			end++
		}
		out = append(out, "")
		out = append(out, trimBlank(body[i:end])...)
		res.Added++
		i = end - 1
	}
	for _, t := range parseTemplate(repl) {
		if t.block != "" {
			res.Unfilled = appendUnique(res.Unfilled, t.block)
		}
		for _, n := range t.names {
			res.Unfilled = appendUnique(res.Unfilled, n)
		}
	}
	res.Body = joinLines(out, strings.HasSuffix(repl, "\n"))
	return res
}

func appendUnique(list []string, s string) []string {
	for _, l := range list {
		if l == s {
			return list
		}
	}
	return append(list, s)
}

func unindent(line string, n int) string {
	k := 0
	for k < n && k < len(line) && (line[k] == ' ' || line[k] == '\t') {
		k++
	}
	return line[k:]
}

func joinLines(lines []string, newline bool) string {
	s := strings.Join(lines, "\n")
	if newline && s != "" {
		s += "\n"
	}
	return s
}

// Placeholders lists the distinct placeholders of a template, in order.
func Placeholders(template string) []string {
	var out []string
	for _, t := range parseTemplate(template) {
		if t.block != "" {
			out = appendUnique(out, t.block)
		}
		for _, n := range t.names {
			out = appendUnique(out, n)
		}
	}
	return out
}
