package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/rewind-cli/rewind/gitexec"
)

// This file is the rule of what a checkpoint holds and what a restore may
// touch; capture and restore ask it and decide nothing of their own.
//
// A checkpoint holds every file the project itself holds, as the project's own
// git sees it: every file its git tracks, whatever an ignore rule says, plus
// every untracked file its git does not ignore (every ignore source git reads:
// .gitignore at every level, an enclosing repository's included, .git/info/exclude,
// core.excludesFile, ~/.config/git/ignore), minus the default excludes and the
// work tree's .rewindignore (untracked files only), minus the store. Outside a
// git repository only the work tree's .gitignore files count. A nested
// repository is held by the same rule with its own tracking and ignores, as
// plain files. A path's past in the store never matters.
//
// A restore writes and deletes only paths the checkpoint holds or would have
// held had they existed: never a path ignored now, and never deletes one the
// checkpoint's own rules (its .gitignore files and .rewindignore) ignore, with
// the sources outside the work tree that the restore leaves as they are
// (info/exclude, core.excludesFile, a .gitignore above the work tree).

// rewindIgnoreMax caps .rewindignore: it is read on every checkpoint.
const rewindIgnoreMax = 1 << 20

var defaultExcludes = parseIgnore([]byte(strings.Join(DefaultExcludes, "\n")))

// held is the work tree as the rule sees it at one instant.
type held struct {
	paths   []string        // every path held (files and symlinks; classify judges them)
	tracked map[string]bool // paths a project's git tracks
	repos   []string        // roots of the repositories found, "" for the work tree's own
	inRepo  bool            // the work tree is inside a git repository
	ignore  ignorePatterns  // the work tree's .rewindignore
	private []string        // rewind's and the agents' own directories inside the work tree
	notes   []string        // what the user should know (a .rewindignore not read, the store inside)

	head, branch string // the project's HEAD commit and branch ("": none, detached)

	// What the project's git said of the work tree's repository, for the
	// restore's rules (outerRulesOf): where (rev-parse's is-inside, index,
	// info/exclude and top lines) and config (config --list, when read).
	where      []string
	config     []byte
	configRead bool

	inputs    []byte   // listingInputs' digest; nil when the listing cannot be cached
	listedBy  string   // how the paths were found (for REWIND_TRACE)
	fromCache bool     // all from the listing cache
	relisted  dirSet   // the directories listed again, the rest from the cache
	confirmed []string // directories changed with the same names: listed as the cache has them (changedDirs)

	unreadable []Skipped // directories git could not list
	opaque     []string  // repositories git answers nothing for below: submodules not checked out, repositories it does not trust
}

// unreadableDir is git's warning for a directory ls-files could not open.
var unreadableDir = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^warning: could not open directory '(.*)': (.*)$`) })

// errNoRepository stands for git's "not a git repository" where it was not
// asked (noRepository).
var errNoRepository = errors.New("not a git repository")

// hold lists what a checkpoint of the work tree holds now. trusted says
// whether the directories' times may be trusted at all: then the listing
// cache (listcache.go), read and returned as cache, gives what it can, and
// h.inputs is set, for the cache the capture writes.
func (s *Store) hold(ctx context.Context, trusted bool) (*held, *listCache, error) {
	h := &held{tracked: map[string]bool{}}
	var rewindIgnore []byte
	h.ignore, h.notes, rewindIgnore = s.readRewindIgnore()
	if rel, ok := s.insideWorkTree(s.Dir); ok {
		h.private = append(h.private, rel)
		h.notes = append(h.notes, fmt.Sprintf("the store %s is inside the work tree; it is never captured nor touched by a restore", rel))
	}
	// A work tree above the home directory holds every project's stores and
	// pipeline memory (~/.claude/projects/): none of it is the project's, and
	// a restore must never roll it back.
	if home, err := os.UserHomeDir(); err == nil {
		if rel, ok := s.insideWorkTree(filepath.Join(home, ".claude", "projects")); ok {
			h.private = append(h.private, rel)
		}
	}
	// rewind's own cache (the git version it found) is not the project's
	// either.
	if cache, err := os.UserCacheDir(); err == nil {
		if rel, ok := s.insideWorkTree(filepath.Join(cache, "rewind")); ok {
			h.private = append(h.private, rel)
		}
	}
	// One rev-parse tells whether the work tree is in a repository, where
	// the listing's inputs lie, and the project's HEAD and branch (recorded
	// in the checkpoint); a HEAD without commits makes it fail, and it is
	// asked again without.
	//
	// The project's config, an input of the listing cache, is read beside
	// it (and dropped outside a repository), and so is the listing cache.
	// Neither runs where git could find no repository (noRepository); at the
	// top of a plain repository the files tell what the rev-parse would
	// (plainRevParse).
	project := gitexec.Project{Dir: s.WorkTree}
	where := []string{"rev-parse", "--is-inside-work-tree", "--git-path", "index", "--git-path", "info/exclude", "--show-toplevel"}
	var out, config []byte
	var err, configErr error
	var cache *listCache
	noRepo := noRepository(s.WorkTree) // then git would say "not a git repository"
	parallel(
		func() error {
			if trusted {
				cache = s.readListCache()
			}
			return nil
		},
		func() error {
			if noRepo {
				err = errNoRepository
				return nil
			}
			var plain bool
			if out, plain = plainRevParse(s.WorkTree); plain {
				return nil
			}
			out, err = project.Run(ctx, append(where, "HEAD", "--symbolic-full-name", "HEAD")...)
			if ge, ok := err.(*gitexec.Error); ok && !strings.Contains(ge.Stderr, "not a git repository") {
				out, err = project.Run(ctx, where...)
			}
			return nil
		},
		func() error {
			if trusted && !noRepo {
				config, configErr = project.Run(ctx, "config", "-z", "--list")
			}
			return nil
		})
	revParse := strings.Split(strings.TrimSpace(string(out)), "\n")
	h.inRepo = err == nil && revParse[0] == "true"
	if h.inRepo && len(revParse) == 6 {
		h.head = revParse[4]
		h.branch, _ = strings.CutPrefix(revParse[5], "refs/heads/")
		if h.branch == revParse[5] {
			h.branch = "" // detached
		}
		revParse = revParse[:4]
	}
	if h.inRepo && len(revParse) == 4 {
		h.where = revParse
	}
	if ge, ok := err.(*gitexec.Error); ok && strings.Contains(ge.Stderr, "dubious ownership") {
		h.notes = append(h.notes, "the project's git does not trust this repository (another user owns it; see git's safe.directory): only the work tree's .gitignore files count")
	}
	if !h.inRepo {
		config, configErr = nil, nil
	}
	if trusted && configErr == nil {
		h.inputs = s.listingInputs(h, rewindIgnore, revParse, config)
		h.config, h.configRead = config, h.inRepo
	}
	if cache != nil && h.inputs != nil && bytes.Equal(cache.inputs, h.inputs) {
		changed, confirmed := s.changedDirs(cache)
		h.confirmed = confirmed
		switch {
		case len(changed) == 0:
			h.paths, h.tracked, h.repos, h.listedBy, h.fromCache = cache.paths, cache.tracked, []string{""}, "the listing cache", true
			return h, cache, nil
		case changed[0] != "" && len(changed) <= maxRelisted:
			ok, err := s.relist(ctx, h, cache, changed)
			if err != nil || ok {
				return h, cache, err
			}
			// something the cache cannot hold came up: list it all
			*h = held{tracked: map[string]bool{}, ignore: h.ignore, notes: h.notes, private: h.private, inRepo: h.inRepo, inputs: h.inputs,
				head: h.head, branch: h.branch, where: h.where, config: h.config, configRead: h.configRead}
		}
	}
	h.listedBy = "git"
	queue := []string{""}
	for len(queue) > 0 {
		root := queue[0]
		queue = queue[1:]
		h.repos = append(h.repos, root)
		entries, err := s.listRepo(ctx, h, root, false)
		if err != nil {
			return nil, nil, err
		}
		var found []string
		h.paths, found = h.add(h.paths, entries)
		queue = append(queue, found...)
	}
	h.paths = dedupe(h.paths)
	return h, cache, nil
}

// maxRelisted is the most directories a capture lists again by pathspec;
// past it, the whole tree.
const maxRelisted = 512

// add sorts listed entries into paths (and h.tracked) by the rule, and
// returns the nested repositories found, to be listed by their own rules.
func (h *held) add(paths []string, entries []listed) ([]string, []string) {
	var repos []string
	for _, e := range entries {
		switch {
		case e.repo && !e.tracked && h.excludedByRewind(e.path, true):
			// an untracked one excluded whole (a default exclude,
			// .rewindignore, the store)
		case e.repo:
			repos = append(repos, e.path)
		case !e.tracked && (h.ignore.excluded(e.path, false) || h.privateOf(e.path) != ""):
			// (git applied the default excludes: they come first on its
			// command line)
		default:
			if e.tracked {
				h.tracked[e.path] = true
			}
			paths = append(paths, e.path)
		}
	}
	return paths, repos
}

// relist lists again, by pathspec, the directories that changed since the
// cache's listing, and takes the rest from the cache. It reports false when
// the listing found what the cache cannot hold (a repository, a directory it
// could not read): then the caller lists the whole tree.
func (s *Store) relist(ctx context.Context, h *held, cache *listCache, dirs []string) (bool, error) {
	specs := make([]string, len(dirs))
	for i, d := range dirs {
		// no trailing slash: with one, git lists nothing below a nested
		// repository, which must show up here (and send the caller to a
		// full listing)
		specs[i] = ":(literal)" + d
	}
	// Only the untracked files: the project's index is the one the cache's
	// listing read (its stamp is an input), so the tracked files are the
	// cache's, and git need not match every index entry against every
	// pathspec.
	entries, err := s.listRepo(ctx, h, "", true, specs...)
	if err != nil {
		return false, err
	}
	h.tracked = cache.tracked
	fresh, repos := h.add(nil, entries)
	if len(repos) > 0 || len(h.unreadable) > 0 || len(h.opaque) > 0 {
		return false, nil
	}
	set := newDirSet(dirs)
	for p := range cache.tracked {
		if set.holds(p) {
			fresh = append(fresh, p)
		}
	}
	h.paths = replaceUnder(cache.paths, set, fresh)
	h.repos = []string{""}
	h.relisted = set
	h.listedBy = fmt.Sprintf("the listing cache and git for %d changed directories", len(dirs))
	return true, nil
}

// listingInputs digests every input of the listing besides the directories
// (the listing cache compares their stat data itself): the work tree, the
// directories kept private, .rewindignore, and in a repository its index,
// its config (every scope, includes resolved), info/exclude, the excludes
// file the config names and the .gitignore files above the work tree. nil:
// the listing cannot be cached.
func (s *Store) listingInputs(h *held, rewindIgnore []byte, revParse []string, config []byte) []byte {
	sum := sha256.New()
	field := func(v string) { fmt.Fprintf(sum, "%d:%s\n", len(v), v) }
	field(listCacheMagic)
	field(s.WorkTree)
	field(strings.Join(h.private, "\x00"))
	field(strings.Join(h.notes, "\x00"))
	field(string(rewindIgnore))
	field(strconv.FormatBool(h.inRepo))
	if h.inRepo {
		if len(revParse) != 4 {
			return nil
		}
		abs := func(p string) string {
			if filepath.IsAbs(p) {
				return p
			}
			return filepath.Join(s.WorkTree, p)
		}
		top := filepath.Clean(revParse[3])
		if !within(filepath.ToSlash(s.WorkTree), filepath.ToSlash(top)) {
			return nil // (a path spelled otherwise: nothing to walk up)
		}
		index := abs(revParse[1])
		stamp, err := indexStamp(index)
		if err != nil {
			stamp = []byte("no index: " + errText(err))
		} else if bytes.Count(stamp[len(stamp)-20:], []byte{0}) == 20 {
			// No checksum (index.skipHash, git 2.40 and later): the file's
			// own stat data tells a rewrite (git renames a new one in).
			if fi, err := os.Lstat(index); err == nil {
				stamp = append(stamp, fmt.Sprint(keyOf(fi))...)
			}
		}
		field(string(stamp))
		field(readOrWhy(abs(revParse[2])))
		field(string(config))
		excludes, ok := excludesFile(config)
		if !ok {
			return nil
		}
		if excludes == "" {
			field("none")
		} else {
			if !filepath.IsAbs(excludes) {
				excludes = filepath.Join(top, excludes) // git reads it from the top
			}
			field(readOrWhy(excludes))
		}
		// The .gitignore files above the work tree, up to the
		// repository's top, apply to it too.
		for dir := s.WorkTree; dir != top; {
			dir = filepath.Dir(dir)
			field(readOrWhy(filepath.Join(dir, ".gitignore")))
		}
	}
	return sum.Sum(nil)
}

// excludesFile is the excludes file git reads given its config (git config
// -z --list): core.excludesFile (the last one), or the XDG default; "" when
// it is set empty (git then reads none); a relative path is the repository
// top's. false: a path rewind cannot resolve as git would (~user/,
// %(prefix)/).
func excludesFile(config []byte) (string, bool) {
	file, set := "", false
	for _, entry := range bytes.Split(config, []byte{0}) {
		key, value, _ := bytes.Cut(entry, []byte{'\n'})
		if strings.EqualFold(string(key), "core.excludesfile") {
			file, set = string(value), true
		}
	}
	home, _ := os.UserHomeDir()
	switch {
	case set && file == "":
		return "", true // set empty: git reads no excludes file, not the default
	case file == "":
		if xdg := os.Getenv("XDG_CONFIG_HOME"); xdg != "" {
			return filepath.Join(xdg, "git", "ignore"), true
		}
		return filepath.Join(home, ".config", "git", "ignore"), true
	case strings.HasPrefix(file, "~/"):
		return filepath.Join(home, file[2:]), true
	case strings.HasPrefix(file, "~"), strings.HasPrefix(file, "%(prefix)"):
		return "", false
	}
	return file, true
}

// readOrWhy is a file's content, or why it has none, for a digest.
func readOrWhy(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "unread: " + errText(err)
	}
	return "read: " + string(data)
}

type listed struct {
	path    string
	tracked bool
	repo    bool // a nested repository's root: listed by its own rules
}

// listRepo lists one repository's files (the work tree's own when root is ""
// and the work tree is not in a repository: a plain listing with its
// .gitignore files only), relative to the work tree; with untrackedOnly,
// only the files its index does not hold.
func (s *Store) listRepo(ctx context.Context, h *held, root string, untrackedOnly bool, pathspecs ...string) ([]listed, error) {
	args := []string{"ls-files", "-z", "-t", "--others"}
	if !untrackedOnly {
		args = append(args, "-s", "--cached") // (-s lists the index's entries whatever else is asked)
	}
	for _, p := range DefaultExcludes {
		// Command-line excludes come before every ignore file: an allow-list
		// .gitignore ("*", "!*/") cannot bring node_modules/ back, and git
		// never walks into them.
		args = append(args, "--exclude="+p)
	}
	for _, dir := range h.private {
		if root == "" || strings.HasPrefix(dir, root+"/") {
			args = append(args, "--exclude=/"+escapeGlob(strings.TrimPrefix(strings.TrimPrefix(dir, root), "/"))+"/")
		}
	}
	if len(pathspecs) > 0 {
		args = append(append(args, "--"), pathspecs...)
	}
	var out []byte
	var warnings string
	var err error
	if root == "" && !h.inRepo {
		// No repository: the work tree's .gitignore files, read through the
		// store's git with an empty scratch index (nothing of the store's
		// past can leak in).
		g := s.git()
		g.IndexFile = s.scratchFile("list-index")
		os.Remove(g.IndexFile)
		out, warnings, err = g.RunWarn(ctx, withOption(args, "--exclude-per-directory=.gitignore")...)
	} else {
		out, warnings, err = gitexec.Project{Dir: filepath.Join(s.WorkTree, root)}.RunWarn(ctx, withOption(args, "--exclude-standard")...)
	}
	if ge, ok := err.(*gitexec.Error); ok && root != "" && strings.Contains(ge.Stderr, "dubious ownership") {
		// A nested repository another user owns: its own git will not read
		// it, so what it holds is unknown; left out, and named.
		h.unreadable = append(h.unreadable, Skipped{Path: root + "/", Why: "a repository git does not trust (another user owns it; see git's safe.directory)"})
		h.opaque = append(h.opaque, root)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	prefix := ""
	if root != "" {
		prefix = root + "/"
	}
	// A directory git could not read: whatever it holds is left out, and
	// said so.
	for _, line := range strings.Split(warnings, "\n") {
		if m := unreadableDir().FindStringSubmatch(line); m != nil {
			h.unreadable = append(h.unreadable, Skipped{Path: prefix + m[1], Why: "its directory cannot be read: " + strings.ToLower(m[2])})
		}
	}
	var entries []listed
	for _, rec := range splitNul(out) {
		// "? path", or "H <mode> <id> <stage>\t<path>" for a tracked one
		tag, rest, ok := strings.Cut(rec, " ")
		if !ok {
			continue
		}
		if tag == "?" {
			if strings.HasSuffix(rest, "/") {
				entries = append(entries, listed{path: prefix + strings.TrimSuffix(rest, "/"), repo: true})
			} else {
				entries = append(entries, listed{path: prefix + rest})
			}
			continue
		}
		meta, p, ok := strings.Cut(rest, "\t")
		if !ok {
			continue
		}
		if strings.HasPrefix(meta, "160000 ") {
			// A submodule: its files by its own rules, when it is checked out.
			if fi, err := os.Stat(filepath.Join(s.WorkTree, prefix+p, ".git")); err == nil && fi != nil {
				entries = append(entries, listed{path: prefix + p, repo: true, tracked: true})
			} else {
				// Not checked out (or deinitialized): git answers nothing
				// below it.
				h.opaque = append(h.opaque, prefix+p)
			}
			continue
		}
		entries = append(entries, listed{path: prefix + p, tracked: true})
	}
	if len(h.private) > 0 {
		kept := entries[:0]
		for _, e := range entries {
			if h.privateOf(e.path) == "" {
				kept = append(kept, e)
			}
		}
		entries = kept
	}
	return entries, nil
}

// withOption inserts an option before the pathspecs ("--") of args.
func withOption(args []string, opt string) []string {
	for i, a := range args {
		if a == "--" {
			return append(append(append([]string{}, args[:i]...), opt), args[i:]...)
		}
	}
	return append(args, opt)
}

// excludedByRewind reports whether the default excludes or .rewindignore
// exclude an untracked path.
func (h *held) excludedByRewind(p string, isDir bool) bool {
	return defaultExcludes.excluded(p, isDir) || h.ignore.excluded(p, isDir) || h.privateOf(p) != ""
}

// underOpaque reports whether p lies in a repository git answers nothing for.
func (h *held) underOpaque(p string) bool {
	for _, g := range h.opaque {
		if within(p, g) && p != g {
			return true
		}
	}
	return false
}

// privateOf is the private directory p lies in, or "".
func (h *held) privateOf(p string) string {
	for _, dir := range h.private {
		if within(p, dir) {
			return dir
		}
	}
	return ""
}

// repoOf is the root of the innermost repository holding p (a repository's
// own root is held by the one around it).
func (h *held) repoOf(p string) string {
	best := ""
	for _, r := range h.repos {
		if r != "" && within(p, r) && p != r && len(r) > len(best) {
			best = r
		}
	}
	return best
}

// ignoredNow reports which of paths (none of them held now; all files, or all
// directories) the rule ignores now: untracked and matched by an ignore source
// of their repository, a default exclude or .rewindignore. A restore never
// writes those. (git judges a path that exists by its type on disk, one that
// does not as a file; directories that are not there are asked as
// directories, in a repository.)
func (s *Store) ignoredNow(ctx context.Context, h *held, paths []string, isDir bool) (map[string]bool, error) {
	ignored := map[string]bool{}
	var ask, beyondLink, missingDirs []string
	for _, p := range paths {
		switch {
		case h.tracked[p]:
		case h.excludedByRewind(p, isDir) || hasGitComponent(p):
			ignored[p] = true
		case h.underOpaque(p):
			// In a submodule that is not checked out git answers nothing
			// ("is in submodule"): only the patterns above apply.
		case s.symlinkParent(p) && s.linkAbove(p):
			beyondLink = append(beyondLink, p)
		default:
			// Beyond a file git answers as for the directory it would be.
			ask = append(ask, p)
			if _, err := os.Lstat(filepath.Join(s.WorkTree, p)); isDir && os.IsNotExist(err) && !s.notADir(path.Dir(p)) {
				missingDirs = append(missingDirs, p)
			}
		}
	}
	if err := s.checkIgnore(ctx, h, ask, false, ignored); err != nil {
		return nil, err
	}
	// git judges a path that is not there as a file, which a pattern for
	// directories (a/b/) does not match; yet a restore that made the
	// directory could not be undone, for the rules of now ignore it. Such a
	// directory is asked again in the stand-in work tree, where it is one,
	// by the patterns alone (as the undo's empty directories are); outside
	// a repository, where the work tree's .gitignore files are the only
	// source, their patterns decide, with it taken for a directory. (One
	// where a file or symlink is now is not: the undo puts that back over
	// it.)
	var inRepo []string
	outside := &targetRules{gitignore: map[string]ignorePatterns{}, repos: h.repos}
	for _, d := range missingDirs {
		if h.inRepo || h.repoOf(d) != "" {
			inRepo = append(inRepo, d)
		} else if s.gitignoresAbove(outside, d, map[string]bool{}); outside.ignores(d, true) {
			ignored[d] = true
		}
	}
	if len(inRepo) > 0 {
		if err := s.standInIgnored(ctx, h, inRepo, true, ignored); err != nil {
			return nil, err
		}
	}
	if len(beyondLink) == 0 {
		return ignored, nil
	}
	// Beyond a symlink git answers nothing ("beyond a symbolic link"), yet a
	// restore that turns the link into a directory must not write there what
	// the rules now ignore: its undo could not take it away. Such a path is
	// ignored when a directory above it that exists is (asked without the
	// index, which would answer nothing for a directory holding tracked
	// files), or when git, asked in a stand-in work tree with no link in the
	// way (standInIgnored), ignores it; outside a repository, when the
	// .gitignore files of those directories match it.
	if h.inRepo || len(h.repos) > 1 {
		if err := s.standInIgnored(ctx, h, beyondLink, isDir, ignored); err != nil {
			return nil, err
		}
	}
	above := map[string]bool{}
	rules := &targetRules{gitignore: map[string]ignorePatterns{}, repos: h.repos}
	for _, p := range beyondLink {
		s.gitignoresAbove(rules, p, above)
	}
	dirIgnored := map[string]bool{}
	if err := s.checkIgnore(ctx, h, sortedKeys(above), true, dirIgnored); err != nil {
		return nil, err
	}
	for _, p := range beyondLink {
		ignored[p] = ignored[p] || rules.ignores(p, isDir)
		for d := path.Dir(p); d != "." && !ignored[p]; d = path.Dir(d) {
			ignored[p] = dirIgnored[d]
		}
	}
	return ignored, nil
}

// gitignoresAbove reads into rules the .gitignore files of the work tree's
// root and of every directory above p that is one now, and marks those
// directories in above.
func (s *Store) gitignoresAbove(rules *targetRules, p string, above map[string]bool) {
	for d := path.Dir(p); d != "."; d = path.Dir(d) {
		if !s.notADir(d) && !above[d] {
			above[d] = true
			rules.gitignore[d] = readIgnoreFile(filepath.Join(s.WorkTree, d, ".gitignore"))
		}
	}
	if _, ok := rules.gitignore[""]; !ok {
		rules.gitignore[""] = readIgnoreFile(filepath.Join(s.WorkTree, ".gitignore"))
	}
}

// standInIgnored marks in ignored which of paths (each beyond a symlink in
// the work tree) git ignores by its patterns, as if the link were a
// directory: in a scratch directory standing in for each one's repository's
// work tree (a .git file naming its git directory), holding copies of the
// .gitignore files of the real directories above the path, from the
// repository's top down, git judges the path by every source in its order
// (those files, info/exclude, core.excludesFile) with no link in the way.
func (s *Store) standInIgnored(ctx context.Context, h *held, paths []string, isDir bool, ignored map[string]bool) error {
	byRepo := map[string][]string{}
	for _, p := range paths {
		if r := h.repoOf(p); r != "" || h.inRepo {
			byRepo[r] = append(byRepo[r], p)
		}
	}
	for root, ps := range byRepo {
		dir := filepath.Join(s.WorkTree, root)
		out, err := gitexec.Project{Dir: dir}.Run(ctx, "rev-parse", "--absolute-git-dir", "--show-toplevel")
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err != nil || len(lines) != 2 {
			continue // a repository git will not read: its patterns do not apply
		}
		gitDir, top := lines[0], filepath.Clean(lines[1])
		// The path of the work tree's root (for root "") or of the nested
		// repository in its repository's top.
		base, err := filepath.Rel(top, dir)
		if err != nil || base == ".." || strings.HasPrefix(base, "../") {
			continue
		}
		standIn, err := os.MkdirTemp(s.Dir, "rewind-standin-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(standIn)
		if err := os.WriteFile(filepath.Join(standIn, ".git"), []byte("gitdir: "+gitDir+"\n"), 0o600); err != nil {
			return err
		}
		prefix := ""
		if root != "" {
			prefix = root + "/"
		}
		var in bytes.Buffer
		copied := map[string]bool{}
		for _, p := range ps {
			rel := path.Join(filepath.ToSlash(base), strings.TrimPrefix(p, prefix)) // from the top
			// Every directory from the top down to the last real one above p.
			for d := "."; ; {
				real := filepath.Join(top, d)
				if fi, err := os.Lstat(real); err != nil || !fi.IsDir() {
					break
				}
				if !copied[d] {
					copied[d] = true
					if err := copyIgnoreFile(filepath.Join(real, ".gitignore"), filepath.Join(standIn, d)); err != nil {
						return err
					}
				}
				next, _, found := strings.Cut(strings.TrimPrefix(rel, strings.TrimPrefix(d+"/", "./")), "/")
				if !found {
					break
				}
				d = path.Join(d, next)
			}
			if isDir {
				// git judges a path that exists by its type
				if err := os.MkdirAll(filepath.Join(standIn, rel), 0o700); err != nil {
					return err
				}
			}
			in.WriteString("./" + rel)
			in.WriteByte(0)
		}
		out, err = gitexec.Project{Dir: standIn}.RunInput(ctx, &in, "check-ignore", "--no-index", "-z", "--stdin")
		if err != nil && !exitedWith(err, 1) { // 1: none of them is ignored
			return err
		}
		for _, q := range splitNul(out) {
			q = strings.TrimPrefix(q, "./")
			if base != "." {
				q = strings.TrimPrefix(q, filepath.ToSlash(base)+"/")
			}
			ignored[prefix+q] = true
		}
	}
	return nil
}

// copyIgnoreFile copies a .gitignore (see ignoreFileData) into the
// directory to, making it; none when there is none.
func copyIgnoreFile(name, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	data := ignoreFileData(name)
	if data == nil {
		return nil
	}
	return os.WriteFile(filepath.Join(to, ".gitignore"), data, 0o600)
}

// checkIgnore asks git which of paths its ignore rules match, each in the
// innermost repository holding it, and marks those in ignored. Without the
// index (noIndex), a tracked file or a directory holding one is judged by the
// patterns alone.
func (s *Store) checkIgnore(ctx context.Context, h *held, paths []string, noIndex bool, ignored map[string]bool) error {
	byRepo := map[string][]string{}
	for _, p := range paths {
		r := h.repoOf(p)
		byRepo[r] = append(byRepo[r], p)
	}
	for root, ps := range byRepo {
		prefix := ""
		if root != "" {
			prefix = root + "/"
		}
		// "./" keeps a name that starts with ':' from being read as
		// pathspec magic, which check-ignore refuses.
		var in bytes.Buffer
		for _, p := range ps {
			in.WriteString("./" + strings.TrimPrefix(p, prefix))
			in.WriteByte(0)
		}
		args := []string{"check-ignore", "-z", "--stdin"}
		var out []byte
		var err error
		switch {
		case root == "" && !h.inRepo:
			g := s.git()
			g.IndexFile = s.scratchFile("list-index")
			os.Remove(g.IndexFile)
			out, err = g.RunInput(ctx, &in, append(args, "--no-index")...)
		case noIndex:
			out, err = gitexec.Project{Dir: filepath.Join(s.WorkTree, root)}.RunInput(ctx, &in, append(args, "--no-index")...)
		default:
			out, err = gitexec.Project{Dir: filepath.Join(s.WorkTree, root)}.RunInput(ctx, &in, args...)
		}
		if err != nil && !exitedWith(err, 1) { // 1: none of them is ignored
			return err
		}
		for _, p := range splitNul(out) {
			ignored[prefix+strings.TrimPrefix(p, "./")] = true
		}
	}
	return nil
}

// linkAbove reports whether a directory above p is a symlink (the first one
// that is not a directory).
func (s *Store) linkAbove(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] != '/' {
			continue
		}
		fi, err := os.Lstat(filepath.Join(s.WorkTree, p[:i]))
		if err != nil || !fi.IsDir() {
			return err == nil && fi.Mode()&os.ModeSymlink != 0
		}
	}
	return false
}

// readIgnoreFile reads the patterns of a .gitignore in the work tree (see
// ignoreFileData); none when there is none.
func readIgnoreFile(name string) ignorePatterns {
	data := ignoreFileData(name)
	if data == nil {
		return nil
	}
	return parseIgnore(data)
}

// ignoreFileData is the content of a .gitignore: a regular file only, as git
// reads them; nil when there is none or it cannot be read.
func ignoreFileData(name string) []byte {
	fi, err := os.Lstat(name)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil
	}
	return data
}

func exitedWith(err error, code int) bool {
	ge, ok := err.(*gitexec.Error)
	return ok && ge.ExitCode == code
}

// readRewindIgnore reads the work tree's .rewindignore: a regular file only
// (never through a symlink, never a fifo or device), up to rewindIgnoreMax.
func (s *Store) readRewindIgnore() (ignorePatterns, []string, []byte) {
	full := filepath.Join(s.WorkTree, ".rewindignore")
	fi, err := os.Lstat(full)
	switch {
	case err != nil:
		return nil, nil, nil
	case !fi.Mode().IsRegular():
		return nil, []string{fmt.Sprintf(".rewindignore is not a regular file (%s); it is not read", fi.Mode().Type())}, nil
	case fi.Size() > rewindIgnoreMax:
		return nil, []string{fmt.Sprintf(".rewindignore is over %d bytes; it is not read", rewindIgnoreMax)}, nil
	}
	f, err := os.OpenFile(full, os.O_RDONLY|syscallNoFollow, 0)
	if err != nil {
		return nil, []string{fmt.Sprintf(".rewindignore cannot be read: %v", err)}, nil
	}
	defer f.Close()
	data := make([]byte, rewindIgnoreMax+1)
	n, _ := readFull(f, data)
	if n > rewindIgnoreMax {
		return nil, []string{fmt.Sprintf(".rewindignore is over %d bytes; it is not read", rewindIgnoreMax)}, nil
	}
	return parseIgnore(data[:n]), nil, data[:n]
}

// insideWorkTree returns dir relative to the work tree when it lies inside it.
func (s *Store) insideWorkTree(dir string) (string, bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", false
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		abs = r
	} else if r, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(r, filepath.Base(abs))
	}
	rel, err := filepath.Rel(s.WorkTree, abs)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

// within reports whether p is dir or lies below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// escapeGlob makes a path a literal gitignore pattern.
func escapeGlob(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		if isGlobSpecial(p[i]) || p[i] == '!' || p[i] == '#' || p[i] == ' ' {
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// targetRules are the ignore rules a checkpoint had: its own .gitignore files
// and .rewindignore, read from its tree, with the repositories of now; and
// the work tree's repository's sources that a restore does not change, which
// count with them once it is done.
type targetRules struct {
	gitignore map[string]ignorePatterns // directory ("" for the root) -> its .gitignore
	rewind    ignorePatterns
	repos     []string
	outer     []outerRules            // in git's order after the work tree's .gitignore files
	nested    map[string][]outerRules // a nested repository's root -> its own outer rules
}

// outerRules are the patterns of an ignore source of the work tree's
// repository outside the work tree: a .gitignore above it, info/exclude,
// core.excludesFile; or of a nested repository's sources no checkpoint
// holds: its info/exclude and core.excludesFile.
type outerRules struct {
	prefix string // the work tree's path from the patterns' directory: "" or ending in '/'
	ps     ignorePatterns
	file   string // the file read (info/exclude, core.excludesFile); "" for a .gitignore
}

// outerRulesOf reads the ignore sources of the work tree's repository that
// lie outside the work tree, in git's order (the one matching first
// decides): the .gitignore files above the work tree up to the repository's
// top, nearest first, then info/exclude, then core.excludesFile (or its XDG
// default; not when rewind cannot resolve its path as git would). None when
// git does not say where they are.
//
// The capture that held the work tree (h) asked the same of git, and its
// answers are taken when it has them all.
func (s *Store) outerRulesOf(ctx context.Context, h *held) []outerRules {
	var lines []string
	var config []byte
	if len(h.where) == 4 && h.configRead {
		lines, config = h.where[2:], h.config
	} else {
		var ok bool
		if lines, config, ok = askExcludes(ctx, s.WorkTree); !ok {
			return nil
		}
	}
	if len(lines) != 2 {
		return nil
	}
	top := filepath.Clean(lines[1])
	if !within(filepath.ToSlash(s.WorkTree), filepath.ToSlash(top)) {
		return nil // (a path spelled otherwise: nothing to walk up)
	}
	prefixFrom := func(dir string) string {
		rel, _ := filepath.Rel(dir, s.WorkTree)
		if rel == "." {
			return ""
		}
		return filepath.ToSlash(rel) + "/"
	}
	var outer []outerRules
	for dir := s.WorkTree; dir != top; {
		dir = filepath.Dir(dir)
		outer = append(outer, outerRules{prefixFrom(dir), readIgnoreFile(filepath.Join(dir, ".gitignore")), ""})
	}
	return append(outer, repoExcludes(s.WorkTree, top, lines[0], config, prefixFrom(top))...)
}

// repoExcludes reads a repository's info/exclude (exclude, as rev-parse
// --git-path gave it in dir) and its core.excludesFile (config's, or the
// XDG default), for paths from its top with prefix.
func repoExcludes(dir, top, exclude string, config []byte, prefix string) []outerRules {
	if !filepath.IsAbs(exclude) {
		exclude = filepath.Join(dir, exclude)
	}
	names := []string{exclude}
	if excludes, ok := excludesFile(config); ok && excludes != "" {
		if !filepath.IsAbs(excludes) {
			excludes = filepath.Join(top, excludes) // git reads it from the top
		}
		names = append(names, excludes)
	}
	var outer []outerRules
	for _, name := range names {
		// git follows a symlink here, unlike for a .gitignore. One that is
		// not there counts for nothing, yet is named: in the work tree, a
		// restore may write it (excludesAsRestored).
		data, _ := os.ReadFile(name)
		outer = append(outer, outerRules{prefix, parseIgnore(data), name})
	}
	return outer
}

// excludesAsRestored takes the info/exclude or core.excludesFile of rules
// that is a file of the work tree (a relative core.excludesFile, read from
// the repository's top) as the restore to target leaves it, not as it is
// now: the restore writes or deletes it like any other file, and what it
// leaves as ignored must be ignored after it. So: the checkpoint's file; none
// when the checkpoint has none and the state now (cur) holds one, which the
// restore deletes. A --file restore not asked for it leaves it as it is, and
// so does one of a file no checkpoint holds.
func (s *Store) excludesAsRestored(ctx context.Context, target *Checkpoint, cur *capture, files []string, rules *targetRules) error {
	roots := []string{s.WorkTree}
	if real, err := filepath.EvalSymlinks(s.WorkTree); err == nil && real != s.WorkTree {
		roots = append(roots, real)
	}
	relOf := func(file string) (string, bool) {
		for _, root := range roots {
			if rel, err := filepath.Rel(root, file); err == nil && filepath.IsLocal(rel) {
				return filepath.ToSlash(rel), true
			}
		}
		return "", false
	}
	adjust := func(sources []outerRules) error {
		for i := range sources {
			// (info/exclude, in a .git of the work tree, is no file a
			// checkpoint holds: no lookup for it)
			rel, ok := relOf(sources[i].file)
			if !ok || hasGitComponent(rel) || !underAny(rel, files) {
				continue
			}
			entries, err := s.treeEntries(ctx, target.Tree, []string{rel})
			if err != nil {
				return err
			}
			switch e, held := entries[rel]; {
			case held && strings.HasPrefix(e, "100"):
				blobs, err := s.readBlobs(ctx, []string{entryID(e)})
				if err != nil {
					return err
				}
				sources[i].ps = parseIgnore(blobs[0])
			case !held && cur.inTree.has(rel):
				sources[i].ps = nil
			}
		}
		return nil
	}
	if err := adjust(rules.outer); err != nil {
		return err
	}
	for _, sources := range rules.nested {
		if err := adjust(sources); err != nil {
			return err
		}
	}
	return nil
}

// askExcludes asks git in dir, side by side, where its info/exclude is and
// its top (rev-parse's lines), and its config (for core.excludesFile); false
// when either fails.
func askExcludes(ctx context.Context, dir string) (lines []string, config []byte, ok bool) {
	project := gitexec.Project{Dir: dir}
	var where []byte
	var whereErr, configErr error
	parallel(
		func() error {
			where, whereErr = project.Run(ctx, "rev-parse", "--git-path", "info/exclude", "--show-toplevel")
			return nil
		},
		func() error {
			config, configErr = project.Run(ctx, "config", "-z", "--list")
			return nil
		})
	return strings.Split(strings.TrimSpace(string(where)), "\n"), config, whereErr == nil && configErr == nil
}

// nestedOuterRules reads the ignore sources of the nested repository at root
// that no checkpoint holds (its info/exclude and core.excludesFile), as its
// git reads them. None when git does not answer for it as a repository whose
// top is root.
func (s *Store) nestedOuterRules(ctx context.Context, root string) []outerRules {
	dir := filepath.Join(s.WorkTree, root)
	lines, config, ok := askExcludes(ctx, dir)
	if !ok || len(lines) != 2 {
		return nil
	}
	if a, err := os.Stat(dir); err != nil {
		return nil
	} else if b, err := os.Stat(lines[1]); err != nil || !os.SameFile(a, b) {
		return nil
	}
	return repoExcludes(dir, lines[1], lines[0], config, "")
}

// rulesOf reads the ignore files a checkpoint's tree holds, with the
// repositories it recorded (those of now for a checkpoint that recorded none).
// entries, when given, holds at least every ignore file of the tree (a
// restore looks them up by path), and spares listing the whole tree.
func (s *Store) rulesOf(ctx context.Context, c *Checkpoint, h *held, entries map[string]string) (*targetRules, error) {
	r := &targetRules{gitignore: map[string]ignorePatterns{}, repos: h.repos}
	if c.meta != nil {
		r.repos = c.meta.repos
	}
	if h.inRepo {
		r.outer = s.outerRulesOf(ctx, h)
	}
	for _, root := range r.repos {
		if root != "" && slices.Contains(h.repos, root) {
			if r.nested == nil {
				r.nested = map[string][]outerRules{}
			}
			r.nested[root] = s.nestedOuterRules(ctx, root)
		}
	}
	if entries == nil {
		all, err := s.treeEntries(ctx, c.Tree, nil)
		if err != nil {
			return nil, err
		}
		entries = all
	}
	var ids, names []string
	for p, e := range entries {
		if (path.Base(p) == ".gitignore" || p == ".rewindignore") && strings.HasPrefix(e, "100") {
			ids = append(ids, entryID(e))
			names = append(names, p)
		}
	}
	if len(ids) == 0 {
		return r, nil
	}
	blobs, err := s.readBlobs(ctx, ids)
	if err != nil {
		return nil, err
	}
	for i, p := range names {
		if p == ".rewindignore" {
			if len(blobs[i]) <= rewindIgnoreMax {
				r.rewind = parseIgnore(blobs[i])
			}
			continue
		}
		dir := path.Dir(p)
		if dir == "." {
			dir = ""
		}
		r.gitignore[dir] = parseIgnore(blobs[i])
	}
	return r, nil
}

// ignores reports whether the checkpoint's rules ignore p: its default
// excludes, its .rewindignore, or the .gitignore files of p's repository,
// matched level by level as git does (a deeper file wins; below an excluded
// directory everything is excluded), then, in the work tree's own
// repository, the sources outside the work tree.
func (r *targetRules) ignores(p string, isDir bool) bool {
	return r.judge(p, isDir, true)
}

// ownIgnores is ignores by the checkpoint's own rules alone: whether p is
// ignored whatever the sources outside the work tree say.
func (r *targetRules) ownIgnores(p string, isDir bool) bool {
	return r.judge(p, isDir, false)
}

// repoOf is the root of the innermost nested repository the checkpoint
// recorded that holds p, "" for the work tree's own.
func (r *targetRules) repoOf(p string) string {
	root := ""
	for _, repo := range r.repos {
		if repo != "" && within(p, repo) && p != repo && len(repo) > len(root) {
			root = repo
		}
	}
	return root
}

func (r *targetRules) judge(p string, isDir, outer bool) bool {
	if defaultExcludes.excluded(p, isDir) || r.rewind.excluded(p, isDir) {
		return true
	}
	root := r.repoOf(p)
	type level struct {
		base string
		ps   ignorePatterns
	}
	rel := p
	if root != "" {
		rel = strings.TrimPrefix(p, root+"/")
	}
	join := func(d string) string {
		if root == "" {
			return d
		}
		if d == "" {
			return root
		}
		return root + "/" + d
	}
	stack := []level{{"", r.gitignore[join("")]}}
	decide := func(q string, isDir bool) (excluded, matched bool) {
		for i := len(stack) - 1; i >= 0; i-- {
			l := stack[i]
			sub := q
			if l.base != "" {
				sub = strings.TrimPrefix(q, l.base+"/")
			}
			if ex, ok := l.ps.lastMatch(sub, isDir); ok {
				return ex, true
			}
		}
		if outer {
			sources := r.outer
			if root != "" {
				sources = r.nested[root]
			}
			for _, o := range sources {
				if ex, ok := o.ps.lastMatch(o.prefix+q, isDir); ok {
					return ex, true
				}
			}
		}
		return false, false
	}
	for i := 0; i < len(rel); i++ {
		if rel[i] != '/' {
			continue
		}
		d := rel[:i]
		if ex, _ := decide(d, true); ex {
			return true
		}
		stack = append(stack, level{d, r.gitignore[join(d)]})
	}
	ex, _ := decide(rel, isDir)
	return ex
}

// sortedKeys returns a set's members in order.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// plainRevParse is what hold's rev-parse prints for a work tree at the top
// of a plain repository (plainRepo), read from the files: its index and
// info/exclude in its .git, its top, and HEAD's commit and the ref it names
// (a file of its own, else a line of packed-refs; "HEAD" when detached).
// Without a commit yet, the HEAD lines are left out, as git's second
// rev-parse leaves them. ok is false when git must be asked: a repository
// git might not trust (another owner than this process's: safe.directory),
// a reftable, a ref naming another ref.
func plainRevParse(dir string) (out []byte, ok bool) {
	if real, err := filepath.EvalSymlinks(dir); err != nil || real != dir || !plainRepo(dir) || os.Getenv("SUDO_UID") != "" {
		return nil, false // (git prints the top with symlinks resolved)
	}
	dot := filepath.Join(dir, ".git")
	for _, p := range []string{dir, dot} {
		if !ownedByMe(p) {
			return nil, false
		}
	}
	if exists(filepath.Join(dot, "reftable")) {
		return nil, false
	}
	data, err := os.ReadFile(filepath.Join(dot, "HEAD"))
	if err != nil {
		return nil, false
	}
	b := []byte("true\n.git/index\n.git/info/exclude\n" + dir + "\n")
	head := strings.TrimSuffix(string(data), "\n")
	if objectID(head) {
		return append(b, head+"\nHEAD\n"...), true
	}
	ref, symbolic := strings.CutPrefix(head, "ref: ")
	if !symbolic || !strings.HasPrefix(ref, "refs/") || strings.ContainsAny(ref, " \t\r\n\\") {
		return nil, false
	}
	id, found, ok := readRef(dot, ref)
	switch {
	case !ok:
		return nil, false
	case !found:
		return b, true // no commit yet
	}
	return append(b, id+"\n"+ref+"\n"...), true
}

// ownedByMe reports whether this process's user owns path (as git checks a
// repository before it reads it).
func ownedByMe(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
