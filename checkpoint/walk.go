package checkpoint

import (
	"io/fs"
	"os"
	"path/filepath"
)

func walk(dir string, fn func(os.FileInfo)) {
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
			fn(fi)
		}
		return nil
	})
}
