package gitexec

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// Shadow runs git against a shadow repository: the git directory, work tree and
// index are always given explicitly, and the environment is built so that nothing
// the user (or a hostile checkout) configured can change what git stores or run a
// command of its own.
type Shadow struct {
	GitDir    string // the shadow repository
	WorkTree  string // the user's work tree being snapshotted
	IndexFile string // the persistent index (stat data between checkpoints)

	// SplitIndexFile, when it is IndexFile, keeps that index split
	// (core.splitIndex): most entries sit in a shared part git rewrites only
	// now and then, so a command that changes a few entries writes a few
	// kilobytes instead of the whole index. Every command that writes the
	// index must say so, or git folds it back whole; a scratch index (any
	// other IndexFile) is never split.
	SplitIndexFile string

	// ConfigHome is an empty directory used as HOME, XDG_CONFIG_HOME and
	// core.hooksPath. git before 2.32 ignores GIT_CONFIG_GLOBAL, so an empty HOME is
	// what keeps ~/.gitconfig out.
	ConfigHome string

	// PackBlobs writes the blobs the command hashes into packs (of at most
	// BulkPackLimit bytes each) instead of one loose file each
	// (core.bigFileThreshold=1: every blob over a byte goes through git's
	// bulk check-in, which update-index gathers into packs from git 2.37).
	// Loose, a store of many files makes each later write-tree stat one
	// objects/xx/... file per entry of every directory it rewrites; packed,
	// that check is a lookup in memory. Only for commands that write new
	// blobs: the bulk path compresses a file before it knows the blob
	// exists, so a command that mostly finds its blobs written already is
	// faster without it. Older gits, which would write one pack per blob,
	// write them loose as before.
	PackBlobs bool

	// Date is the author and committer date of any commit made; the zero value
	// means now. Checkpoints pass their timestamp, so --now makes ids reproducible.
	Date time.Time
}

// BulkPackLimit is the most bytes of one pack of a bulk check-in
// (Shadow.PackBlobs). Git checks each object it adds to such a pack against
// every one it added before, one by one, so a pack of n objects costs n²
// comparisons: a first checkpoint of a million files, all in one pack per
// process, spent most of its 19 minutes there. In packs of 16 MiB (some
// thousands of files each) one update-index of 50,000 files took 9.3 s
// where one pack took 13.3 s, a first checkpoint of 300,000 files 42.8 s
// where it took 71.4 s. (A test lowers it.)
var BulkPackLimit int64 = 16 << 20

// Identity is the author and committer of every shadow commit.
const (
	IdentityName  = "rewind"
	IdentityEmail = "rewind@localhost"
)

// ShadowAttributes makes every snapshot byte-exact: no end-of-line conversion, no
// clean/smudge filter (git-lfs and the like), no ident or encoding rewriting,
// whatever the work tree's .gitattributes say. $GIT_DIR/info/attributes takes
// precedence over them.
const ShadowAttributes = "* -text !eol -filter -ident -working-tree-encoding\n"

// overrides are passed as -c to every shadow command. Config files are already
// kept out by the environment; these pin the settings whose defaults could differ
// between git versions or platforms, or that a repository-local config could set.
func (s Shadow) overrides() []string {
	kv := []string{
		"core.hooksPath=" + s.ConfigHome,
		"core.excludesFile=" + os.DevNull,
		"core.attributesFile=" + os.DevNull,
		"core.autocrlf=false",
		"core.safecrlf=false",
		"core.eol=lf",
		"core.fsmonitor=false",
		"core.untrackedCache=false",
		"core.sparseCheckout=false",
		"core.symlinks=true",
		"core.fileMode=true",
		// diff-files must see every change of a file's stat data (a
		// chmod moves only the ctime): rewind trusts it to say which files
		// are as the index holds them.
		"core.trustctime=true",
		"core.checkStat=default",
		"core.ignoreCase=false",
		"core.precomposeUnicode=false",
		// The NTFS and HFS+ name checks protect checkouts on those file
		// systems; the store is a private repository, and a name such as
		// git~1 must be storable.
		"core.protectNTFS=false",
		"core.protectHFS=false",
		"core.quotePath=false",
		"core.logAllRefUpdates=false", // a reflog would keep evicted checkpoints alive
		"core.bare=false",
		"commit.gpgSign=false",
		"tag.gpgSign=false",
		"gc.auto=0",
		"maintenance.auto=false",
		"index.sparse=false",
		"feature.manyFiles=false",
		"submodule.recurse=false",
		// No network but what a command asks for itself (push and pull name
		// file, ssh and https): a protocol.<name>.allow in the store's own
		// config would win over protocol.allow alone.
		"protocol.allow=never",
		"protocol.ext.allow=never",
		"protocol.git.allow=never",
		"protocol.http.allow=never",
		"color.ui=false",
		"user.useConfigOnly=false",
		"init.defaultBranch=rewind",
	}
	if s.PackBlobs && BulkCheckinPacks() {
		kv = append(kv, "core.bigFileThreshold=1", fmt.Sprintf("pack.packSizeLimit=%d", BulkPackLimit))
	}
	if s.SplitIndexFile != "" && s.SplitIndexFile == s.IndexFile {
		// A shared part stays a day after the last index that named it: a
		// rewind killed between writing a new shared part and the index
		// that names it leaves the old index with its shared part intact.
		kv = append(kv, "core.splitIndex=true", "splitIndex.sharedIndexExpire=1.day.ago", "splitIndex.maxPercentChange=20")
	} else {
		kv = append(kv, "core.splitIndex=false")
	}
	args := make([]string, 0, 2*len(kv))
	for _, v := range kv {
		args = append(args, "-c", v)
	}
	return args
}

// env is the complete environment of a shadow command.
func (s Shadow) env() []string {
	date := s.Date
	if date.IsZero() {
		date = time.Now()
	}
	stamp := fmt.Sprintf("@%d +0000", date.Unix())
	return scrubbedEnv(
		"GIT_DIR="+s.GitDir,
		"GIT_WORK_TREE="+s.WorkTree,
		"GIT_INDEX_FILE="+s.IndexFile,
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL="+os.DevNull,
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_AUTHOR_NAME="+IdentityName,
		"GIT_AUTHOR_EMAIL="+IdentityEmail,
		"GIT_AUTHOR_DATE="+stamp,
		"GIT_COMMITTER_NAME="+IdentityName,
		"GIT_COMMITTER_EMAIL="+IdentityEmail,
		"GIT_COMMITTER_DATE="+stamp,
		"HOME="+s.ConfigHome,
		"XDG_CONFIG_HOME="+s.ConfigHome,
		"LC_ALL=C",
	)
}

// Run runs git with args against the shadow repository and returns its stdout.
func (s Shadow) Run(ctx context.Context, args ...string) ([]byte, error) {
	return output(ctx, s.WorkTree, s.env(), nil, append(s.overrides(), args...))
}

// RunWarn is Run that also returns git's stderr (warnings of a command that
// succeeded, such as a directory ls-files could not open).
func (s Shadow) RunWarn(ctx context.Context, args ...string) ([]byte, string, error) {
	return outputWarn(ctx, s.WorkTree, s.env(), nil, append(s.overrides(), args...))
}

// RunInput is Run with stdin.
func (s Shadow) RunInput(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	return output(ctx, s.WorkTree, s.env(), stdin, append(s.overrides(), args...))
}

// Stream runs git and copies its stdout to w as it is produced, for outputs too
// large to hold (ls-files of a million paths).
func (s Shadow) Stream(ctx context.Context, stdin io.Reader, w io.Writer, args ...string) error {
	_, err := run(ctx, s.WorkTree, s.env(), stdin, w, append(s.overrides(), args...))
	return err
}

// Init creates the shadow repository if it does not exist yet: no template (an
// init.templateDir could bring hooks), and the attributes that keep snapshots
// byte-exact. Running it on an existing repository only rewrites the attributes.
func (s Shadow) Init(ctx context.Context) error {
	for _, dir := range []string{s.GitDir, s.ConfigHome} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(s.GitDir, "HEAD")); os.IsNotExist(err) {
		// GIT_WORK_TREE stays unset for init: git init would record it as
		// core.worktree, and the store must not depend on it.
		env := s.env()
		env = withoutKey(env, "GIT_WORK_TREE")
		env = withoutKey(env, "GIT_INDEX_FILE")
		args := append(s.overrides(), "init", "--quiet", "--bare", "--template=", "--", s.GitDir)
		if _, err := run(ctx, s.GitDir, env, nil, io.Discard, args); err != nil {
			return err
		}
	}
	info := filepath.Join(s.GitDir, "info")
	if err := os.MkdirAll(info, 0o700); err != nil {
		return err
	}
	path := filepath.Join(info, "attributes")
	if old, err := os.ReadFile(path); err == nil && string(old) == ShadowAttributes {
		return nil
	}
	return writeWhole(path, []byte(ShadowAttributes), 0o600)
}

// writeWhole replaces path with data or leaves it as it was: a temporary
// file, every error checked, fsync, rename, fsync of the directory. (An
// attributes file a full disk left empty would make every later snapshot
// subject to the work tree's filters.)
func writeWhole(path string, data []byte, mode os.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".rewind-tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return err
	}
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, derr := os.Open(filepath.Dir(path)); derr == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

func withoutKey(env []string, key string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			continue
		}
		out = append(out, kv)
	}
	return out
}
