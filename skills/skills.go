// Package skills holds the drop-in agent files rewind ships and installs: the
// SKILL.md procedures (checkpoint, replay, dispatch) that tell a model which
// rewind command to run at each step, and the Claude Code hooks configuration
// that checkpoints the work tree after every tool call that can change files.
//
// The SKILL.md files are embedded in the binary. To tell a file the user
// edited from one an older rewind wrote, shipped.txt lists the SHA-256 of
// every version of every SKILL.md rewind ever shipped: an installed file whose
// hash is on that list is rewind's own and may be replaced; any other content
// is the user's and is kept unless the install is forced. A test keeps the
// current versions on the list, so editing a SKILL.md means appending a line.
//
// This package prints nothing and starts no process; cmd/rewind renders its
// results.
package skills

import (
	"bufio"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
)

//go:embed */SKILL.md
var embedded embed.FS

//go:embed shipped.txt
var shippedList string

// FileName is the name of a skill's file inside its directory.
const FileName = "SKILL.md"

// Skill is one drop-in skill as this rewind ships it.
type Skill struct {
	Name    string // its directory: checkpoint, dispatch, replay
	Content []byte
}

// Path is the skill's file relative to a skills directory: <name>/SKILL.md.
func (s Skill) Path() string { return path.Join(s.Name, FileName) }

// All returns every embedded skill, by name.
func All() []Skill {
	matches, err := fs.Glob(embedded, "*/"+FileName)
	if err != nil {
		panic(err) // a malformed pattern: a bug, not an input
	}
	sort.Strings(matches)
	var out []Skill
	for _, m := range matches {
		data, err := embedded.ReadFile(m)
		if err != nil {
			panic(err) // the file was embedded a moment ago
		}
		out = append(out, Skill{Name: path.Dir(m), Content: data})
	}
	return out
}

// Hash is the hex SHA-256 of content, as shipped.txt records it.
func Hash(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// shipped maps "<name>/SKILL.md" to the hashes of every version rewind has
// shipped of it.
func shipped() (map[string]map[string]bool, error) {
	out := map[string]map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(shippedList))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 || len(f[0]) != 64 || strings.Trim(f[0], "0123456789abcdef") != "" {
			return nil, fmt.Errorf("shipped.txt line %d: want <sha256> <name>/SKILL.md, got %q", n, line)
		}
		if out[f[1]] == nil {
			out[f[1]] = map[string]bool{}
		}
		out[f[1]][f[0]] = true
	}
	return out, nil
}

// WasShipped reports whether content is a version of the skill file rel
// ("<name>/SKILL.md") that some rewind shipped.
func WasShipped(rel string, content []byte) bool {
	list, err := shipped()
	return err == nil && list[rel][Hash(content)]
}
