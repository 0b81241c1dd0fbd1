package main

import (
	"fmt"
	"os"
)

// scriptCondition answers the scripts' custom conditions: [root] holds when
// the tests run as root, the only user that can give a file to another user
// (chown), as the scripts about other users' directories need.
func scriptCondition(cond string) (bool, error) {
	switch cond {
	case "root":
		return os.Getuid() == 0, nil
	}
	return false, fmt.Errorf("unknown condition %q", cond)
}
