package main

import (
	"bytes"
	"testing"
	"time"
)

// TestProgressNewStepSameTotal: a step that counts the same objects as the
// one before it (git's counting, then compressing, of 20,606 objects) starts
// from its own first count, not the last step's end.
func TestProgressNewStepSameTotal(t *testing.T) {
	oldDelay, oldInterval := progressDelay, progressInterval
	progressDelay, progressInterval = 0, 0
	t.Cleanup(func() { progressDelay, progressInterval = oldDelay, oldInterval })
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := t0
	var out bytes.Buffer
	p := &progressLine{out: &out, what: "prune", start: t0, stepStart: t0, now: func() time.Time { return clock }}
	p.update("repacking objects: counting objects", 20606, 20606)
	clock = t0.Add(time.Second)
	p.update("repacking objects: compressing objects", 1, 20606)
	clock = t0.Add(3 * time.Second)
	p.update("repacking objects: compressing objects", 8000, 20606)
	p.update("repacking objects: compressing objects", 7000, 20606) // late: ignored
	p.clear()
	want := "\r\x1b[Krewind: prune: repacking objects: counting objects 20,606/20,606 (0s)" +
		"\r\x1b[Krewind: prune: repacking objects: compressing objects 1/20,606 (1s)" +
		"\r\x1b[Krewind: prune: repacking objects: compressing objects 8,000/20,606, 4,000/s (3s)" +
		"\r\x1b[K"
	if out.String() != want {
		t.Errorf("got  %q\nwant %q", out.String(), want)
	}
}
