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
	runs   int    // REWIND_BENCH_RUNS, default 5
	scale  string // REWIND_BENCH_SCALE: quick, full (default) or large
}

// result is the median wall time and the peak resident memory of a figure.
type result struct {
	label  string
	median time.Duration
	min    time.Duration
	max    time.Duration
	peak   int64 // bytes, the largest maxrss of the runs; 0 when unknown
}

// TestBench runs every registered workload (or those named in REWIND_BENCH_ONLY,
// comma-separated) when REWIND_BENCH=1.
func TestBench(t *testing.T) {
	if os.Getenv("REWIND_BENCH") != "1" {
		t.Skip("benchmarks run with `make bench` (REWIND_BENCH=1)")
	}
	runs := 5
	if v, err := strconv.Atoi(os.Getenv("REWIND_BENCH_RUNS")); err == nil && v > 0 {
		runs = v
	}
	scale := os.Getenv("REWIND_BENCH_SCALE")
	if scale == "" {
		scale = "full"
	}
	bin := filepath.Join(t.TempDir(), "rewind")
	build := exec.Command("go", "build", "-o", bin, "rewind/cmd/rewind")
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
	fmt.Printf("machine: %s/%s, %d cores, %s; %d runs per figure, scale %s\n",
		runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpuModel(), runs, scale)
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
	var times []time.Duration
	var peak int64
	for i := 0; i < b.runs; i++ {
		if prepare != nil {
			prepare()
		}
		c := b.cmd(dir, env, argv...)
		var stderr strings.Builder
		c.Stderr = &stderr
		start := time.Now()
		err := c.Run()
		elapsed := time.Since(start)
		if err != nil {
			b.t.Fatalf("%s: %s: %v\n%s", label, strings.Join(argv, " "), err, stderr.String())
		}
		times = append(times, elapsed)
		if ru, ok := c.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss*1024 > peak {
			peak = ru.Maxrss * 1024 // Linux reports KiB
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	r := result{label: label, median: times[len(times)/2], min: times[0], max: times[len(times)-1], peak: peak}
	fmt.Printf("  %-52s %10s  (min %s, max %s, peak %s)\n", label, round(r.median), round(r.min), round(r.max), mib(r.peak))
	return r
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
