package state

import (
	"bytes"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestKillDuringWrite kills the rewind binary with SIGKILL at random instants of
// `state resume`, `state recover`, `state set` and `state archive`, and checks
// after every kill that each state file is whole, the old one or the new one
// (phase.json may also be the old one marked interruption_safe false, the
// first step of the protocol), that archives are whole, and that running the
// command again finishes the job. A quick count of rounds runs
// in `go test`; REWIND_SOAK=1 (`make soak`) runs hundreds.
func TestKillDuringWrite(t *testing.T) {
	if testing.Short() {
		t.Skip("the kill test builds and runs the rewind binary")
	}
	rounds := 40
	if os.Getenv("REWIND_SOAK") == "1" {
		rounds = 400
	}
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d, %d rounds", seed, rounds)

	tmp := t.TempDir()
	bin := filepath.Join(tmp, "rewind")
	build := exec.Command("go", "build", "-o", bin, "github.com/rewind-cli/rewind/cmd/rewind")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}

	k := &killer{t: t, bin: bin, rng: rng, typical: map[string]time.Duration{}, outcomes: map[string]int{}}
	// The new state each command writes, from an uninterrupted run (the clock is
	// fixed, so a rerun writes the same bytes), and how long a run takes.
	resumeNew := k.reference("resume", tmp)
	recoverNew := k.reference("recover", tmp)
	setNew := k.reference("set", tmp)
	k.reference("archive", tmp)

	for n := 1; n <= rounds; n++ {
		dir := filepath.Join(tmp, fmt.Sprintf("round-%d", n))
		switch n % 4 {
		case 1:
			k.roundResume(dir, resumeNew)
		case 2:
			k.roundRecover(dir, recoverNew)
		case 3:
			k.roundSet(dir, setNew)
		default:
			k.roundArchive(dir)
		}
	}
	t.Logf("outcomes after the kills: %v", k.outcomes)
}

type killer struct {
	t        *testing.T
	bin      string
	rng      *rand.Rand
	typical  map[string]time.Duration
	outcomes map[string]int
}

const killNow = "2026-01-02T03:04:05Z"

// The fixtures: a playbook run to resume and a phase state with an orphaned
// task and one whose output exists. Both JSON files are in rewind's layout, so
// the old bytes are what parsing and rendering them gives.
var (
	killPlaybook = "# Pipeline State\n\nstatus: IN_PROGRESS\nspec_hash: b59c39b9ae1f188e9bb73c99b5670f1949fc81f6aa966f9d4bab3fdf431367a3\ncurrent_stage: tasks\nlast_updated_at: 2026-01-02T01:00:00Z\n\n## Completed Stages\n\n- [x] spec — feature.spec.md\n- [x] architect — adr.md\n\n## Notes\n\n- first session\n" + strings.Repeat("- filler note to make the file take more than one write\n", 400)
	killADR      = "## Constitution Check\n\n| Principle | Status |\n|---|---|\n| Simplicity | PASS |\n"
)

func killPhase() *PhaseState {
	return &PhaseState{WorkflowID: "wf-kill", StartedAt: "2026-01-02T01:00:00Z", LastUpdated: "2026-01-02T02:00:00Z",
		CurrentPhase: "IMPLEMENTATION", PhaseStatus: "in_progress",
		CompletedPhases:  []CompletedPhase{{Phase: "REQUIREMENTS", CompletedAt: "2026-01-02T01:10:00Z"}, {Phase: "ARCHITECTURE", CompletedAt: "2026-01-02T01:20:00Z"}},
		InterruptionSafe: true}
}

func killExecution() *Execution {
	x := &Execution{WorkflowID: "wf-kill"}
	for i := 0; i < 300; i++ {
		x.Tasks = append(x.Tasks, Task{ID: fmt.Sprintf("task-%03d", i), Status: "pending", Output: fmt.Sprintf("out/%03d.json", i)})
	}
	x.Tasks[7].Status, x.Tasks[7].Attempts = "running", 1 // no output: back to pending
	x.Tasks[9].Status, x.Tasks[9].Attempts = "running", 1 // its output exists: complete
	return x
}

func (k *killer) setupResume(dir string) {
	k.write(filepath.Join(dir, "feature.spec.md"), "A login feature.\n")
	k.write(filepath.Join(dir, "adr.md"), killADR)
	k.write(filepath.Join(dir, PlaybookFile), killPlaybook)
}

func (k *killer) setupRecover(dir string) {
	sd := filepath.Join(dir, "memory", "state")
	k.write(filepath.Join(sd, PhaseFile), string(killPhase().Bytes()))
	k.write(filepath.Join(sd, ExecutionFile), string(killExecution().Bytes()))
	k.write(filepath.Join(dir, "out", "009.json"), `{"status":"complete","completed_at":"2026-01-02T02:30:00Z"}`)
}

func (k *killer) write(path, content string) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		k.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		k.t.Fatal(err)
	}
}

func (k *killer) read(path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		k.t.Fatal(err)
	}
	return data
}

func (k *killer) command(op, dir string) *exec.Cmd {
	args := []string{"state", op, dir}
	if op == "set" {
		args = append(args, "--status", "complete", "--output", "out/009.json")
	}
	cmd := exec.Command(k.bin, args...)
	cmd.Env = append(os.Environ(), "REWIND_NOW="+killNow, "NO_COLOR=1")
	return cmd
}

// reference runs op uninterrupted on a fresh fixture and returns the files it
// wrote, timing it for the kill delays.
func (k *killer) reference(op, tmp string) map[string][]byte {
	dir := filepath.Join(tmp, "reference-"+op)
	out := map[string][]byte{}
	var runs []time.Duration
	for i := 0; i < 5; i++ {
		os.RemoveAll(dir)
		if op == "resume" {
			k.setupResume(dir)
		} else {
			k.setupRecover(dir) // set and archive work on the same state
		}
		start := time.Now()
		if b, err := k.command(op, dir).CombinedOutput(); err != nil {
			k.t.Fatalf("state %s: %v\n%s", op, err, b)
		}
		runs = append(runs, time.Since(start))
	}
	var sum time.Duration
	for _, r := range runs {
		sum += r
	}
	k.typical[op] = sum / time.Duration(len(runs))
	k.t.Logf("state %s takes about %s", op, k.typical[op].Round(time.Microsecond))
	switch op {
	case "archive":
		return nil
	case "set":
		out[PhaseFile] = k.read(filepath.Join(dir, "memory", "state", PhaseFile))
		if bytes.Equal(out[PhaseFile], killPhase().Bytes()) {
			k.t.Fatal("state set changed nothing: the test would prove nothing")
		}
	case "resume":
		out[PlaybookFile] = k.read(filepath.Join(dir, PlaybookFile))
		if bytes.Equal(out[PlaybookFile], []byte(killPlaybook)) {
			k.t.Fatal("state resume changed nothing: the test would prove nothing")
		}
	default:
		sd := filepath.Join(dir, "memory", "state")
		out[PhaseFile] = k.read(filepath.Join(sd, PhaseFile))
		out[ExecutionFile] = k.read(filepath.Join(sd, ExecutionFile))
		if bytes.Equal(out[ExecutionFile], killExecution().Bytes()) {
			k.t.Fatal("state recover changed nothing: the test would prove nothing")
		}
	}
	return out
}

// runKilled starts op and kills it after a random delay between a third of
// its typical duration and a little over it: process start-up takes the
// first part, and the writes come at the end (some runs finish first, which
// is fine).
func (k *killer) runKilled(op, dir string) {
	cmd := k.command(op, dir)
	if err := cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	typical := int64(k.typical[op])
	delay := time.Duration(typical/3 + k.rng.Int63n(typical*5/6+1))
	time.Sleep(delay)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
}

func (k *killer) roundResume(dir string, want map[string][]byte) {
	k.setupResume(dir)
	k.runKilled("resume", dir)
	file := filepath.Join(dir, PlaybookFile)
	got := k.read(file)
	switch {
	case bytes.Equal(got, []byte(killPlaybook)):
		k.outcomes["resume: old"]++
		if b, err := k.command("resume", dir).CombinedOutput(); err != nil {
			k.t.Fatalf("state resume after a kill: %v\n%s", err, b)
		}
		if !bytes.Equal(k.read(file), want[PlaybookFile]) {
			k.t.Fatalf("state resume after a kill wrote something else than an uninterrupted run:\n%s", k.read(file))
		}
	case bytes.Equal(got, want[PlaybookFile]):
		k.outcomes["resume: new"]++
	default:
		k.t.Fatalf("after a kill, %s is neither the old nor the new file (%d bytes):\n%s", file, len(got), got)
	}
	if _, err := ParsePlaybook(file, k.read(file)); err != nil {
		k.t.Fatalf("after a kill: %v", err)
	}
}

func (k *killer) roundRecover(dir string, want map[string][]byte) {
	k.setupRecover(dir)
	oldPhase, oldExec := killPhase().Bytes(), killExecution().Bytes()
	marked := killPhase()
	marked.InterruptionSafe = false
	sd := filepath.Join(dir, "memory", "state")
	k.runKilled("recover", dir)

	phase, exec := k.read(filepath.Join(sd, PhaseFile)), k.read(filepath.Join(sd, ExecutionFile))
	var ph, ex string
	switch {
	case bytes.Equal(phase, oldPhase):
		ph = "old"
	case bytes.Equal(phase, marked.Bytes()):
		ph = "marked"
	case bytes.Equal(phase, want[PhaseFile]):
		ph = "new"
	default:
		k.t.Fatalf("after a kill, phase.json is neither old, old marked, nor new:\n%s", phase)
	}
	switch {
	case bytes.Equal(exec, oldExec):
		ex = "old"
	case bytes.Equal(exec, want[ExecutionFile]):
		ex = "new"
	default:
		k.t.Fatalf("after a kill, execution.json is neither old nor new:\n%s", exec)
	}
	// The protocol's order: marked before execution.json changes, new only
	// after it changed.
	if (ex == "new" && ph == "old") || (ex == "old" && ph == "new") {
		k.t.Fatalf("after a kill, phase.json is %s but execution.json is %s: the write order is broken", ph, ex)
	}
	k.outcomes["recover: phase "+ph+", execution "+ex]++
	if ph == "marked" {
		// check must see the interrupted update.
		d, err := DecidePhase(dir, CheckOptions{Now: mustTime(k.t, killNow)})
		if err != nil || d.Decision != DecisionBlocked {
			k.t.Fatalf("check after an interrupted update: %v, %+v", err, d)
		}
	}
	if b, err := k.command("recover", dir).CombinedOutput(); err != nil {
		k.t.Fatalf("state recover after a kill: %v\n%s", err, b)
	}
	if got := k.read(filepath.Join(sd, PhaseFile)); !bytes.Equal(got, want[PhaseFile]) {
		k.t.Fatalf("phase.json after recovering from a kill differs from an uninterrupted run:\n%s", got)
	}
	if got := k.read(filepath.Join(sd, ExecutionFile)); !bytes.Equal(got, want[ExecutionFile]) {
		k.t.Fatalf("execution.json after recovering from a kill differs from an uninterrupted run:\n%s", got)
	}
	if leftovers, _ := filepath.Glob(filepath.Join(sd, ".*.tmp-*")); ph != "new" && len(leftovers) > 0 {
		k.t.Fatalf("the recover after a kill left temporary files: %v", leftovers)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func (k *killer) roundSet(dir string, want map[string][]byte) {
	k.setupRecover(dir)
	file := filepath.Join(dir, "memory", "state", PhaseFile)
	marked := killPhase()
	marked.InterruptionSafe = false
	k.runKilled("set", dir)
	switch got := k.read(file); {
	case bytes.Equal(got, killPhase().Bytes()):
		k.outcomes["set: old"]++
	case bytes.Equal(got, marked.Bytes()):
		k.outcomes["set: marked"]++
		// set never clears the marker itself: recover checks both files first.
		cmd := k.command("set", dir)
		if b, err := cmd.CombinedOutput(); cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 4 {
			k.t.Fatalf("state set over interruption_safe false: %v, want exit 4\n%s", err, b)
		}
		if b, err := k.command("recover", dir).CombinedOutput(); err != nil {
			k.t.Fatalf("state recover after a kill: %v\n%s", err, b)
		}
	case bytes.Equal(got, want[PhaseFile]):
		k.outcomes["set: new"]++
	default:
		k.t.Fatalf("after a kill, phase.json is neither old, old marked, nor new:\n%s", got)
	}
	if b, err := k.command("set", dir).CombinedOutput(); err != nil {
		k.t.Fatalf("state set after a kill: %v\n%s", err, b)
	}
	if got := k.read(file); !bytes.Equal(got, want[PhaseFile]) {
		k.t.Fatalf("phase.json after setting again differs from an uninterrupted run:\n%s", got)
	}
}

// roundArchive: after a kill, every archive is whole (both files, the old
// bytes), what is left in memory/state is old bytes, and phase.json is never
// left without execution.json's being there too (it goes first); archiving
// again leaves no state behind.
func (k *killer) roundArchive(dir string) {
	k.setupRecover(dir)
	old := map[string][]byte{PhaseFile: killPhase().Bytes(), ExecutionFile: killExecution().Bytes()}
	sd := filepath.Join(dir, "memory", "state")
	k.runKilled("archive", dir)
	checkArchives := func() int {
		entries, _ := os.ReadDir(filepath.Join(sd, ArchiveDir))
		n := 0
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			n++
			// An archive holds both files, or execution.json alone when a
			// kill left it alone and the rerun archived it.
			if !exists(filepath.Join(sd, ArchiveDir, e.Name(), ExecutionFile)) {
				k.t.Fatalf("archive %s has no execution.json", e.Name())
			}
			for f, data := range old {
				got, err := os.ReadFile(filepath.Join(sd, ArchiveDir, e.Name(), f))
				if err == nil && !bytes.Equal(got, data) {
					k.t.Fatalf("archive %s holds a %s that is not the state's:\n%s", e.Name(), f, got)
				}
			}
		}
		return n
	}
	archives := checkArchives()
	left := ""
	for _, f := range []string{PhaseFile, ExecutionFile} {
		if data, err := os.ReadFile(filepath.Join(sd, f)); err == nil {
			if !bytes.Equal(data, old[f]) {
				k.t.Fatalf("after a kill, %s changed:\n%s", f, data)
			}
			left += " " + f
		}
	}
	if left == " "+PhaseFile {
		k.t.Fatal("after a kill, phase.json is left without execution.json")
	}
	k.outcomes[fmt.Sprintf("archive: %d archives, left:%s", archives, left)]++
	if left != "" {
		if b, err := k.command("archive", dir).CombinedOutput(); err != nil {
			k.t.Fatalf("state archive after a kill: %v\n%s", err, b)
		}
	}
	for _, f := range []string{PhaseFile, ExecutionFile} {
		if exists(filepath.Join(sd, f)) {
			k.t.Fatalf("%s is still there after archiving again", f)
		}
	}
	if left != " "+ExecutionFile && checkArchives() == 0 {
		k.t.Fatal("no archive after archiving again")
	}
}
