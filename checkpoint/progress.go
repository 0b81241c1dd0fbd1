package checkpoint

import (
	"bytes"
	"io"
	"sync/atomic"
)

// progress tells s.Progress, when set, how far a step has come.
func (s *Store) progress(step string, done, total int) {
	if s.Progress != nil {
		s.Progress(step, done, total)
	}
}

// countPaths wraps the NUL-separated paths a git command reads on its stdin
// (update-index, checkout-index --stdin) so that each path git has taken counts
// as done: git handles them one by one as it reads them, so the count runs
// ahead of the work by at most a pipe's buffer. done is shared by readers that
// split one step between them (prewrite's shares).
func (s *Store) countPaths(step string, r io.Reader, total int, done *atomic.Int64) io.Reader {
	if s.Progress == nil {
		return r
	}
	return &pathCounter{r: r, step: step, total: total, done: done, s: s}
}

type pathCounter struct {
	r     io.Reader
	s     *Store
	step  string
	total int
	done  *atomic.Int64
}

func (c *pathCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if k := bytes.Count(p[:n], []byte{0}); k > 0 {
		c.s.progress(c.step, int(c.done.Add(int64(k))), c.total)
	}
	return n, err
}
