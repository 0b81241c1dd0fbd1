//go:build !linux

package checkpoint

import "os"

// dirStat is lstat of whole paths here (see lstat_linux.go).
type dirStat struct{}

func openDirStat(string) dirStat { return dirStat{} }

func (dirStat) close() {}

func (dirStat) lstat(full, _ string) (os.FileInfo, error) { return os.Lstat(full) }
