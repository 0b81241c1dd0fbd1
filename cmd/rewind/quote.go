package main

import (
	"fmt"
	"strings"
)

// gitQuotePath writes a path as git writes it in its path lists (diff
// --name-status, ls-files) with core.quotePath=false: as it is, unless it holds a
// control character, a double quote or a backslash; then in double quotes with
// C escapes (\t, \n, \", \\, \ooo for the other control characters). Bytes
// from 0x80 on pass as they are, as git passes them. A path one line can hold,
// that a terminal cannot be steered by.
func gitQuotePath(p string) string {
	need := false
	for i := 0; i < len(p) && !need; i++ {
		c := p[i]
		need = c < 0x20 || c == 0x7f || c == '"' || c == '\\'
	}
	if !need {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); {
		c := p[i]
		i++
		switch {
		case c == '\a':
			b.WriteString(`\a`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\v':
			b.WriteString(`\v`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
