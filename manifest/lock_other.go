//go:build !unix

package manifest

import "os"

// lockFile is a no-op where flock does not exist: appends are then only as
// atomic as the platform's O_APPEND writes.
func lockFile(f *os.File, exclusive bool) error { return nil }
