// Package bench holds the workloads of `make bench`: each figure rewind reaches on
// a workload named in the issues, printed beside its baselines (plain git, the
// shell recipe a user would write, jq, python) measured in the same run, as the
// medians of interleaved rounds (REWIND_BENCH_RUNS, default 7) and a ratio; then
// issue 10's table of checkpoint speed goals (goals_test.go), one row per goal
// with its baseline, ratio, goal and verdict, and the machine and its load. It is
// a test package (bench_test.go and the w*_test.go workloads) so that only test
// code starts processes outside gitexec; `make bench` runs it with
// REWIND_BENCH=1. Timings are never asserted.
package bench
