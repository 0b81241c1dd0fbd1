package checkpoint

import (
	"bytes"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"
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

// gitProgressLine matches git's progress lines: "Counting objects:  45%
// (9000/20000)", "Writing objects: 100% (20808/20808), 24.50 MiB | 12.00
// MiB/s, done." and the uncounted "Enumerating objects: 21212, done." or
// "Checking connectivity: 1234".
var gitProgressLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([A-Z][a-z]*(?: [a-z]+)*): +(?:\d{1,3}% \((\d+)/(\d+)\)|(\d+)(?:,|$))`)
})

// parseGitProgress reads one of git's progress lines: the phase, lower case,
// and its count (total 0 when git does not know it). ok is false for any
// other line ("Delta compression using up to 2 threads", "Total 21212 ...").
func parseGitProgress(line string) (phase string, done, total int, ok bool) {
	m := gitProgressLine().FindStringSubmatch(line)
	if m == nil {
		return "", 0, 0, false
	}
	var err error
	if m[4] != "" {
		done, err = strconv.Atoi(m[4])
	} else {
		done, err = strconv.Atoi(m[2])
		if err == nil {
			total, err = strconv.Atoi(m[3])
		}
	}
	if err != nil || done < 0 || total < 0 || (total > 0 && done > total) {
		return "", 0, 0, false
	}
	return strings.ToLower(m[1]), done, total, true
}

// gitProgress turns git's progress lines into s.progress reports under step:
// "repacking objects: writing objects", with git's counts.
func (s *Store) gitProgress(step string) func(string) {
	return func(line string) {
		if phase, done, total, ok := parseGitProgress(line); ok {
			s.progress(step+": "+phase, done, total)
		}
	}
}
