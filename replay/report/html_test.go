package report

import (
	"bytes"
	"strings"
	"testing"
)

// TestPageIsMarked checks the generator tag sits where rewind report looks
// for it before replacing a file: in the first 1024 bytes.
func TestPageIsMarked(t *testing.T) {
	r := build(t, []string{`{"seq":1,"file":"1-a.md","role":"a","phase":"1","status":"completed","duration_s":5}`}, nil, nil)
	var page bytes.Buffer
	if err := Write(&page, r); err != nil {
		t.Fatal(err)
	}
	head := page.String()[:1024]
	if !strings.HasPrefix(head, "<!DOCTYPE html>") || !strings.Contains(head, Generator) {
		t.Errorf("the page does not start with a doctype and %s:\n%s", Generator, head)
	}
}
