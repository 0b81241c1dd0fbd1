package skills

import (
	"fmt"
	"strings"
)

// contextLines is how many unchanged lines a hunk shows around a change, as
// diff -u does.
const contextLines = 3

// maxDiffCells bounds the line-matching table; beyond it (a huge file in
// place of a skill) the diff replaces the whole file, still a correct patch.
const maxDiffCells = 16 << 20

// UnifiedDiff is the unified diff (diff -u) that turns old into new, with
// fromName and toName on the --- and +++ lines; "" when they are equal. A
// missing old file is fromName "/dev/null" and old nil.
func UnifiedDiff(fromName, toName string, old, new []byte) string {
	if string(old) == string(new) {
		return ""
	}
	a, b := splitLines(string(old)), splitLines(string(new))
	ops := editScript(a, b)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", fromName, toName)
	// Walk the script, cutting hunks where more than 2*contextLines equal
	// lines separate two changes.
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-contextLines, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*contextLines {
				end = min(end+contextLines, run)
				break
			}
			end = run
		}
		writeHunk(&out, ops[start:end])
		i = end
	}
	return out.String()
}

// line is one line with whether it ended with a newline (a file's last line
// may not).
type line struct {
	text string
	eol  bool
}

func splitLines(s string) []line {
	var out []line
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, line{s, false})
			break
		}
		out = append(out, line{s[:i], true})
		s = s[i+1:]
	}
	return out
}

// op is one step of an edit script: ' ' keep, '-' delete, '+' insert; aLine
// and bLine are the 1-based numbers of the line in old and new before it.
type op struct {
	kind         byte
	l            line
	aLine, bLine int
}

// editScript is a shortest edit script from a to b (longest common
// subsequence by dynamic programming: skill files are a few hundred lines).
func editScript(a, b []line) []op {
	n, m := len(a), len(b)
	if n*m > maxDiffCells {
		var ops []op
		for i, l := range a {
			ops = append(ops, op{'-', l, i + 1, 1})
		}
		for j, l := range b {
			ops = append(ops, op{'+', l, n + 1, j + 1})
		}
		return ops
	}
	// lcs[i][j] is the length of the longest common subsequence of a[i:] and b[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case a[i] == b[j]:
				lcs[i][j] = lcs[i+1][j+1] + 1
			case lcs[i+1][j] >= lcs[i][j+1]:
				lcs[i][j] = lcs[i+1][j]
			default:
				lcs[i][j] = lcs[i][j+1]
			}
		}
	}
	var ops []op
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			ops = append(ops, op{' ', a[i], i + 1, j + 1})
			i, j = i+1, j+1
		case j == m || (i < n && lcs[i+1][j] >= lcs[i][j+1]):
			ops = append(ops, op{'-', a[i], i + 1, j + 1})
			i++
		default:
			ops = append(ops, op{'+', b[j], i + 1, j + 1})
			j++
		}
	}
	return ops
}

func writeHunk(out *strings.Builder, ops []op) {
	aStart, bStart := ops[0].aLine, ops[0].bLine
	var aLen, bLen int
	for _, o := range ops {
		if o.kind != '+' {
			aLen++
		}
		if o.kind != '-' {
			bLen++
		}
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
	for _, o := range ops {
		fmt.Fprintf(out, "%c%s\n", o.kind, o.l.text)
		if !o.l.eol {
			out.WriteString("\\ No newline at end of file\n")
		}
	}
}

// hunkRange is diff -u's "start,length"; an empty range names the line before
// it, and a length of 1 is left out.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start-1)
	case 1:
		return fmt.Sprintf("%d", start)
	}
	return fmt.Sprintf("%d,%d", start, n)
}
