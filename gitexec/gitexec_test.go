package gitexec

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestErrorCarriesExitCodeAndStderr(t *testing.T) {
	dir := projectRepo(t)
	_, err := Project{Dir: dir}.Run(context.Background(), "rev-parse", "--verify", "--end-of-options", "no-such-ref")
	var gerr *Error
	if !errors.As(err, &gerr) {
		t.Fatalf("err = %T %v, want *Error", err, err)
	}
	if gerr.ExitCode != 128 || !strings.Contains(gerr.Stderr, "Needed a single revision") || gerr.Dir != dir {
		t.Errorf("error = %+v", gerr)
	}
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) {
		t.Errorf("Unwrap does not reach the *exec.ExitError")
	}
	if got, want := err.Error(), "git --no-pager rev-parse --verify --end-of-options no-such-ref in "+dir+": exit status 128: fatal: Needed a single revision"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

func TestTraceShowsEachCommand(t *testing.T) {
	var buf bytes.Buffer
	Trace = &buf
	defer func() { Trace = nil }()
	dir := projectRepo(t)
	buf.Reset()
	if _, err := (Project{Dir: dir}).Run(context.Background(), "log", "--format=%s %H"); err != nil {
		t.Fatal(err)
	}
	// The command line before it runs, then its subcommand and duration.
	re := regexp.MustCompile(`^rewind: trace: git -c core.fsmonitor=false -c protocol.allow=never -c protocol.file.allow=never -c protocol.git.allow=never -c protocol.ssh.allow=never -c protocol.http.allow=never -c protocol.https.allow=never -c protocol.ext.allow=never --no-pager log '--format=%s %H'\nrewind: trace: git log: [0-9.]+m?s\n$`)
	if got := buf.String(); !re.MatchString(got) {
		t.Errorf("trace %q, want a match for %s", got, re)
	}
}

func TestShadowEnvironment(t *testing.T) {
	t.Setenv("GIT_DIR", "/elsewhere")
	t.Setenv("GIT_TRACE", "1")
	t.Setenv("KEEP_ME", "yes")
	s := Shadow{GitDir: "/store/git", WorkTree: "/wt", IndexFile: "/store/index", ConfigHome: "/store/home"}
	env := strings.Join(s.env(), "\n") + "\n"
	for _, want := range []string{"GIT_DIR=/store/git\n", "GIT_WORK_TREE=/wt\n", "GIT_INDEX_FILE=/store/index\n",
		"GIT_CONFIG_NOSYSTEM=1\n", "GIT_CONFIG_GLOBAL=/dev/null\n", "GIT_TERMINAL_PROMPT=0\n",
		"GIT_NO_REPLACE_OBJECTS=1\n", "LC_ALL=C\n", "HOME=/store/home\n", "XDG_CONFIG_HOME=/store/home\n", "KEEP_ME=yes\n"} {
		if !strings.Contains(env, want) {
			t.Errorf("environment lacks %q", want)
		}
	}
	for _, bad := range []string{"GIT_DIR=/elsewhere", "GIT_TRACE="} {
		if strings.Contains(env, bad) {
			t.Errorf("environment keeps %q", bad)
		}
	}
}

func TestUserCommand(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GIT_DIR", filepath.Join(dir, "caller-git"))
	var out, errOut bytes.Buffer
	code, err := User{Dir: dir, Env: []string{"EXTRA=1"}}.Run(context.Background(),
		`pwd; echo "$EXTRA $GIT_DIR"; echo oops >&2; exit 3`, nil, &out, &errOut)
	if err != nil || code != 3 {
		t.Fatalf("code %d, err %v", code, err)
	}
	if got, want := out.String(), dir+"\n1 "+filepath.Join(dir, "caller-git")+"\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if errOut.String() != "oops\n" {
		t.Errorf("stderr %q", errOut.String())
	}
}

func TestUserCommandCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := (User{Dir: t.TempDir()}).Run(ctx, "sleep 5", nil, nil, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}
