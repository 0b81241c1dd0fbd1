package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// workload is one named measurement, registered from init() in its own file.
type workload struct {
	name string
	run  func(b *bench)
}

var workloads []workload

func register(w workload) { workloads = append(workloads, w) }

// bench is what a workload gets: the rewind binary, a scratch directory, the
// number of runs per figure, and the scale (quick, full or large).
type bench struct {
	t      *testing.T
	rewind string // path of a freshly built rewind binary
	dir    string // scratch directory of this workload, removed afterwards
	runs   int    // REWIND_BENCH_RUNS, default 7: the rounds of each figure
	scale  string // REWIND_BENCH_SCALE: quick, full (default) or large
}

// result is the median wall time and the peak resident memory of a figure.
type result struct {
	label  string
	median time.Duration
	min    time.Duration
	max    time.Duration
	peak   int64  // bytes, the largest maxrss of the runs; 0 when unknown
	stderr string // what the last run wrote on stderr
}

// TestBench runs every registered workload (or those named in REWIND_BENCH_ONLY,
// comma-separated) when REWIND_BENCH=1.
func TestBench(t *testing.T) {
	if os.Getenv("REWIND_BENCH") != "1" {
		t.Skip("benchmarks run with `make bench` (REWIND_BENCH=1)")
	}
	runs := 7 // issue 10: medians of at least 7 interleaved rounds
	if v, err := strconv.Atoi(os.Getenv("REWIND_BENCH_RUNS")); err == nil && v > 0 {
		runs = v
	}
	scale := os.Getenv("REWIND_BENCH_SCALE")
	if scale == "" {
		scale = "full"
	}
	bin := filepath.Join(t.TempDir(), "rewind")
	build := exec.Command("go", "build", "-o", bin, "github.com/rewind-cli/rewind/cmd/rewind")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	only := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("REWIND_BENCH_ONLY"), ",") {
		if n != "" {
			only[n] = true
		}
	}
	goals = nil
	loadStart := loadAvg()
	machine := fmt.Sprintf("%s/%s, %d cores, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel())
	fmt.Printf("machine: %s; %s per figure, scale %s; load average %s\n", machine, plural(runs, "round"), scale, loadStart)
	if runs < 7 {
		fmt.Printf("(fewer than the 7 rounds the goals are stated for: REWIND_BENCH_RUNS=%d)\n", runs)
	}
	for _, w := range workloads {
		if len(only) > 0 && !only[w.name] {
			continue
		}
		t.Run(w.name, func(t *testing.T) {
			dir, err := os.MkdirTemp(os.Getenv("REWIND_BENCH_DIR"), "rewind-bench-")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			fmt.Printf("\n== %s\n", w.name)
			w.run(&bench{t: t, rewind: bin, dir: dir, runs: runs, scale: scale})
		})
	}
	printGoals(machine, runs, scale, loadStart, loadAvg())
}

// cmd builds a command run in dir with the caller's environment plus env.
func (b *bench) cmd(dir string, env []string, argv ...string) *exec.Cmd {
	c := exec.Command(argv[0], argv[1:]...)
	c.Dir = dir
	c.Env = append(os.Environ(), env...)
	return c
}

// measure runs argv b.runs times (prepare, untimed, before each run) and returns
// the median wall time and the peak memory. stdout is discarded.
func (b *bench) measure(label string, prepare func(), dir string, env []string, argv ...string) result {
	b.t.Helper()
	return b.rounds(contender{label: label, prepare: prepare, dir: dir, env: env, argv: argv})[0]
}

// contender is one command of a figure: run in dir with env after prepare
// (untimed; nil for none), stdin on its standard input.
type contender struct {
	label   string
	prepare func()
	dir     string
	env     []string
	argv    []string
	stdin   string
}

// rounds measures the contenders interleaved: b.runs rounds, each running every
// contender once (after its untimed prepare), the first of the round rotating,
// so that a change of the machine's load falls on all of them alike. It prints
// and returns each contender's median, in the order given.
func (b *bench) rounds(cs ...contender) []result {
	b.t.Helper()
	times := make([][]time.Duration, len(cs))
	peaks := make([]int64, len(cs))
	stderrs := make([]string, len(cs))
	for i := 0; i < b.runs; i++ {
		for k := range cs {
			j := (i + k) % len(cs)
			c := cs[j]
			if c.prepare != nil {
				c.prepare()
			}
			cmd := b.cmd(c.dir, c.env, c.argv...)
			cmd.Stdin = strings.NewReader(c.stdin)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			start := time.Now()
			err := cmd.Run()
			elapsed := time.Since(start)
			if err != nil {
				b.t.Fatalf("%s: %s: %v\n%s", c.label, strings.Join(c.argv, " "), err, stderr.String())
			}
			times[j] = append(times[j], elapsed)
			stderrs[j] = stderr.String()
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss*1024 > peaks[j] {
				peaks[j] = ru.Maxrss * 1024 // Linux reports KiB
			}
		}
	}
	out := make([]result, len(cs))
	for j, c := range cs {
		ts := times[j]
		sort.Slice(ts, func(a, b int) bool { return ts[a] < ts[b] })
		r := result{label: c.label, median: median(ts), min: ts[0], max: ts[len(ts)-1], peak: peaks[j], stderr: stderrs[j]}
		fmt.Printf("  %-52s %10s  (min %s, max %s, peak %s)\n", c.label, round(r.median), round(r.min), round(r.max), mib(r.peak))
		out[j] = r
	}
	return out
}

// ratio prints r against a baseline measured in the same run, with the goal.
func (b *bench) ratio(r, base result, goal string) {
	x := float64(r.median) / float64(base.median)
	line := fmt.Sprintf("  ratio %s / %s = %.2fx", r.label, base.label, x)
	if x < 1 {
		line += fmt.Sprintf(" (%.1fx faster)", 1/x)
	}
	if goal != "" {
		line += "  goal " + goal
	}
	fmt.Println(line)
}

// note prints a line of context (sizes, skipped baselines).
func (b *bench) note(format string, a ...any) {
	fmt.Printf("  "+format+"\n", a...)
}

// median of sorted times: the middle one, or the mean of the middle two.
func median(ts []time.Duration) time.Duration {
	m := len(ts) / 2
	if len(ts)%2 == 0 {
		return (ts[m-1] + ts[m]) / 2
	}
	return ts[m]
}

// loadAvg is the machine's 1, 5 and 15 minute load averages, as /proc/loadavg has them.
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func round(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	default:
		return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000)
	}
}

func mib(n int64) string {
	if n == 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown cpu"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown cpu"
}
