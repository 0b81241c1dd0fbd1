package replay

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rewind-cli/rewind/manifest"
)

// Header is the audit header that begins every dispatch file:
//
//	# Dispatch: <template-name>
//	**Pipeline:** <skill-name> | **Phase:** <phase> | **Task:** <N>
//	**Timestamp:** <ISO-8601>
//	**Dispatch-Dir:** <dispatch directory path>
//
//	---
type Header struct {
	Template    string
	Pipeline    string
	Phase       string
	Task        string
	Timestamp   string
	DispatchDir string
	// Raw is the header as read, its "---" line included (empty for a
	// header made by rewind): Render keeps its bytes, so a re-dispatch
	// carries the original's header as the orchestrator wrote it, whatever
	// its shape, with only the Timestamp value new.
	Raw string
}

// ParseDispatchFile splits a dispatch file into its header and the body below
// the "---" line. ok is false when the file has no audit header; body is then
// the whole content.
func ParseDispatchFile(content string) (h Header, body string, ok bool) {
	lines := strings.SplitAfter(content, "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "# Dispatch:") {
		return Header{}, content, false
	}
	h.Template = strings.TrimSpace(strings.TrimPrefix(lines[0], "# Dispatch:"))
	for i := 1; i < len(lines); i++ {
		line := strings.TrimRight(lines[i], "\r\n")
		if line == "---" {
			h.Raw = strings.Join(lines[:i+1], "")
			return h, strings.Join(lines[i+1:], ""), true
		}
		for _, field := range strings.Split(line, " | ") {
			key, value, found := strings.Cut(field, ":** ")
			if !found {
				key, value, found = strings.Cut(field, ":**")
			}
			if !found {
				continue
			}
			value = strings.TrimSpace(value)
			switch strings.TrimPrefix(key, "**") {
			case "Pipeline":
				h.Pipeline = value
			case "Phase":
				h.Phase = value
			case "Task":
				h.Task = value
			case "Timestamp":
				h.Timestamp = value
			case "Dispatch-Dir":
				h.DispatchDir = value
			}
		}
	}
	return h, content, false
}

// Render writes the header and the "---" line that ends it. A header read from
// a file (Raw) is written as it was read, its Timestamp value replaced by
// h.Timestamp; only a raw header without a Timestamp field is written anew.
func (h Header) Render() string {
	if raw, ok := restampRaw(h.Raw, h.Timestamp); ok {
		return raw
	}
	task := h.Task
	if task == "" {
		task = "-"
	}
	return fmt.Sprintf("# Dispatch: %s\n**Pipeline:** %s | **Phase:** %s | **Task:** %s\n**Timestamp:** %s\n**Dispatch-Dir:** %s\n\n---\n",
		h.Template, h.Pipeline, h.Phase, task, h.Timestamp, h.DispatchDir)
}

// restampRaw replaces the value of the **Timestamp:** field in a raw header,
// keeping every other byte. ok is false when raw is empty or has no such field.
func restampRaw(raw, timestamp string) (string, bool) {
	if raw == "" {
		return "", false
	}
	lines := strings.SplitAfter(raw, "\n")
	found := false
	for i, line := range lines[1:] {
		body := strings.TrimRight(line, "\r\n")
		fields := strings.Split(body, " | ")
		for k, field := range fields {
			key, _, ok := strings.Cut(field, ":**")
			if ok && strings.TrimPrefix(key, "**") == "Timestamp" {
				fields[k] = key + ":** " + timestamp
				found = true
			}
		}
		lines[i+1] = strings.Join(fields, " | ") + line[len(body):]
	}
	return strings.Join(lines, ""), found
}

// ParseTime reads a timestamp as written in audit headers and markers: RFC 3339,
// or an ISO 8601 date and time without a zone (Python's isoformat()), which is
// taken in loc (the local time zone).
func ParseTime(s string, loc *time.Location) (time.Time, error) {
	s = strings.TrimSpace(s)
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("timestamp %q: not ISO 8601", s)
}

// TaskString renders a task number for a header.
func TaskString(task *int) string {
	if task == nil {
		return "-"
	}
	return strconv.Itoa(*task)
}

// Restamp sets the Timestamp of a dispatch file's audit header to t. replay
// --exec restamps a wave's files when the wave starts: a dispatch's time is when
// it was sent, and a later replay compares it with the checkpoint taken before
// the wave.
func Restamp(path string, t time.Time) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	h, body, ok := ParseDispatchFile(string(data))
	if !ok {
		return fmt.Errorf("%s: no audit header", path)
	}
	h.Timestamp = t.UTC().Format(time.RFC3339)
	return manifest.WriteFileAtomic(path, []byte(h.Render()+body), 0o644)
}
