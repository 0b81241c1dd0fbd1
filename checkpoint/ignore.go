package checkpoint

import (
	"bytes"
	"path"
	"strings"
)

// ignorePatterns is a list of gitignore patterns, matched as git matches the
// patterns of one file: the last pattern that matches a path decides, and a
// path below an excluded directory is excluded whatever later patterns say.
// rewind matches two lists itself, with a precedence above every file git
// reads: the default excludes and the work tree's .rewindignore. (git can apply
// patterns with that precedence to the files it lists, with ls-files
// --exclude, but it cannot judge a path that does not exist, as a restore must.)
type ignorePatterns []ignorePattern

type ignorePattern struct {
	glob     string // without the leading '!' or '/' and the trailing '/'
	negate   bool   // '!': re-includes
	dirOnly  bool   // a trailing '/': matches directories only
	anchored bool   // a '/' before the end: matched against the whole path
}

// parseIgnore reads gitignore lines as git does: a leading UTF-8 BOM, blank
// lines and '#' comments are skipped, trailing spaces dropped unless escaped,
// "\#" and "\!" escape their character.
func parseIgnore(data []byte) ignorePatterns {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")) // a UTF-8 BOM, which git skips
	var ps ignorePatterns
	for _, line := range bytes.Split(data, []byte("\n")) {
		s := strings.TrimSuffix(string(line), "\r")
		s = trimTrailingSpaces(s)
		if s == "" || s[0] == '#' {
			continue
		}
		var p ignorePattern
		if s[0] == '!' {
			p.negate = true
			s = s[1:]
		}
		if strings.HasSuffix(s, "/") {
			p.dirOnly = true
			s = strings.TrimSuffix(s, "/")
		}
		if s == "" {
			continue
		}
		if strings.Contains(s, "/") {
			p.anchored = true
			s = strings.TrimPrefix(s, "/")
		}
		p.glob = s
		ps = append(ps, p)
	}
	return ps
}

// trimTrailingSpaces drops trailing spaces that no backslash escapes.
func trimTrailingSpaces(s string) string {
	end := len(s)
	for end > 0 && s[end-1] == ' ' {
		// count the backslashes before this space
		n := 0
		for i := end - 2; i >= 0 && s[i] == '\\'; i-- {
			n++
		}
		if n%2 == 1 {
			break
		}
		end--
	}
	return s[:end]
}

// excluded reports whether rel (slash-separated, relative to the root the
// patterns belong to) is excluded; isDir is the type of rel itself (its parents
// are directories).
func (ps ignorePatterns) excluded(rel string, isDir bool) bool {
	if len(ps) == 0 {
		return false
	}
	for i := 0; i < len(rel); i++ {
		if rel[i] == '/' && ps.match(rel[:i], true) {
			return true
		}
	}
	return ps.match(rel, isDir)
}

// match applies the patterns to one path, its parents aside.
func (ps ignorePatterns) match(rel string, isDir bool) bool {
	excluded, _ := ps.lastMatch(rel, isDir)
	return excluded
}

// lastMatch finds the last pattern matching rel: whether it excludes, and
// whether any pattern matched at all.
func (ps ignorePatterns) lastMatch(rel string, isDir bool) (excluded, matched bool) {
	base := path.Base(rel)
	for i := len(ps) - 1; i >= 0; i-- {
		p := ps[i]
		if p.dirOnly && !isDir {
			continue
		}
		var ok bool
		if p.anchored {
			// As git does, compare the literal start and wildmatch only the
			// rest, which is not the same: "/a**" then matches "ab/c", its
			// "**" taken as a leading one.
			lit := literalPrefix(p.glob)
			ok = strings.HasPrefix(rel, lit) && wildmatch(p.glob[len(lit):], rel[len(lit):], true)
		} else {
			ok = wildmatch(p.glob, base, false)
		}
		if ok {
			return !p.negate, true
		}
	}
	return false, false
}

// wildmatch is git's wildmatch (wildmatch.c), case-sensitive: '*' and '?' do
// not match '/' when pathname is set, "**" between slashes matches any number
// of directories, brackets take ranges, negation ('!' or '^') and [:classes:],
// and a backslash escapes the next character.
func wildmatch(pattern, text string, pathname bool) bool {
	return dowild(pattern, text, pathname) == wmMatch
}

const (
	wmMatch = iota
	wmNoMatch
	wmAbortAll
	wmAbortToStarStar
)

func dowild(p, text string, pathname bool) int {
	pi, ti := 0, 0
	for ; pi < len(p); pi, ti = pi+1, ti+1 {
		pch := p[pi]
		var tch byte
		if ti < len(text) {
			tch = text[ti]
		} else if pch != '*' {
			return wmAbortAll
		}
		switch pch {
		case '\\':
			pi++
			if pi >= len(p) || tch != p[pi] {
				return wmNoMatch
			}
			continue
		case '?':
			if pathname && tch == '/' {
				return wmNoMatch
			}
			continue
		case '*':
			matchSlash := !pathname
			pi++
			if pi < len(p) && p[pi] == '*' {
				prev := pi - 2
				for pi < len(p) && p[pi] == '*' {
					pi++
				}
				if (prev < 0 || p[prev] == '/') &&
					(pi == len(p) || p[pi] == '/' || (p[pi] == '\\' && pi+1 < len(p) && p[pi+1] == '/')) {
					if pi < len(p) && p[pi] == '/' && dowild(p[pi+1:], text[ti:], pathname) == wmMatch {
						return wmMatch
					}
					matchSlash = true
				} else {
					matchSlash = false
				}
			}
			if pi == len(p) {
				// A trailing "**" matches everything, a trailing "*" only what
				// holds no further slash.
				if !matchSlash && strings.Contains(text[ti:], "/") {
					return wmNoMatch
				}
				return wmMatch
			}
			if !matchSlash && p[pi] == '/' {
				// one '*' then '/': skip to the next directory
				slash := strings.IndexByte(text[ti:], '/')
				if slash < 0 {
					return wmNoMatch
				}
				ti += slash
				// the for loop consumes the slash of both
				continue
			}
			for {
				if ti >= len(text) {
					break
				}
				tch = text[ti]
				// A literal after the star: skip ahead to its next occurrence.
				if !isGlobSpecial(p[pi]) {
					lit := p[pi]
					for ti < len(text) && (matchSlash || text[ti] != '/') && text[ti] != lit {
						ti++
					}
					if ti >= len(text) || text[ti] != lit {
						return wmNoMatch
					}
					tch = text[ti]
				}
				if m := dowild(p[pi:], text[ti:], pathname); m != wmNoMatch {
					if !matchSlash || m != wmAbortToStarStar {
						return m
					}
				} else if !matchSlash && tch == '/' {
					return wmAbortToStarStar
				}
				ti++
			}
			return wmAbortAll
		case '[':
			pi++
			if pi >= len(p) {
				return wmAbortAll
			}
			pch = p[pi]
			if pch == '^' {
				pch = '!'
			}
			negated := pch == '!'
			if negated {
				pi++
				if pi >= len(p) {
					return wmAbortAll
				}
				pch = p[pi]
			}
			var prev byte
			matched := false
			for {
				switch {
				case pch == '\\':
					pi++
					if pi >= len(p) {
						return wmAbortAll
					}
					pch = p[pi]
					if tch == pch {
						matched = true
					}
				case pch == '-' && prev != 0 && pi+1 < len(p) && p[pi+1] != ']':
					pi++
					pch = p[pi]
					if pch == '\\' {
						pi++
						if pi >= len(p) {
							return wmAbortAll
						}
						pch = p[pi]
					}
					if tch <= pch && tch >= prev {
						matched = true
					}
					pch = 0 // so that prev becomes 0
				case pch == '[' && pi+1 < len(p) && p[pi+1] == ':':
					// "[:class:]": git takes the first ']' and wants ':'
					// before it; otherwise the '[' is an ordinary character.
					start := pi + 2
					end := start
					for end < len(p) && p[end] != ']' {
						end++
					}
					if end >= len(p) {
						return wmAbortAll
					}
					if end-start-1 < 0 || p[end-1] != ':' {
						if tch == '[' {
							matched = true
						}
						break
					}
					in, known := inClass(p[start:end-1], tch)
					if !known {
						return wmAbortAll
					}
					if in {
						matched = true
					}
					pi = end
					pch = 0
				default:
					if tch == pch {
						matched = true
					}
				}
				prev = pch
				pi++
				if pi >= len(p) {
					return wmAbortAll
				}
				pch = p[pi]
				if pch == ']' {
					break
				}
			}
			if matched == negated || (pathname && tch == '/') {
				return wmNoMatch
			}
			continue
		default:
			if tch != pch {
				return wmNoMatch
			}
			continue
		}
	}
	if ti < len(text) {
		return wmNoMatch
	}
	return wmMatch
}

// literalPrefix is the start of a pattern before its first special character.
func literalPrefix(glob string) string {
	for i := 0; i < len(glob); i++ {
		if isGlobSpecial(glob[i]) {
			return glob[:i]
		}
	}
	return glob
}

func isGlobSpecial(c byte) bool {
	return c == '*' || c == '?' || c == '[' || c == '\\'
}

// inClass reports whether c is in the POSIX class, and whether the class is
// one git knows.
func inClass(class string, c byte) (in, known bool) {
	switch class {
	case "alnum":
		return isAlpha(c) || isDigit(c), true
	case "alpha":
		return isAlpha(c), true
	case "blank":
		return c == ' ' || c == '\t', true
	case "cntrl":
		return c < 0x20 || c == 0x7f, true
	case "digit":
		return isDigit(c), true
	case "graph":
		return c > 0x20 && c < 0x7f, true
	case "lower":
		return c >= 'a' && c <= 'z', true
	case "print":
		return c >= 0x20 && c < 0x7f, true
	case "punct":
		return c > 0x20 && c < 0x7f && !isAlpha(c) && !isDigit(c), true
	case "space":
		return c == ' ' || (c >= '\t' && c <= '\r'), true
	case "upper":
		return c >= 'A' && c <= 'Z', true
	case "xdigit":
		return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'), true
	}
	return false, false
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
