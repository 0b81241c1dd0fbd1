package node

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// droppedKeys are the timestamp keys cool-workflow's normalizeValue drops at
// every depth (only these exact names: startedAt is kept).
var droppedKeys = map[string]bool{
	"createdAt": true, "updatedAt": true, "recordedAt": true,
	"selectedAt": true, "replayedAt": true, "generatedAt": true,
}

// isPathKey reports whether key is one whose value cool-workflow forces
// through String() before scrubbing it.
func isPathKey(key string) bool {
	return strings.HasSuffix(key, "Path") || strings.HasSuffix(key, "Dir") ||
		key == "path" || key == "cwd" || key == "runDir"
}

// jsSpace is JavaScript's \s (Go's \s is ASCII only, and lacks \v).
const jsSpace = `\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}`

// scrubs are normalizeString's replacements, applied in this order to every
// string.
var scrubs = sync.OnceValue(func() []scrub {
	return []scrub{
		{regexp.MustCompile(`[0-9]{8}T[0-9]{6}Z`), "<timestamp>"},
		{regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+Z`), "<timestamp>"},
		{regexp.MustCompile(`/[^"` + jsSpace + `]+/\.cw/runs/[^"` + jsSpace + `/]+`), "<run-dir>"},
		{regexp.MustCompile(`/[^"` + jsSpace + `]+/\.cw/evals/[^"` + jsSpace + `/]+`), "<eval-dir>"},
		{regexp.MustCompile(`/var/folders/[^"` + jsSpace + `]+|/tmp/[^"` + jsSpace + `]+|/private/tmp/[^"` + jsSpace + `]+`), "<tmp>"},
	}
})

type scrub struct {
	re   *regexp.Regexp
	repl string
}

// NormalizeString scrubs timestamps and run, eval and temporary directory
// paths out of s, as cool-workflow's normalizeString does (paths under /home
// or /Users are kept).
func NormalizeString(s string) string {
	for _, sc := range scrubs() {
		if sc.re.MatchString(s) {
			s = sc.re.ReplaceAllLiteralString(s, sc.repl)
		}
	}
	return s
}

// Normalize is cool-workflow's normalizeValue: keys sorted (UTF-16 order) at
// every depth, array order kept, the timestamp keys dropped, path-like keys'
// values turned into scrubbed strings, and every string scrubbed. The input
// is not changed.
func Normalize(v any) any {
	switch x := v.(type) {
	case string:
		return NormalizeString(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Normalize(e)
		}
		return out
	case *Object:
		keys := append([]string(nil), x.Keys...)
		sortUTF16(keys)
		out := &Object{Vals: make(map[string]any, len(keys))}
		for _, k := range keys {
			// An assignment to "__proto__" sets the prototype in JavaScript: the
			// key never reaches the output.
			if droppedKeys[k] || k == "__proto__" {
				continue
			}
			if isPathKey(k) {
				out.Set(k, NormalizeString(ToString(x.Vals[k])))
			} else {
				out.Set(k, Normalize(x.Vals[k]))
			}
		}
		return out
	}
	return v
}

func sortUTF16(s []string) {
	sort.SliceStable(s, func(i, j int) bool { return CompareUTF16(s[i], s[j]) < 0 })
}

// StableString is replayStableStringify: the compact JSON of Normalize(v), the
// one serialisation that snapshot, diff and replay bytes are compared in.
// undefined (a missing value) has no serialisation; ok is false then.
func StableString(v any, present bool) (s string, ok bool) {
	if !present {
		return "", false
	}
	return string(AppendCompact(nil, Normalize(v))), true
}

// sortedCompact is stableStringify: compact JSON with keys sorted at every
// depth and nothing dropped or scrubbed. It is what the strict content hash
// covers.
func sortedCompact(dst []byte, v any) []byte {
	switch x := v.(type) {
	case []any:
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = sortedCompact(dst, e)
		}
		return append(dst, ']')
	case *Object:
		keys := append([]string(nil), x.Keys...)
		sortUTF16(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, k)
			dst = append(dst, ':')
			dst = sortedCompact(dst, x.Vals[k])
		}
		return append(dst, '}')
	}
	return AppendCompact(dst, v)
}

// FingerprintStrings is cool-workflow's fingerprintStrings: "sha256:" and the
// first 32 hex digits of the SHA-256 of the JSON array of the strings, sorted
// in UTF-16 order (a sorted copy; values is not changed).
func FingerprintStrings(values []string) string {
	sorted := append([]string(nil), values...)
	sortUTF16(sorted)
	arr := make([]any, len(sorted))
	for i, s := range sorted {
		arr[i] = s
	}
	sum := sha256.Sum256(AppendCompact(nil, arr))
	return "sha256:" + hex.EncodeToString(sum[:])[:32]
}

// sha256Hex is "sha256:" and the 64 hex digits of data's SHA-256.
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}
