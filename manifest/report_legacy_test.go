package manifest

import (
	"strings"
	"testing"
)

// An older replay's status "replayed" is a warning, never an error: check
// does not fail on a manifest that carries it. Other unknown statuses stay
// errors.
func TestCheckLegacyReplayed(t *testing.T) {
	data := `{"seq":1,"status":"dispatched"}` + "\n" +
		`{"seq":1,"status":"replayed"}` + "\n" +
		`{"seq":2,"status":"dispatched","replay_of":1}` + "\n" +
		`{"seq":2,"status":"completed","replay_of":1}` + "\n" +
		`{"seq":3,"status":"dispatched"}` + "\n" +
		`{"seq":3,"status":"Replayed"}` + "\n"
	r := Check(openSample(t, data))
	var got []string
	for _, p := range r.Problems {
		got = append(got, p.Severity+":"+p.Kind+":"+p.Msg)
	}
	want := []string{
		"warning:legacy_status:seq 1 has the legacy status 'replayed' an older replay wrote (read as finished)",
		"error:unknown_status:seq 3 has an unknown status 'Replayed'",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r.Errors != 1 || r.Warnings != 1 {
		t.Errorf("%d errors, %d warnings", r.Errors, r.Warnings)
	}
}
