package replay

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// The README's role table documents DefaultRoleKinds: every role of every kind,
// no more.
func TestREADMERoleTable(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\s*\\| (mutating|output|none) \\| (.+) \\|$")
	rows := row.FindAllStringSubmatch(string(readme), -1)
	if len(rows) != 3 {
		t.Fatalf("README has %d role table rows, want 3", len(rows))
	}
	k := DefaultRoleKinds()
	for _, r := range rows {
		var documented []string
		for _, cell := range strings.Split(r[2], ", ") {
			documented = append(documented, strings.Trim(cell, "`"))
		}
		sort.Strings(documented)
		if got, want := strings.Join(documented, " "), strings.Join(k.Names(RoleKind(r[1])), " "); got != want {
			t.Errorf("README %s roles:\n %s\nrole table:\n %s", r[1], got, want)
		}
	}
}
