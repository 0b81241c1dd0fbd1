// Command rewind gives shell-driven AI-agent pipelines exact checkpoints of their
// working directory, a durable dispatch manifest, and the ability to resume an
// interrupted pipeline from its last verified boundary. It needs nothing at run
// time but git.
package main

import "os"

func main() { os.Exit(run(os.Args)) }
