package checkpoint

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rewind-cli/rewind/gitexec"
	"golang.org/x/sys/unix"
)

// preimportMax is the most changed files preimport takes; a larger change
// goes to prewrite, which shares the hashing out over the CPUs.
const preimportMax = 2000

// importRef holds the commit preimport makes, so that the objects it wrote
// stay reachable until the next one (a gc of the procedure's keeps them).
const importRef = "refs/rewind/import"

// preimport writes the objects a capture of a few changed files needs (their
// blobs, and the trees of every directory above them) into one pack, with
// one git fast-import: the last tree written, base, with the changes on top.
// update-index and write-tree then find every object there and write none,
// where each would otherwise be a file of its own (a create, a write and a
// rename each: on many file systems most of a small checkpoint's cost).
//
// It is only a head start, like prewrite: write-tree still decides the tree,
// and finds whatever is missing (a file changed again meanwhile, a base that
// is not the index's tree), so a failure here is only reported: false.
func (s *Store) preimport(ctx context.Context, base string, update []verdict, remove []string, early map[string]earlyBlob) bool {
	defer gitexec.TraceStep(fmt.Sprintf("%d changes written as one pack", len(update)+len(remove)), time.Now())
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(s.writeImport(pw, base, update, remove, early))
	}()
	g := s.git()
	// fastimport.unpackLimit: a pack however few its objects (git would
	// otherwise write fewer than 100 loose)
	if _, err := g.RunInput(ctx, pr, "-c", "fastimport.unpackLimit=0", "fast-import", "--quiet", "--done", "--force"); err != nil {
		pr.CloseWithError(err)
		s.warnTrace("fast-import: %v", err)
		return false
	}
	return true
}

// preimportFits reports whether preimport takes a change: a few files on the
// last tree written, with a git that can merge the packs it makes.
func preimportFits(base string, update, remove int) bool {
	return base != "" && update <= preimportMax && update+remove > 0 && gitexec.AtLeast(geometricVersion)
}

// writeImport writes the fast-import stream: one commit of base with the
// removals, then the files, each read now (those in early were read before).
func (s *Store) writeImport(w io.Writer, base string, update []verdict, remove []string, early map[string]earlyBlob) error {
	var head bytes.Buffer
	fmt.Fprintf(&head, "commit %s\ncommitter %s <%s> 0 +0000\ndata 0\nM 040000 %s \"\"\n", importRef, "rewind", gitexec.IdentityEmail, base)
	for _, p := range remove {
		fmt.Fprintf(&head, "D %s\n", quoteImportPath(p))
	}
	if _, err := w.Write(head.Bytes()); err != nil {
		return err
	}
	for _, v := range update {
		full := filepath.Join(s.WorkTree, v.path)
		var data []byte
		var err error
		mode := "100644"
		switch e, ok := early[v.path]; {
		case ok:
			mode, data = e.mode, e.data
		case !v.regular:
			mode = "120000"
			var target string
			target, err = os.Readlink(full)
			data = []byte(target)
		default:
			if v.key.mode&unix.S_IXUSR != 0 {
				mode = "100755"
			}
			data, err = readNoFollow(full)
		}
		if err != nil {
			continue // gone or changed: write-tree decides
		}
		if _, ok := early[v.path]; !ok {
			data = importRead(v.path, data)
		}
		if _, err := fmt.Fprintf(w, "M %s inline %s\ndata %d\n", mode, quoteImportPath(v.path), len(data)); err != nil {
			return err
		}
		if _, err := w.Write(append(data, '\n')); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "done\n")
	return err
}

// earlyBlob is a file changed in the second a capture began, read before the
// import: what it held, as the import takes it, and its blob id and mode.
type earlyBlob struct {
	data     []byte
	id, mode string
}

// readEarly reads the regular files among update changed at or after since
// (the second the capture began), which are racy (see racyFiles), and works
// out their blob ids (sha256 for a store of that object format, whose ids
// are 64 digits long, like base). The capture enters them into the index by
// those ids with no stat data, where others are hashed by update-index: git
// then takes them as changed at the next capture, as it would a path the
// index lacks, and no update-index has to take them out again. A file it
// cannot read is left to the usual way, and so are those past
// earlyArgsMax bytes of arguments or earlyBytesMax bytes of content.
func (s *Store) readEarly(update []verdict, since time.Time, base string) map[string]earlyBlob {
	early := map[string]earlyBlob{}
	args := 0
	var held int64 // bytes read
	for _, v := range update {
		if !v.regular || v.changed().Before(since) {
			continue
		}
		// "--cacheinfo", "<mode>,<id>,<path>", and their pointers
		arg := len(v.path) + len(base) + 40
		if args+arg > earlyArgsMax {
			break
		}
		if held+v.size() > earlyBytesMax {
			continue // held to the import's turn: left to it, streamed
		}
		data, err := readRegularNoFollow(filepath.Join(s.WorkTree, v.path))
		if err != nil || held+int64(len(data)) > earlyBytesMax {
			continue
		}
		held += int64(len(data))
		args += arg
		data = importRead(v.path, data)
		mode := "100644"
		if v.key.mode&unix.S_IXUSR != 0 {
			mode = "100755"
		}
		early[v.path] = earlyBlob{data: data, id: blobID(data, len(base) == 64), mode: mode}
	}
	return early
}

// earlyArgsMax bounds the bytes of the --cacheinfo arguments of the racy
// files: their command line must stay within the kernel's limit (ARG_MAX,
// with the environment), which is 128 KB on Linux with a small stack limit,
// and 2 MB with the usual 8 MB stack, where up to preimportMax long paths
// would pass it.
const earlyArgsMax = 64 << 10

// earlyBytesMax bounds the content of the racy files read before the
// import, all held until it has written them (the import streams the other
// files one at a time): up to preimportMax files of up to
// DefaultMaxFileSize each may have changed in the capture's second.
const earlyBytesMax = 32 << 20

// blobID is git's id of a blob holding data.
func blobID(data []byte, sha256Format bool) string {
	var h hash.Hash = sha1.New()
	if sha256Format {
		h = sha256.New()
	}
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// importRead is what the import takes of a file it read. (A test gives a
// file other content, as if it changed between the import and the hash.)
var importRead = func(_ string, data []byte) []byte { return data }

// geometricVersion is the first git with repack --geometric, which
// consolidatePacks needs; preimport, which makes a pack per capture, waits
// for it too (and fast-import's root tree replacement is long there).
const geometricVersion = "2.32"

// packsMax is the number of packs past which a capture merges the small ones:
// each object lookup that misses reads every pack's index.
var packsMax = 32

// consolidatePacks merges the store's small packs (one per capture that
// preimport wrote) into larger ones, keeping every object they hold, once
// there are more than packsMax of them. A failure costs only time.
func (s *Store) consolidatePacks(ctx context.Context) {
	packs, _ := filepath.Glob(filepath.Join(s.gitDir(), "objects", "pack", "pack-*.idx"))
	if len(packs) <= packsMax || !gitexec.AtLeast(geometricVersion) {
		return
	}
	defer gitexec.TraceStep(fmt.Sprintf("%d packs merged", len(packs)), time.Now())
	if _, err := s.git().Run(ctx, "repack", "-d", "-q", "--geometric=2"); err != nil {
		s.warnTrace("repack: %v", err)
	}
}

// readRegularNoFollow is readNoFollow of a file that must still be a
// regular one: its content goes into the index by id, where nothing would
// see that a FIFO (which reads as empty, opened without blocking) or a
// device was put in its place since it was looked at.
func readRegularNoFollow(full string) ([]byte, error) {
	f, err := os.OpenFile(full, os.O_RDONLY|syscallNoFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%s)", full, fi.Mode().Type())
	}
	return io.ReadAll(f)
}

// readNoFollow reads a regular file, never through a symlink put in its
// place since it was looked at.
func readNoFollow(full string) ([]byte, error) {
	f, err := os.OpenFile(full, os.O_RDONLY|syscallNoFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// quoteImportPath quotes a path as fast-import reads one: C-style, always
// (a path may hold a newline, a quote, or start with one).
func quoteImportPath(p string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		switch c := p[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c < 0x20 || c == 0x7f:
			b.WriteString(`\` + strconv.FormatInt(int64(c)|0o1000, 8)[1:])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// warnTrace reports a failure that costs only time, under REWIND_TRACE.
func (s *Store) warnTrace(format string, a ...any) {
	if gitexec.Trace != nil {
		gitexec.TraceStep("ignored: "+fmt.Sprintf(format, a...), time.Now())
	}
}
