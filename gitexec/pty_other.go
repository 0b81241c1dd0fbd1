//go:build !linux

package gitexec

import (
	"errors"
	"os"
)

// openTerminal is only written for Linux; elsewhere a command run with
// RunProgress reports no counts.
func openTerminal() (reader, terminal *os.File, err error) {
	return nil, nil, errors.New("no pseudo-terminal support on this platform")
}
