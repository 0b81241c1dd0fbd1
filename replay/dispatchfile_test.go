package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDispatchFileRoundTrip(t *testing.T) {
	h := Header{Template: "implementer", Pipeline: "build", Phase: "3", Task: "4", Timestamp: "2026-03-01T10:30:00Z", DispatchDir: "/tmp/crucible-dispatch-1775430161/"}
	content := h.Render() + "\nYou are an implementer.\n"
	got, body, ok := ParseDispatchFile(content)
	want := h
	want.Raw = h.Render()
	if !ok || got != want || body != "\nYou are an implementer.\n" {
		t.Errorf("parse: ok %v header %+v body %q", ok, got, body)
	}
	if _, body, ok := ParseDispatchFile("no header\n"); ok || body != "no header\n" {
		t.Errorf("headerless file: ok %v body %q", ok, body)
	}
}

func TestRenderKeepsAReadHeadersBytes(t *testing.T) {
	// Another shape than crucible's: CRLF, no blank line before ---, a field
	// rewind does not know, the timestamp beside another field.
	raw := "# Dispatch: red-team\r\n**Pipeline:** build | **Phase:** 4\r\n**Round:** 2 | **Timestamp:** 2026-03-01T10:30:00Z\r\n---\r\n"
	h, body, ok := ParseDispatchFile(raw + "body\r\n")
	if !ok || body != "body\r\n" || h.Timestamp != "2026-03-01T10:30:00Z" {
		t.Fatalf("parse: ok %v header %+v body %q", ok, h, body)
	}
	h.Timestamp = "2026-03-02T09:00:00Z"
	want := strings.Replace(raw, "2026-03-01T10:30:00Z", "2026-03-02T09:00:00Z", 1)
	if got := h.Render(); got != want {
		t.Errorf("Render() = %q, want %q", got, want)
	}
	// A read header without a Timestamp field is written anew, with one.
	h, _, _ = ParseDispatchFile("# Dispatch: x\n**Pipeline:** build\n---\nbody\n")
	h.Timestamp = "2026-03-02T09:00:00Z"
	if got := h.Render(); !strings.Contains(got, "**Timestamp:** 2026-03-02T09:00:00Z\n") {
		t.Errorf("Render() without a timestamp field = %q", got)
	}
}

func TestParseTime(t *testing.T) {
	paris, _ := time.LoadLocation("Europe/Paris")
	for in, want := range map[string]time.Time{
		"2026-03-01T10:30:00Z":      time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC),
		"2026-03-01T11:30:00+01:00": time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC),
		"2026-03-01T11:30:00":       time.Date(2026, 3, 1, 10, 30, 0, 0, time.UTC), // naive: local (Paris)
		"2026-03-01 11:30:00.5":     time.Date(2026, 3, 1, 10, 30, 0, 5e8, time.UTC),
	} {
		got, err := ParseTime(in, paris)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := ParseTime("yesterday", time.UTC); err == nil {
		t.Errorf("garbage accepted")
	}
}

func FuzzParseDispatchFile(f *testing.F) {
	f.Add("# Dispatch: x\n**Pipeline:** build | **Phase:** 3 | **Task:** 1\n**Timestamp:** 2026-01-01T00:00:00Z\n**Dispatch-Dir:** /tmp/d\n\n---\nbody")
	f.Add("# Dispatch:\n---\n")
	f.Fuzz(func(t *testing.T, s string) {
		h, body, ok := ParseDispatchFile(s)
		if !ok && body != s {
			t.Fatalf("headerless body changed")
		}
		if ok && len(body) > len(s) {
			t.Fatalf("body longer than file")
		}
		rendered := h.Render()
		if ok {
			// Restamping keeps the body and the header readable.
			h.Timestamp = "2026-03-02T09:00:00Z"
			h2, body2, ok2 := ParseDispatchFile(h.Render() + body)
			if !ok2 || body2 != body || h2.Timestamp != h.Timestamp {
				t.Fatalf("restamped file reads back as ok %v body %q timestamp %q (rendered %q)", ok2, body2, h2.Timestamp, rendered)
			}
		}
	})
}

func TestRestamp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "9-fixer.md")
	orig := Header{Template: "fixer", Pipeline: "build", Phase: "4", Timestamp: "2026-03-01T11:00:00Z", DispatchDir: "/tmp/d/"}.Render() + "\nbody\n"
	write(t, path, orig)
	if err := Restamp(path, time.Date(2026, 3, 1, 12, 30, 0, 0, time.FixedZone("X", 3600))); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	want := strings.Replace(orig, "2026-03-01T11:00:00Z", "2026-03-01T11:30:00Z", 1)
	if string(data) != want {
		t.Errorf("restamped:\n%s\nwant:\n%s", data, want)
	}
	write(t, path, "no header\n")
	if err := Restamp(path, time.Now()); err == nil {
		t.Errorf("a file without a header was restamped")
	}
}
