package gitexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// MinVersion is the oldest git rewind works with (GIT_CONFIG_GLOBAL, ls-files
// --format and other features it relies on are older than this).
const MinVersion = "2.25"

// ErrGitNotFound means no git executable is on PATH.
var ErrGitNotFound = errors.New("git not found on PATH")

// VersionError means the git on PATH is older than MinVersion.
type VersionError struct {
	Found string // the version git reported, for example "2.17.1"
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("git %s or newer is needed; found %s", MinVersion, e.Found)
}

var (
	gitOnce    sync.Once
	gitExe     string
	gitVersion string
	gitErr     error
)

// gitPath finds git once per process and checks its version, so that every command
// fails with one clear error instead of an obscure one from a missing feature.
func gitPath() (string, error) {
	gitOnce.Do(func() {
		gitExe, gitErr = exec.LookPath("git")
		if gitErr != nil {
			gitErr = ErrGitNotFound
			return
		}
		key, cached := cachedVersion(gitExe)
		if cached != "" {
			gitVersion = cached
		} else {
			cmd := exec.Command(gitExe, "version")
			cmd.Env = scrubbedEnv("LC_ALL=C")
			out, err := cmd.Output()
			if err != nil {
				gitErr = fmt.Errorf("%s version: %w", gitExe, err)
				return
			}
			gitVersion = parseVersion(string(out))
			saveVersion(key, gitVersion)
		}
		if !atLeast(gitVersion, MinVersion) {
			gitErr = &VersionError{Found: gitVersion}
		}
	})
	return gitExe, gitErr
}

// cachedVersion is the version last found for the git executable exe, when
// the executable is still the same file (its path, size, times and inode),
// kept in the user's cache directory: asking git costs a process, on every
// command, and hooks run rewind after every tool call. key identifies the
// executable ("" when it cannot be looked at: nothing is cached).
func cachedVersion(exe string) (key, version string) {
	fi, err := os.Stat(exe)
	if err != nil {
		return "", ""
	}
	var ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		ino = uint64(st.Ino)
	}
	key = fmt.Sprintf("%s\x00%d\x00%d\x00%d", exe, fi.Size(), fi.ModTime().UnixNano(), ino)
	data, err := os.ReadFile(versionCacheFile())
	if err != nil {
		return key, ""
	}
	if k, v, ok := strings.Cut(string(data), "\n"); ok && k == key && parseVersion("git version "+strings.TrimSpace(v)) != "" {
		return key, strings.TrimSpace(v)
	}
	return key, ""
}

// saveVersion keeps the version found for the executable key names; a
// failure only costs the next command a git version.
func saveVersion(key, version string) {
	file := versionCacheFile()
	if key == "" || file == "" || version == "" {
		return
	}
	if os.MkdirAll(filepath.Dir(file), 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".git-version-*")
	if err != nil {
		return
	}
	_, err = tmp.WriteString(key + "\n" + version + "\n")
	if cerr := tmp.Close(); err != nil || cerr != nil || os.Rename(tmp.Name(), file) != nil {
		os.Remove(tmp.Name())
	}
}

// versionCacheFile is where cachedVersion keeps its answer, or "".
func versionCacheFile() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "rewind", "git-version")
}

// Version returns the version of the git on PATH, or ErrGitNotFound or a
// *VersionError when it cannot be used.
func Version(ctx context.Context) (string, error) {
	if _, err := gitPath(); err != nil {
		return gitVersion, err
	}
	return gitVersion, nil
}

// bulkCheckinVersion is the first git whose update-index gathers the blobs
// of its bulk check-in into one pack (it begins an object database
// transaction); before it, each blob over core.bigFileThreshold became a pack
// of its own.
const bulkCheckinVersion = "2.37"

// BulkCheckinPacks reports whether the git on PATH writes the blobs one
// update-index hashes into a single pack when they go through the bulk
// check-in (see Shadow.PackBlobs).
func BulkCheckinPacks() bool {
	if _, err := gitPath(); err != nil {
		return false
	}
	return atLeast(gitVersion, bulkCheckinVersion)
}

// AtLeast reports whether the git on PATH is version v or newer (false when
// there is no usable git).
func AtLeast(v string) bool {
	if _, err := gitPath(); err != nil {
		return false
	}
	return atLeast(gitVersion, v)
}

// parseVersion takes "git version 2.39.5" (or "git version 2.39.3 (Apple Git-146)")
// and returns "2.39.5".
func parseVersion(out string) string {
	f := strings.Fields(out)
	if len(f) >= 3 && f[0] == "git" && f[1] == "version" {
		return f[2]
	}
	return strings.TrimSpace(out)
}

// atLeast compares dotted numeric versions; trailing non-numeric parts
// ("2.39.0.windows.1", "2.40.0-rc1") are ignored.
func atLeast(have, want string) bool {
	h, w := numbers(have), numbers(want)
	if len(h) == 0 {
		return false
	}
	for i := 0; i < len(w); i++ {
		var hv int
		if i < len(h) {
			hv = h[i]
		}
		if hv != w[i] {
			return hv > w[i]
		}
	}
	return true
}

func numbers(v string) []int {
	var out []int
	for _, part := range strings.Split(v, ".") {
		end := 0
		for end < len(part) && part[end] >= '0' && part[end] <= '9' {
			end++
		}
		if end == 0 {
			break
		}
		n, _ := strconv.Atoi(part[:end])
		out = append(out, n)
		if end < len(part) {
			break
		}
	}
	return out
}
