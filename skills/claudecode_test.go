package skills

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestMergeHooksKeepsWhatIsThere(t *testing.T) {
	settings := []byte(`{
  "permissions": {"allow": ["Bash(go test:*)"]},
  "hooks": {
    "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "guard.sh"}]}],
    "PostToolUse": [{"matcher": "Write", "hooks": [{"type": "command", "command": "gofmt -w", "timeout": 5}]}]
  },
  "model": "opus",
  "cleanupPeriodDays": 1.50
}
`)
	out, changed, err := MergeHooks(settings)
	if err != nil || !changed {
		t.Fatalf("merge: %v %v", changed, err)
	}
	want := `{
  "permissions": {
    "allow": [
      "Bash(go test:*)"
    ]
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "guard.sh"
          }
        ]
      }
    ],
    "PostToolUse": [
      {
        "matcher": "Write",
        "hooks": [
          {
            "type": "command",
            "command": "gofmt -w",
            "timeout": 5
          }
        ]
      },
      {
        "matcher": "Bash|Edit|Write|MultiEdit|NotebookEdit",
        "hooks": [
          {
            "type": "command",
            "command": "rewind hook post-tool-use",
            "timeout": 30
          }
        ]
      }
    ]
  },
  "model": "opus",
  "cleanupPeriodDays": 1.50
}
`
	if string(out) != want {
		t.Errorf("merged:\n%s\nwant:\n%s", out, want)
	}
	again, changed, err := MergeHooks(out)
	if err != nil || changed || !bytes.Equal(again, out) {
		t.Errorf("second merge: changed %v, err %v", changed, err)
	}
}

func TestMergeHooksEmptyAndRefusals(t *testing.T) {
	out, changed, err := MergeHooks(nil)
	if err != nil || !changed || !bytes.Equal(out, ClaudeCodeConfig()) {
		t.Errorf("empty: %s %v %v", out, changed, err)
	}
	out, changed, err = MergeHooks([]byte(`{"hooks":{"PostToolUse":[{"matcher":"*","hooks":[{"type":"command","command":"/usr/local/bin/rewind hook post-tool-use --wait 5s"}]}]}}`))
	if err != nil || changed {
		t.Errorf("a hook already there under a path: changed %v, %v", changed, err)
	}
	for _, bad := range []string{`[]`, `{"a":1`, `{"a":1} {}`, `{"hooks":[]}`, `{"hooks":{"PostToolUse":{}}}`, `{"hooks":{"PostToolUse":[1]}}`, "{\n\"a\": tru\n}"} {
		_, _, err := MergeHooks([]byte(bad))
		var se *SettingsError
		if !errors.As(err, &se) {
			t.Errorf("%q: %v, want a SettingsError", bad, err)
		}
	}
	_, _, err = MergeHooks([]byte("{\n\"a\": tru\n}"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("the error names no line: %v", err)
	}
}

func FuzzMergeHooks(f *testing.F) {
	f.Add([]byte(`{"hooks":{"PostToolUse":[{"matcher":"Write","hooks":[]}]},"x":[1,2]}`))
	f.Add([]byte(`{}`))
	f.Add(ClaudeCodeConfig())
	f.Fuzz(func(t *testing.T, data []byte) {
		out, changed, err := MergeHooks(data)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("merged output is not JSON: %s", out)
		}
		again, changed2, err := MergeHooks(out)
		if err != nil || changed2 || !bytes.Equal(again, out) {
			t.Fatalf("not idempotent (first changed %v): %v\n%s\n%s", changed, err, out, again)
		}
	})
}

func TestParseToolCall(t *testing.T) {
	tc, err := ParseToolCall([]byte(`{"session_id":"s1","transcript_path":"/t","cwd":"/w","hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"sed -i s/a/b/ f"},"tool_response":{"stdout":""}}`))
	if err != nil || tc != (ToolCall{SessionID: "s1", Cwd: "/w", ToolName: "Bash", Event: "PostToolUse"}) {
		t.Errorf("%+v %v", tc, err)
	}
	for _, bad := range []string{"", " \n", "[]", `{"cwd":"/w"}`, `{"tool_name":3}`} {
		if _, err := ParseToolCall([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func FuzzParseToolCall(f *testing.F) {
	f.Add([]byte(`{"tool_name":"Bash","cwd":"/w"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tc, err := ParseToolCall(data)
		if err == nil && tc.ToolName == "" {
			t.Fatal("accepted without a tool name")
		}
	})
}

func TestIndentOf(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"{\n    \"a\": 1\n}\n", "    "},
		{"{\n\t\"a\": {\n\t\t\"b\": 1\n\t}\n}", "\t"},
		{"{\n\n  \"a\": 1}", "  "},
		{"{\"a\": 1}", "  "},
		{"", "  "},
		{"{\r\n   \"a\": 1\r\n}", "   "},
	} {
		if got := indentOf([]byte(c.in)); got != c.want {
			t.Errorf("indentOf(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
