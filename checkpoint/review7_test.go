package checkpoint

import (
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A pack the reader has mapped that is cut short meanwhile (damaged on
// disk, or rewritten in place by a tool other than git) makes a read of it
// an error the caller falls back from, never a crash of rewind: touching the
// mapping past the file's new end is a fault (SIGBUS), which the reader must
// turn into an error like any other damage. The read runs in a child
// process so that a crash fails this test alone.
func TestObjectReaderPackCutShort(t *testing.T) {
	if os.Getenv("REWIND_REVIEW7_CHILD") == "cut" {
		objectReaderPackCutShort(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestObjectReaderPackCutShort$", "-test.v")
	cmd.Env = append(os.Environ(), "REWIND_REVIEW7_CHILD=cut")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the read of a pack cut short crashed: %v\n%s", err, firstLines(string(out), 8))
	}
}

func objectReaderPackCutShort(t *testing.T) {
	ctx := context.Background()
	s, wt := newStore(t)
	for _, d := range []string{"a", "b", "c"} {
		mustWrite(t, filepath.Join(wt, d, "f.txt"), strings.Repeat(d+" line\n", 2000))
	}
	made, err := s.Create(ctx, CreateOptions{Reason: "packed", Source: "t"})
	if err != nil {
		t.Fatal(err)
	}
	rgitDir(t, s, "repack", "-a", "-d", "-q")
	packs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.pack"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	root, _ := hex.DecodeString(made.Checkpoint.Tree)
	sub, _ := hex.DecodeString(strings.Fields(rgitDir(t, s, "rev-parse", made.Checkpoint.Tree+":b"))[0])
	r := newObjectReader(filepath.Join(s.gitDir(), "objects"), false)
	defer r.close()
	if _, _, err := r.read(root); err != nil { // maps the pack
		t.Fatal(err)
	}
	if err := os.Truncate(packs[0], 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.read(sub); err == nil {
		t.Log("read from the pack's pages still in memory")
	} else {
		t.Logf("an error, as it should be: %v", err)
	}
}
