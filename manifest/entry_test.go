package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

func sp(s string) *string { return &s }
func ip(n int64) *int64   { return &n }

// The expected lines below are what dispatch.py's json.dumps writes for the same
// entries (generated with Python 3 from a model of dispatch.py's before/after).
const wantBefore1 = "{\x22seq\x22:1,\x22file\x22:\x221-plan-writer.md\x22,\x22role\x22:\x22plan-writer\x22,\x22phase\x22:\x222\x22,\x22task\x22:null,\x22status\x22:\x22dispatched\x22,\x22duration_s\x22:null,\x22summary\x22:null,\x22input_chars\x22:12840,\x22output_chars\x22:null,\x22model_tier\x22:\x22opus\x22,\x22tool_calls\x22:null,\x22model_profile\x22:\x22high\x22}"

func before1() Dispatched {
	return Dispatched{Seq: 1, File: "1-plan-writer.md", Role: "plan-writer", Phase: sp("2"), InputChars: ip(12840), ModelTier: sp("opus")}
}

func TestDispatchedLine(t *testing.T) {
	cases := []struct {
		name string
		d    Dispatched
		want string
	}{
		{"opus", before1(), wantBefore1},
		{"unknown label", Dispatched{Seq: 2, File: "2-x.md", Role: "implementer", Task: ip(3), ModelTier: sp("provider/custom-model")},
			"{\x22seq\x22:2,\x22file\x22:\x222-x.md\x22,\x22role\x22:\x22implementer\x22,\x22phase\x22:null,\x22task\x22:3,\x22status\x22:\x22dispatched\x22,\x22duration_s\x22:null,\x22summary\x22:null,\x22input_chars\x22:null,\x22output_chars\x22:null,\x22model_tier\x22:\x22provider/custom-model\x22,\x22tool_calls\x22:null,\x22model_profile\x22:null}"},
		{"neutral profile", Dispatched{Seq: 3, File: "3-x.md", Role: "r", Phase: sp("3"), InputChars: ip(0), ModelTier: sp("standard")},
			"{\x22seq\x22:3,\x22file\x22:\x223-x.md\x22,\x22role\x22:\x22r\x22,\x22phase\x22:\x223\x22,\x22task\x22:null,\x22status\x22:\x22dispatched\x22,\x22duration_s\x22:null,\x22summary\x22:null,\x22input_chars\x22:0,\x22output_chars\x22:null,\x22model_tier\x22:\x22standard\x22,\x22tool_calls\x22:null,\x22model_profile\x22:\x22standard\x22}"},
		{"oversized tier", Dispatched{Seq: 4, File: "4-x.md", Role: "r", Phase: sp("3"), InputChars: ip(10), ModelTier: sp(strings.Repeat("x", 4100))},
			"{\x22seq\x22:4,\x22file\x22:\x224-x.md\x22,\x22role\x22:\x22r\x22,\x22phase\x22:\x223\x22,\x22task\x22:null,\x22status\x22:\x22dispatched\x22,\x22duration_s\x22:null,\x22summary\x22:null,\x22input_chars\x22:10,\x22output_chars\x22:null,\x22model_tier\x22:null,\x22tool_calls\x22:null,\x22model_profile\x22:null}"},
	}
	for _, c := range cases {
		var warn bytes.Buffer
		got := string(Fit(c.d.Record(), nil, &warn))
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
		if warn.Len() > 0 {
			t.Errorf("%s: warning %q", c.name, warn.String())
		}
	}
}

func TestReplayProvenanceOnlyWhenSet(t *testing.T) {
	d := before1()
	d.ReplayOf, d.ReplaySession, d.Mutation = ip(1), sp("r-1"), sp("a.md -> b.md")
	got := string(d.Record().Bytes())
	want := strings.TrimSuffix(wantBefore1, "}") + `,"replay_of":1,"replay_session":"r-1","mutation":"a.md -> b.md"}`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	c := Completion{Seq: 1, Status: "completed"}
	line := string(c.Record(mustPy(t, got)).Bytes())
	if !strings.HasSuffix(line, `"actual_model":null,"replay_of":1,"replay_session":"r-1","mutation":"a.md -> b.md"}`) {
		t.Errorf("completion does not copy the provenance: %s", line)
	}
}

func TestCompletionLine(t *testing.T) {
	c := Completion{Seq: 1, Status: "completed", Summary: sp("Plan written: 8 tasks, 3 waves <ok> & 😀 e\u0301 \u2028 \x01\t"),
		OutputChars: ip(8200), ToolCalls: ip(5), Duration: ip(83), ActualModel: sp("observed-model")}
	want := "{\x22seq\x22:1,\x22file\x22:\x221-plan-writer.md\x22,\x22role\x22:\x22plan-writer\x22,\x22phase\x22:\x222\x22,\x22task\x22:null,\x22status\x22:\x22completed\x22,\x22duration_s\x22:83,\x22summary\x22:\x22Plan written: 8 tasks, 3 waves <ok> & \xf0\x9f\x98\x80 e\xcc\x81 \xe2\x80\xa8 \x5cu0001\x5ct\x22,\x22input_chars\x22:12840,\x22output_chars\x22:8200,\x22model_tier\x22:\x22opus\x22,\x22tool_calls\x22:5,\x22model_profile\x22:\x22high\x22,\x22actual_model\x22:\x22observed-model\x22}"
	if got := string(Fit(c.Record(mustPy(t, wantBefore1)), c.Summary, nil)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestOversizedActualModelKeepsShortSummary(t *testing.T) {
	c := Completion{Seq: 1, Status: "failed", Summary: sp("useful summary"), ActualModel: sp(strings.Repeat("y", 4100))}
	want := "{\x22seq\x22:1,\x22file\x22:\x221-plan-writer.md\x22,\x22role\x22:\x22plan-writer\x22,\x22phase\x22:\x222\x22,\x22task\x22:null,\x22status\x22:\x22failed\x22,\x22duration_s\x22:null,\x22summary\x22:\x22useful summary\x22,\x22input_chars\x22:12840,\x22output_chars\x22:null,\x22model_tier\x22:\x22opus\x22,\x22tool_calls\x22:null,\x22model_profile\x22:\x22high\x22,\x22actual_model\x22:null}"
	if got := string(Fit(c.Record(mustPy(t, wantBefore1)), c.Summary, nil)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestOversizedTierInPrevKeepsShortSummary(t *testing.T) {
	prev := strings.Replace(wantBefore1, `"opus"`, `"`+strings.Repeat("x", 4100)+`"`, 1)
	c := Completion{Seq: 1, Status: "completed", Summary: sp("useful summary")}
	line := Fit(c.Record(mustPy(t, prev)), c.Summary, nil)
	if len(line)+1 > MaxLine || gjson.GetBytes(line, "model_tier").Type != gjson.Null || gjson.GetBytes(line, "summary").Str != "useful summary" {
		t.Errorf("got %s", line)
	}
}

// Summary truncation: line lengths, summary lengths (in code points) and line
// digests from Python for the same inputs.
func TestSummaryTruncationMatchesPython(t *testing.T) {
	cases := []struct {
		name     string
		summary  string
		lineLen  int
		sumChars int
		sha      string
	}{
		{"ascii", strings.Repeat("s", 8000), 4095, 3852, "ccbe2679bca2fe58a1bf172baa0744f701f7258276c8ff1c2b93da0de4dd31b1"},
		{"two-byte", strings.Repeat("é", 8000), 4094, 1927, "06f3731a260b594178f3f871db31d04e0bce7d2956449f137e5fba5572979007"},
		{"emoji", strings.Repeat("😀", 3000), 4094, 965, "036250ca826ac39dca03450b4cb2bb96fcd8815e9a256a572f67520c99dfc44d"},
		{"mixed", strings.Repeat("ab€😀", 1500), 4094, 1714, "20d10f6ff67772a5cb4a67fae549897d6a2c627ab89f227f53a2674f33a113e9"},
	}
	for _, c := range cases {
		comp := Completion{Seq: 1, Status: "completed", Summary: sp(c.summary), OutputChars: ip(1), ToolCalls: ip(2), Duration: ip(3), ActualModel: sp("m")}
		var warn bytes.Buffer
		line := Fit(comp.Record(mustPy(t, wantBefore1)), comp.Summary, &warn)
		sum := sha256.Sum256(line)
		got := gjson.GetBytes(line, "summary").Str
		if len(line) != c.lineLen || utf8.RuneCountInString(got) != c.sumChars || hex.EncodeToString(sum[:]) != c.sha {
			t.Errorf("%s: line %d bytes, summary %d chars, sha %x; want %d, %d, %s", c.name, len(line), utf8.RuneCountInString(got), sum, c.lineLen, c.sumChars, c.sha)
		}
		if !strings.HasSuffix(got, "...") || warn.Len() > 0 {
			t.Errorf("%s: summary %q..., warning %q", c.name, got[:10], warn.String())
		}
	}
}

func TestFixedFieldsTooLargeWarns(t *testing.T) {
	d := Dispatched{Seq: 9, File: "9-x.md", Role: strings.Repeat("r", 5000)}
	var warn bytes.Buffer
	line := Fit(d.Record(), nil, &warn)
	if len(line) < MaxLine {
		t.Errorf("line shortened to %d", len(line))
	}
	want := "[dispatch WARN] entry for seq 9 still exceeds PIPE_BUF after summary truncation (fixed fields too large); writing anyway\n"
	if warn.String() != want {
		t.Errorf("warning %q", warn.String())
	}
	c := Completion{Seq: 9, Status: "completed", Summary: sp("hello")}
	warn.Reset()
	line = Fit(c.Record(mustPy(t, string(d.Record().Bytes()))), c.Summary, &warn)
	if gjson.GetBytes(line, "summary").Str != "..." || warn.Len() == 0 {
		t.Errorf("summary %q, warning %q", gjson.GetBytes(line, "summary").Str, warn.String())
	}
}

func TestModelProfile(t *testing.T) {
	for tier, want := range map[string]string{"opus": "high", "high": "high", "standard": "standard", "low": "low", "sonnet": "", "haiku": "", "provider/custom": "", "": ""} {
		got := ModelProfile(&tier)
		if (got == nil) != (want == "") || got != nil && *got != want {
			t.Errorf("ModelProfile(%q) = %v, want %q", tier, got, want)
		}
	}
	if ModelProfile(nil) != nil {
		t.Error("ModelProfile(nil) != nil")
	}
}

func TestCompletionDerivesProfileForOldEntries(t *testing.T) {
	prev := `{"seq":1,"file":"1-a.md","role":"r","phase":"2","task":null,"status":"dispatched","duration_s":null,"summary":null,"input_chars":5,"output_chars":null,"model_tier":"opus","tool_calls":null}`
	line := (Completion{Seq: 1, Status: "completed"}).Record(mustPy(t, prev)).Bytes()
	if gjson.GetBytes(line, "model_profile").Str != "high" {
		t.Errorf("got %s", line)
	}
}

func TestPyStrOf(t *testing.T) {
	for in, want := range map[string]string{`"a.md"`: "a.md", `null`: "None", `true`: "True", `3`: "3", `1.50`: "1.5",
		`NaN`: "nan", `-Infinity`: "-inf", `1e16`: "1e+16", `["a",1]`: "['a', 1]", `{"k":null}`: "{'k': None}"} {
		if got := pyStrOf(mustPy(t, in)); got != want {
			t.Errorf("pyStrOf(%s) = %q, want %q", in, got, want)
		}
	}
	if got := pyStrOf(mustPy(t, `{}`).get("file")); got != "None" {
		t.Errorf("missing: %q", got)
	}
}

// mustPy reads a line as the dispatch commands read it.
func mustPy(t *testing.T, line string) *pyValue {
	t.Helper()
	v, err := parsePy([]byte(line))
	if err != nil {
		t.Fatalf("parsePy(%s): %v", line, err)
	}
	return v
}

func TestFitKeepsTierAndProfileTogether(t *testing.T) {
	// A role too long for any line: nulling the short tier would not make it
	// fit, so tier and profile are both kept.
	d := Dispatched{Seq: 3, File: "3-x.md", Role: strings.Repeat("r", 5000), ModelTier: sp("opus")}
	line := Fit(d.Record(), nil, nil)
	if gjson.GetBytes(line, "model_tier").Str != "opus" || gjson.GetBytes(line, "model_profile").Str != "high" {
		t.Errorf("tier %s, profile %s", gjson.GetBytes(line, "model_tier").Raw, gjson.GetBytes(line, "model_profile").Raw)
	}
	// A role that fits only without the tier: both go, never the tier alone.
	// The line is then one byte over; "opus" -> null alone would make it fit.
	d.Role = strings.Repeat("r", 5000+MaxLine-len(d.Record().Bytes()))
	line = Fit(d.Record(), nil, nil)
	if len(line)+1 > MaxLine || gjson.GetBytes(line, "model_tier").Type != gjson.Null || gjson.GetBytes(line, "model_profile").Type != gjson.Null {
		t.Errorf("%d bytes, tier %s, profile %s", len(line), gjson.GetBytes(line, "model_tier").Raw, gjson.GetBytes(line, "model_profile").Raw)
	}
	// A completion copying a huge tier with a profile another writer set.
	prev := `{"seq":4,"file":"4-a.md","status":"dispatched","model_tier":"` + strings.Repeat("x", 4100) + `","model_profile":"high"}`
	c := Completion{Seq: 4, Status: "completed", Summary: sp("kept")}
	line = Fit(c.Record(mustPy(t, prev)), c.Summary, nil)
	if gjson.GetBytes(line, "model_tier").Type != gjson.Null || gjson.GetBytes(line, "model_profile").Type != gjson.Null || gjson.GetBytes(line, "summary").Str != "kept" {
		t.Errorf("got %s", line)
	}
}

func TestFitKeepsAnEmptySummary(t *testing.T) {
	d := Dispatched{Seq: 9, File: "9-x.md", Role: strings.Repeat("r", 5000)}
	c := Completion{Seq: 9, Status: "completed", Summary: sp("")}
	var warn bytes.Buffer
	line := Fit(c.Record(mustPy(t, string(d.Record().Bytes()))), c.Summary, &warn)
	if v := gjson.GetBytes(line, "summary"); v.Type != gjson.String || v.Str != "" || warn.Len() == 0 {
		t.Errorf("summary %s, warning %q", v.Raw, warn.String())
	}
}

// An A/B arm's entries always carry mutation (null in the control), arm and
// repeat, and the completion copies them.
func TestArmProvenance(t *testing.T) {
	d := before1()
	arm := "control"
	d.ReplayOf, d.ReplaySession, d.Arm, d.Repeat = ip(1), sp("r1-control-2"), &arm, ip(2)
	got := string(d.Record().Bytes())
	want := strings.TrimSuffix(wantBefore1, "}") + `,"replay_of":1,"replay_session":"r1-control-2","mutation":null,"arm":"control","repeat":2}`
	if got != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
	c := Completion{Seq: 1, Status: "skipped"}
	line := string(c.Record(mustPy(t, got)).Bytes())
	if !strings.HasSuffix(line, `"replay_of":1,"replay_session":"r1-control-2","mutation":null,"arm":"control","repeat":2}`) {
		t.Errorf("completion does not copy the arm: %s", line)
	}
}
