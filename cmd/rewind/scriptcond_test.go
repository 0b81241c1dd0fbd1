package main

import (
	"fmt"
	"os"
	"os/exec"
)

// scriptCondition answers the scripts' custom conditions:
//   - [root] holds when the tests run as root, the only user that can give a
//     file to another user (chown), as the scripts about other users'
//     directories need;
//   - [userns] holds when `unshare -U` can run a command in a user namespace,
//     where file permissions bind even root.
func scriptCondition(cond string) (bool, error) {
	switch cond {
	case "root":
		return os.Getuid() == 0, nil
	case "userns":
		return exec.Command("unshare", "-U", "true").Run() == nil, nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}
