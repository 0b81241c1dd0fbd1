// Command rewind gives shell-driven AI-agent pipelines exact checkpoints of their
// working directory, a durable dispatch manifest, and the ability to resume an
// interrupted pipeline from its last verified boundary. It needs nothing at run
// time but git.
package main

import (
	"os"
	"runtime/debug"
)

func main() {
	// rewind lives for one command: a checkpoint's stat walk allocates a few
	// records per file, and collecting them as it goes costs it a tenth of its
	// CPU. The heap may grow to five times what is live, but never past the
	// memory limit, where the collector works as usual again. (GOGC and
	// GOMEMLIMIT in the environment still win.)
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(512 << 20)
	}
	os.Exit(run(os.Args))
}
