package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// This file is the pipeline's lifecycle markers in its scratch directory:
// .pipeline-active (JSON: which pipeline runs, where its dispatch directory is,
// the branch and HEAD it started from) and .dispatch-active-<id>. Every write is
// atomic (temporary file, fsync, rename, fsync of the directory).

// ActiveMarker is the pipeline marker's name in the scratch directory.
const ActiveMarker = ".pipeline-active"

// DispatchActivePrefix starts the name of the per-session dispatch marker.
const DispatchActivePrefix = ".dispatch-active-"

// DispatchCrashedPrefix starts the name a crashed pipeline's dispatch marker is
// archived under by `start --force`: out of the .dispatch-active-* glob.
const DispatchCrashedPrefix = ".dispatch-crashed-"

// ErrNoMarker means the scratch directory has no .pipeline-active.
var ErrNoMarker = errors.New("no active pipeline")

// Marker is the content of .pipeline-active.
type Marker struct {
	PipelineID  string
	Skill       string
	Phase       string
	StartTime   string
	ScratchDir  string
	DispatchDir string
	Branch      *string // nil: unknown (not a git repository)
	BaselineSHA *string
	// PID is the process whose life is the pipeline's (the shell that ran
	// `pipeline start`, or the one --pid names), Host the host it runs on;
	// 0 and "" when not recorded (crucible's own markers record neither).
	PID   int64
	Host  string
	extra []kv // keys rewind does not know, kept in order
}

type kv struct {
	key string
	val []byte // encoded
}

// MarkerError is a .pipeline-active that cannot be read.
type MarkerError struct {
	Path string
	Why  string
}

func (e *MarkerError) Error() string { return fmt.Sprintf("%s: %s", e.Path, e.Why) }

// ReadMarker reads <scratch>/.pipeline-active; ErrNoMarker when there is none.
func ReadMarker(scratch string) (*Marker, error) {
	path := filepath.Join(scratch, ActiveMarker)
	data, err := os.ReadFile(path)
	if notExist(err) {
		return nil, fmt.Errorf("%s: %w", scratch, ErrNoMarker)
	}
	if err != nil {
		return nil, err
	}
	return ParseMarker(path, data)
}

// ParseMarker parses the JSON of a .pipeline-active (compact or indented).
func ParseMarker(path string, data []byte) (*Marker, error) {
	if !gjson.ValidBytes(data) {
		return nil, &MarkerError{Path: path, Why: "not valid JSON"}
	}
	v := gjson.ParseBytes(data)
	if !v.IsObject() {
		return nil, &MarkerError{Path: path, Why: "not a JSON object"}
	}
	m := &Marker{}
	str := func(r gjson.Result) string {
		if r.Type == gjson.String {
			return r.Str
		}
		if r.Type == gjson.Number {
			return r.Raw // a numeric pipeline id
		}
		return ""
	}
	ptr := func(r gjson.Result) *string {
		if r.Type != gjson.String {
			return nil
		}
		s := r.Str
		return &s
	}
	v.ForEach(func(k, val gjson.Result) bool {
		switch k.Str {
		case "pipeline_id":
			m.PipelineID = str(val)
		case "skill":
			m.Skill = str(val)
		case "phase":
			m.Phase = str(val)
		case "start_time":
			m.StartTime = str(val)
		case "scratch_dir":
			m.ScratchDir = str(val)
		case "dispatch_dir":
			m.DispatchDir = str(val)
		case "branch":
			m.Branch = ptr(val)
		case "baseline_sha":
			m.BaselineSHA = ptr(val)
		case "pid":
			if val.Type == gjson.Number && val.Int() > 0 && val.Raw == strconv.FormatInt(val.Int(), 10) {
				m.PID = val.Int()
			} else {
				m.extra = append(m.extra, kv{k.Str, AppendValue(nil, val)})
			}
		case "host":
			if val.Type == gjson.String {
				m.Host = val.Str
			} else {
				m.extra = append(m.extra, kv{k.Str, AppendValue(nil, val)})
			}
		default:
			m.extra = append(m.extra, kv{k.Str, AppendValue(nil, val)})
		}
		return true
	})
	return m, nil
}

// Encode is the marker as one compact JSON line, keys in crucible's order.
func (m *Marker) Encode() []byte {
	r := &Record{}
	r.Set("pipeline_id", Str(m.PipelineID))
	r.Set("skill", Str(m.Skill))
	r.Set("phase", Str(m.Phase))
	r.Set("start_time", Str(m.StartTime))
	r.Set("scratch_dir", Str(m.ScratchDir))
	r.Set("dispatch_dir", Str(m.DispatchDir))
	r.Set("branch", StrPtr(m.Branch))
	r.Set("baseline_sha", StrPtr(m.BaselineSHA))
	if m.PID > 0 {
		r.Set("pid", []byte(strconv.FormatInt(m.PID, 10)))
	}
	if m.Host != "" {
		r.Set("host", Str(m.Host))
	}
	for _, e := range m.extra {
		r.Set(e.key, e.val)
	}
	return append(r.Bytes(), '\n')
}

// Liveness is what can be told of a marker's pipeline process.
type Liveness int

const (
	// LivenessUnknown: the marker records no process, or one on another host.
	LivenessUnknown Liveness = iota
	// Running: the recorded process is alive on this host.
	Running
	// Gone: the recorded process on this host has exited: the pipeline
	// crashed or was killed without finishing.
	Gone
)

// Liveness says whether the pipeline's recorded process still runs; host is
// this host's name.
func (m *Marker) Liveness(host string) Liveness {
	if m.PID <= 0 || m.Host == "" || m.Host != host {
		return LivenessUnknown
	}
	if processAlive(m.PID) {
		return Running
	}
	return Gone
}

func liveness(m *Marker, host string) Liveness {
	if m == nil {
		return LivenessUnknown
	}
	return m.Liveness(host)
}

// WriteMarker writes <scratch>/.pipeline-active atomically.
func WriteMarker(scratch string, m *Marker) error {
	return WriteFileAtomic(filepath.Join(scratch, ActiveMarker), m.Encode(), 0o644)
}

// DispatchActivePath is <scratch>/.dispatch-active-<id>.
func DispatchActivePath(scratch, id string) string {
	return filepath.Join(scratch, DispatchActivePrefix+id)
}

// WriteDispatchActive writes .dispatch-active-<id>: the dispatch directory and
// the current seq counter, one per line, as crucible's convention has them.
func WriteDispatchActive(scratch, id, dispatchDir string, seq int64) error {
	data := fmt.Sprintf("dispatch-dir: %s\nseq: %d\n", dispatchDir, seq)
	return WriteFileAtomic(DispatchActivePath(scratch, id), []byte(data), 0o644)
}

var sessionRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`) })

// ValidSession reports whether id can name a dispatch directory.
func ValidSession(id string) bool { return sessionRE().MatchString(id) }

// StartOptions are the inputs of Start.
type StartOptions struct {
	Skill   string
	Scratch string // absolute
	Session string // "" means a fresh one: the Unix time of Now, made unique
	Phase   string
	TmpDir  string // where dispatch directories go (/tmp, or REWIND_TMPDIR)
	Now     time.Time
	Branch  *string // read from the project by the caller
	SHA     *string
	Force   bool   // archive another session's marker instead of refusing
	PID     int64  // the pipeline's process (0: none recorded)
	Host    string // this host's name
}

// StartResult says what Start did.
type StartResult struct {
	Marker   *Marker
	Resumed  bool   // the marker was this session's already (compaction recovery)
	Archived string // where another session's marker was moved (Force)
	// ArchivedDispatch lists where the crashed pipeline's .dispatch-active-<id>
	// markers were moved (Force), so that nothing globbing
	// .dispatch-active-* takes them for a live pipeline.
	ArchivedDispatch []string
	Previous         *Marker
}

// CrashedError is another session's marker found by Start: that pipeline
// crashed (or still runs elsewhere).
type CrashedError struct {
	Scratch  string
	Marker   *Marker // nil when the marker is unreadable
	Unusable error   // why it is unreadable
	// Live is what the marker's process tells: Running (alive on this host:
	// the pipeline has not crashed, it still runs), Gone (it exited), or
	// unknown.
	Live Liveness
}

func (e *CrashedError) Error() string {
	if e.Marker == nil {
		return fmt.Sprintf("%s holds an unreadable %s (%v)", e.Scratch, ActiveMarker, e.Unusable)
	}
	m := e.Marker
	if e.Live == Running {
		return fmt.Sprintf("%s pipeline %s (started %s on branch %s) is still running: its process %d on this host is alive",
			orNone(m.Skill), m.PipelineID, orNone(m.StartTime), ptrOrUnknown(m.Branch), m.PID)
	}
	phase := m.Phase
	if phase == "" {
		phase = "(none)"
	}
	branch := "(unknown)"
	if m.Branch != nil {
		branch = *m.Branch
	}
	gone := ""
	if e.Live == Gone {
		gone = fmt.Sprintf(" (its process %d on this host has exited)", m.PID)
	}
	return fmt.Sprintf("previous %s pipeline %s (started %s on branch %s) crashed at phase %s%s",
		orNone(m.Skill), m.PipelineID, orNone(m.StartTime), branch, phase, gone)
}

func ptrOrUnknown(p *string) string {
	if p == nil {
		return "(unknown)"
	}
	return *p
}

func orNone(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}

// DispatchDirFor is the dispatch directory of a session: <tmp>/crucible-dispatch-<id>/.
func DispatchDirFor(tmp, id string) string {
	return filepath.Join(tmp, "crucible-dispatch-"+id) + "/"
}

// Start begins a pipeline: it creates the dispatch directory, writes
// .pipeline-active and .dispatch-active-<id>. A marker of the session the
// caller names is compaction recovery (kept as it is); another session's
// marker is a crash: refused with a *CrashedError, or with Force archived
// first. The dispatch directory is always a new one, made by Start itself
// (see createDispatchDir): a named session that is taken is refused with a
// *SessionTakenError, an automatic one takes the next free name.
func Start(o StartOptions) (*StartResult, error) {
	named := o.Session != ""
	if err := os.MkdirAll(o.Scratch, 0o700); err != nil {
		return nil, err
	}
	res := &StartResult{}
	old, err := ReadMarker(o.Scratch)
	hasMarker := !errors.Is(err, ErrNoMarker)
	switch {
	case !hasMarker:
	case err == nil && named && old.PipelineID == o.Session:
		res.Marker, res.Resumed = old, true
		return res, nil
	case !o.Force:
		var merr *MarkerError
		if err != nil && !errors.As(err, &merr) {
			return nil, err
		}
		return nil, &CrashedError{Scratch: o.Scratch, Marker: old, Unusable: err,
			Live: liveness(old, o.Host)}
	}
	session, dir, err := createDispatchDir(o.TmpDir, o.Scratch, o.Session, o.Now)
	if err != nil {
		return nil, err
	}
	o.Session = session
	if hasMarker {
		if err := archiveCrashed(o, old, res); err != nil {
			os.Remove(dir) // still empty: nothing refers to it yet
			return nil, err
		}
	}
	m := &Marker{
		PipelineID:  o.Session,
		Skill:       o.Skill,
		Phase:       o.Phase,
		StartTime:   o.Now.UTC().Format(time.RFC3339),
		ScratchDir:  o.Scratch,
		DispatchDir: dir,
		Branch:      o.Branch,
		BaselineSHA: o.SHA,
		PID:         o.PID,
		Host:        o.Host,
	}
	// The dispatch marker first: a crash between the two leaves no
	// .pipeline-active pointing at nothing.
	if err := WriteDispatchActive(o.Scratch, o.Session, dir, 0); err != nil {
		return nil, err
	}
	if err := WriteMarker(o.Scratch, m); err != nil {
		return nil, err
	}
	res.Marker = m
	return res, nil
}

// archiveCrashed moves another session's marker to .pipeline-crashed-<id> and
// its .dispatch-active-<id> markers to .dispatch-crashed-<id> (start --force).
func archiveCrashed(o StartOptions, old *Marker, res *StartResult) error {
	name := "unreadable-" + strconv.FormatInt(o.Now.Unix(), 10)
	if old != nil && ValidSession(old.PipelineID) {
		name = old.PipelineID
	}
	res.Archived = filepath.Join(o.Scratch, ".pipeline-crashed-"+name)
	if err := os.Rename(filepath.Join(o.Scratch, ActiveMarker), res.Archived); err != nil {
		return err
	}
	stale, err := staleDispatchMarkers(o.Scratch, old, o.Session)
	if err != nil {
		return err
	}
	for _, p := range stale {
		id := filepath.Base(p)[len(DispatchActivePrefix):]
		dst := filepath.Join(o.Scratch, DispatchCrashedPrefix+id)
		if err := os.Rename(p, dst); err != nil {
			return err
		}
		res.ArchivedDispatch = append(res.ArchivedDispatch, dst)
	}
	res.Previous = old
	return syncDir(o.Scratch)
}

// SessionTakenError is a named session that is in use: its dispatch
// directory exists already (another pipeline's, or one made by someone else to
// catch this one's dispatches), or the scratch directory holds the durable
// copy of a finished pipeline of that session, which readers would take for
// the new pipeline's manifest.
type SessionTakenError struct {
	Session string
	Dir     string // the directory that exists
	Symlink bool   // Dir is a symlink
	Copy    bool   // Dir is a finished pipeline's durable copy in the scratch directory
}

func (e *SessionTakenError) Error() string {
	switch {
	case e.Copy:
		return fmt.Sprintf("session %s is taken: a finished pipeline's copy %s exists", e.Session, e.Dir)
	case e.Symlink:
		return fmt.Sprintf("session %s is taken: its dispatch directory %s already exists (as a symlink)", e.Session, e.Dir)
	}
	return fmt.Sprintf("session %s is taken: its dispatch directory %s already exists", e.Session, e.Dir)
}

// maxAutoSessions bounds the search for a free automatic session id.
const maxAutoSessions = 1000

// createDispatchDir makes the dispatch directory of a pipeline itself, with
// mode 0700, and returns its session id and path. /tmp is shared with every
// user of the machine and the name is predictable, so it never takes a
// directory that exists (mkdir fails on any existing name, a symlink
// included, so nothing is ever created through one). Nor a session whose
// durable copy <scratch>/crucible-dispatch-<id> exists: the copy would be
// read as the new pipeline's manifest, and its finish would merge into it. A
// named session that is taken is refused; an automatic session is the Unix
// time of now, or, when that is taken (two pipelines started in the same
// second), the first of <time>-2, <time>-3, ... that is not.
func createDispatchDir(tmp, scratch, session string, now time.Time) (string, string, error) {
	if err := os.MkdirAll(tmp, 0o777); err != nil {
		return "", "", err
	}
	try := func(id string) (string, error) {
		dir := DispatchDirFor(tmp, id)
		path := strings.TrimSuffix(dir, "/")
		copyDir := filepath.Join(scratch, filepath.Base(path))
		if _, err := os.Lstat(copyDir); err == nil {
			return "", &SessionTakenError{Session: id, Dir: copyDir, Copy: true}
		}
		if err := os.Mkdir(path, 0o700); err != nil {
			if errors.Is(err, fs.ErrExist) {
				fi, _ := os.Lstat(path)
				return "", &SessionTakenError{Session: id, Dir: dir, Symlink: fi != nil && fi.Mode()&fs.ModeSymlink != 0}
			}
			return "", err
		}
		// The umask may have taken bits away; the mode is exactly 0700.
		if err := os.Chmod(path, 0o700); err != nil {
			return "", err
		}
		return dir, syncDir(tmp)
	}
	if session != "" {
		dir, err := try(session)
		return session, dir, err
	}
	base := strconv.FormatInt(now.Unix(), 10)
	var taken *SessionTakenError
	for n := 1; n <= maxAutoSessions; n++ {
		id := base
		if n > 1 {
			id = base + "-" + strconv.Itoa(n)
		}
		dir, err := try(id)
		if errors.As(err, &taken) {
			continue
		}
		return id, dir, err
	}
	return "", "", fmt.Errorf("no free dispatch directory in %s: %s and %d more names after it are taken", tmp, DispatchDirFor(tmp, base), maxAutoSessions-1)
}

// staleDispatchMarkers lists the .dispatch-active-<id> markers of the crashed
// pipeline old: its own, or, when its marker is unreadable (no id), every one
// but session's. One pipeline runs per scratch directory, so none of them is
// live.
func staleDispatchMarkers(scratch string, old *Marker, session string) ([]string, error) {
	if old != nil && ValidSession(old.PipelineID) {
		if old.PipelineID == session {
			return nil, nil
		}
		p := DispatchActivePath(scratch, old.PipelineID)
		if _, err := os.Lstat(p); err != nil {
			if notExist(err) {
				return nil, nil
			}
			return nil, err
		}
		return []string{p}, nil
	}
	all, err := filepath.Glob(filepath.Join(scratch, DispatchActivePrefix+"*"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range all {
		if p != DispatchActivePath(scratch, session) {
			out = append(out, p)
		}
	}
	return out, nil
}

// SetPhase records phase in the marker, atomically.
func SetPhase(scratch, phase string) (*Marker, error) {
	m, err := ReadMarker(scratch)
	if err != nil {
		return nil, err
	}
	m.Phase = phase
	if err := WriteMarker(scratch, m); err != nil {
		return nil, err
	}
	return m, nil
}

// FinishResult says what Finish did.
type FinishResult struct {
	Marker  *Marker
	Message string // the cleanup's message
	// DirGone: failed, and the dispatch directory was gone: nothing was
	// copied, only the markers were removed.
	DirGone bool
	// NoLedger: the run never had a receipt ledger (crucible's skills append
	// one; nothing in rewind writes it): the success cleanup copied the
	// manifest alone.
	NoLedger bool
}

// Finish ends the pipeline: the crucible cleanup of its dispatch directory
// (see Cleanup; a directory already cleaned up is fine when its durable copy
// exists), then the markers are removed. crucible's rule that the success
// cleanup needs both the manifest and the receipt ledger stands for runs that
// have a ledger; a run that never had one (nothing in rewind writes it) has
// its manifest copied alone (NoLedger), and an empty dispatch directory (no
// dispatch recorded) is deleted with nothing to copy. A refused cleanup keeps the markers.
// With failed, a dispatch directory that is gone (a reboot emptied /tmp) has
// nothing to copy: the markers are removed all the same, or they could never
// be cleared.
func Finish(scratch string, failed bool) (*FinishResult, error) {
	m, err := ReadMarker(scratch)
	if err != nil {
		return nil, err
	}
	res := &FinishResult{Marker: m}
	dir := m.DispatchDir
	durable := filepath.Join(scratch, filepath.Base(filepath.Clean(dir)))
	switch fi, err := os.Stat(dir); {
	case dir != "" && err == nil && fi.IsDir():
		msg, err := cleanupDir(dir, scratch, failed, true, &res.NoLedger)
		if err != nil {
			return nil, err
		}
		res.Message = msg
	case dir != "" && !failed && isFile(filepath.Join(durable, FileName)):
		res.Message = fmt.Sprintf("%s is already cleaned up; its copy is in %s", dir, durable)
	case failed:
		res.DirGone = true
		if dir == "" {
			dir = "(the marker names none)"
		}
		res.Message = fmt.Sprintf("dispatch dir missing: %s; nothing copied; removed the markers of pipeline %s", dir, m.PipelineID)
	default:
		return nil, dirMissing(dir)
	}
	remove := []string{filepath.Join(scratch, ActiveMarker)}
	if ValidSession(m.PipelineID) {
		remove = append(remove, DispatchActivePath(scratch, m.PipelineID))
	}
	for _, p := range remove {
		if err := os.Remove(p); err != nil && !notExist(err) {
			return nil, err
		}
	}
	return res, syncDir(scratch)
}
