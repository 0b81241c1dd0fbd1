package gitexec

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
)

func resetGit() {
	gitOnce = sync.Once{}
	gitExe, gitVersion, gitErr = "", "", nil
}

func TestVersionCompare(t *testing.T) {
	for _, tc := range []struct {
		have string
		ok   bool
	}{
		{"2.25", true}, {"2.25.0", true}, {"2.39.5", true}, {"3.0", true},
		{"2.24.9", false}, {"2.17.1", false}, {"1.99", false}, {"", false},
		{"2.39.3 (Apple Git-146)", true}, {"2.40.0.windows.1", true}, {"2.25.0-rc1", true},
	} {
		if got := atLeast(parseVersion("git version "+tc.have), MinVersion); got != tc.ok {
			t.Errorf("atLeast(%q) = %v, want %v", tc.have, got, tc.ok)
		}
	}
}

func TestGitMissingOrOld(t *testing.T) {
	defer resetGit()
	ctx := context.Background()

	resetGit()
	t.Setenv("PATH", t.TempDir())
	if _, err := Version(ctx); !errors.Is(err, ErrGitNotFound) {
		t.Errorf("empty PATH: err = %v, want ErrGitNotFound", err)
	}
	if _, err := (Project{Dir: "."}).Run(ctx, "rev-parse", "HEAD"); !errors.Is(err, ErrGitNotFound) {
		t.Errorf("Project with no git: err = %v", err)
	}

	resetGit()
	bin := t.TempDir()
	mustWrite(t, filepath.Join(bin, "git"), "#!/bin/sh\necho 'git version 2.17.1'\n", 0o755)
	t.Setenv("PATH", bin)
	_, err := Version(ctx)
	var verr *VersionError
	if !errors.As(err, &verr) || verr.Found != "2.17.1" {
		t.Fatalf("old git: err = %v", err)
	}
	if got, want := err.Error(), "git 2.25 or newer is needed; found 2.17.1"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"git version 2.39.5\n", "git version 2.39.3 (Apple Git-146)", "2.25", "", "git version x.y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := parseVersion(s)
		if atLeast(v, MinVersion) && len(numbers(v)) == 0 {
			t.Fatalf("%q accepted with no version number", s)
		}
	})
}
