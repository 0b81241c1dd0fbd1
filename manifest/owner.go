package manifest

import (
	"fmt"
	"os"
)

// currentUID is the user rewind runs as; a variable so that a test can play
// another user without root.
var currentUID = os.Getuid

// checkOwner refuses a dispatch directory that another user owns. /tmp is
// shared and a dispatch directory's name is predictable, so another user could
// have made it first, to read the pipeline's dispatches or plant entries in its
// manifest. A directory that does not exist passes: each command says what it
// does without one.
func checkOwner(cmd, dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil
	}
	uid, ok := ownerOf(fi)
	if !ok || uid == currentUID() {
		return nil
	}
	return &DispatchError{Foreign: true,
		Msg: fmt.Sprintf("dispatch %s: dispatch dir %s is owned by uid %d, not by you (uid %d) (refusing)", cmd, dir, uid, currentUID())}
}
