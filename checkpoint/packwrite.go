package checkpoint

// The objects of a small change (its blobs, the trees above them), written
// by rewind as one pack: see preimport.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zlib"
	"github.com/rewind-cli/rewind/gitexec"
)

// Object types as a pack header names them.
const (
	packCommit = 1
	packTree   = 2
	packBlob   = 3
	packTag    = 4
)

// treeEdit is what a capture changes at one name of a directory: a file
// put there (blob), the name taken away (gone), or changes below it (sub).
type treeEdit struct {
	blob *treeEntry
	gone bool
	sub  map[string]*treeEdit
	// base is the directory's entries in the base tree (when it is a tree
	// there: baseID), read before the new tree is worked out.
	baseID string
	base   []treeEntry
}

// treeEntry is one entry of a tree object: its mode as the tree spells it,
// its name and its raw object id.
type treeEntry struct {
	mode, name string
	id         []byte
}

func (e treeEntry) isTree() bool { return e.mode == "40000" }

// below returns the edit at path under e, made on the way.
func (e *treeEdit) below(path string) *treeEdit {
	for _, name := range strings.Split(path, "/") {
		if e.sub == nil {
			e.sub = map[string]*treeEdit{}
		}
		next := e.sub[name]
		if next == nil {
			next = &treeEdit{}
			e.sub[name] = next
		}
		e = next
	}
	return e
}

// readBaseTrees reads the base tree of every directory the edits change,
// with one git cat-file asked for them all at once: the root by base, the
// others by base:path. A path that is no tree there (missing, or a file)
// has no base. The base itself must be there: a gc deletes the last tree
// a capture wrote when no ref names it, and the changes on no tree would
// make a tree of the changed files alone.
func (s *Store) readBaseTrees(ctx context.Context, base string, root *treeEdit) error {
	if readTreesDirect {
		started := time.Now()
		n, err := s.readBaseTreesDirect(base, root)
		if err == nil {
			gitexec.TraceStep(fmt.Sprintf("%d base trees read from the store's files", n), started)
			return nil
		}
		s.warnTrace("base trees: %v; asking git", err)
		root.forget()
	}
	var ask []*treeEdit
	var names []string
	var req bytes.Buffer
	var walk func(e *treeEdit, path string) error
	walk = func(e *treeEdit, path string) error {
		if strings.ContainsAny(path, "\n\r") {
			return fmt.Errorf("%q: a path cat-file cannot be asked for", path)
		}
		name := base
		if path != "" {
			name += ":" + path
		}
		ask, names = append(ask, e), append(names, name)
		req.WriteString(name + "\n")
		for name, sub := range e.sub {
			if len(sub.sub) > 0 {
				if err := walk(sub, strings.TrimPrefix(path+"/"+name, "/")); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(root, ""); err != nil {
		return err
	}
	out := bytes.NewBuffer(nil)
	if err := s.git().Stream(ctx, &req, out, "cat-file", "--batch"); err != nil {
		return err
	}
	for i, e := range ask {
		id, typ, data, err := nextBatchAnswer(out, names[i])
		if err != nil {
			return err
		}
		if e == root && typ != "tree" {
			return fmt.Errorf("the base %s: %s", base, typ)
		}
		if typ == "tree" {
			e.baseID = id
			if e.base, err = parseTree(data, len(base)/2); err != nil {
				return fmt.Errorf("tree %s: %w", id, err)
			}
		}
	}
	return nil
}

// readTreesDirect is off in tests of cat-file's way.
var readTreesDirect = true

// baseTreesBudget bounds what readBaseTreesDirect reads: far above the
// trees of a change (all the trees of a million files are about 45 MB);
// past it cat-file reads them.
var baseTreesBudget int64 = 1 << 30

// readBaseTreesDirect is readBaseTrees by reading the store's packs and
// loose objects (objectReader), walking down from base by the ids of the
// trees read: it reports how many it read. An error leaves the trees it
// read set: see forget.
func (s *Store) readBaseTreesDirect(base string, root *treeEdit) (int, error) {
	id, err := hex.DecodeString(base)
	if err != nil {
		return 0, fmt.Errorf("the base %q", base)
	}
	r := newObjectReader(filepath.Join(s.gitDir(), "objects"), len(id) == 32)
	r.budget = baseTreesBudget // a damaged store's sizes must not take all memory
	defer r.close()
	read := 0
	var walk func(e *treeEdit, id []byte) error
	walk = func(e *treeEdit, id []byte) error {
		typ, data, err := r.read(id)
		if err != nil {
			return err
		}
		if typ != packTree {
			return fmt.Errorf("%x is not a tree", id)
		}
		read++
		if e.base, err = parseTree(data, len(id)); err != nil {
			return fmt.Errorf("tree %x: %w", id, err)
		}
		e.baseID = hex.EncodeToString(id)
		for name, sub := range e.sub {
			if len(sub.sub) == 0 {
				continue
			}
			// a tree there, if any (a file or a submodule there has no
			// entries the edits go on)
			probe := treeEntry{mode: "40000", name: name}
			i := sort.Search(len(e.base), func(i int) bool { return treeOrder(e.base[i], probe) >= 0 })
			if i < len(e.base) && e.base[i].name == name && e.base[i].isTree() {
				if err := walk(sub, e.base[i].id); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return read, walk(root, id)
}

// treeLookup finds the entries of one tree's paths (heldAsIs): one object
// reader, its packs mapped once, and the trees read so far, by directory,
// shared by a restore's workers.
type treeLookup struct {
	mu    sync.Mutex
	root  []byte // the tree's id; nil when it is not one
	r     *objectReader
	trees map[string]map[string]treeEntry // by directory ("." the root), by name
}

func (s *Store) newTreeLookup(tree string) *treeLookup {
	id, err := hex.DecodeString(tree)
	if err != nil || len(id) != 20 && len(id) != 32 {
		id = nil
	}
	r := newObjectReader(filepath.Join(s.gitDir(), "objects"), len(id) == 32)
	r.budget = baseTreesBudget // a damaged store's sizes must not take all memory
	return &treeLookup{root: id, r: r, trees: map[string]map[string]treeEntry{}}
}

// entry is the tree's entry at rel (slash-separated): its mode and id.
func (l *treeLookup) entry(rel string) (treeEntry, error) {
	if l == nil { // (closed before it was made)
		return treeEntry{}, errors.New("no tree to look in")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	entries, err := l.dir(path.Dir(rel))
	if err != nil {
		return treeEntry{}, err
	}
	return findEntry(entries, path.Base(rel))
}

// findEntry is the entry named name. (A tree never holds a file and a
// directory of one name.)
func findEntry(entries map[string]treeEntry, name string) (treeEntry, error) {
	if e, ok := entries[name]; ok {
		return e, nil
	}
	return treeEntry{}, fmt.Errorf("%s: not in the tree", name)
}

// dir reads the entries of the tree at the directory d ("." the root).
func (l *treeLookup) dir(d string) (map[string]treeEntry, error) {
	if entries, ok := l.trees[d]; ok {
		return entries, nil
	}
	id := l.root
	if id == nil {
		return nil, errors.New("no tree to look in")
	}
	if d != "." {
		parent, err := l.dir(path.Dir(d))
		if err != nil {
			return nil, err
		}
		e, err := findEntry(parent, path.Base(d))
		if err != nil {
			return nil, err
		}
		if !e.isTree() {
			return nil, fmt.Errorf("%s: not a directory in the tree", d)
		}
		id = e.id
	}
	typ, data, err := l.r.read(id)
	if err != nil {
		return nil, err
	}
	if typ != packTree {
		return nil, fmt.Errorf("%x is not a tree", id)
	}
	list, err := parseTree(data, len(id))
	if err != nil {
		return nil, fmt.Errorf("tree %x: %w", id, err)
	}
	entries := make(map[string]treeEntry, len(list))
	for _, e := range list {
		entries[e.name] = e
	}
	l.trees[d] = entries
	return entries, nil
}

func (l *treeLookup) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.r.close()
}

// forget takes away the base trees read into e and below it.
func (e *treeEdit) forget() {
	e.baseID, e.base = "", nil
	for _, sub := range e.sub {
		sub.forget()
	}
}

// nextBatchAnswer takes one answer of cat-file --batch, asked for name,
// off out: the object's id, type and content ("missing" and no content for
// an object not there: "<name> missing", the name as asked, spaces and
// all).
func nextBatchAnswer(out *bytes.Buffer, name string) (id, typ string, data []byte, err error) {
	head, err := out.ReadString('\n')
	if err != nil {
		return "", "", nil, fmt.Errorf("cat-file: %w", err)
	}
	if head == name+" missing\n" {
		return "", "missing", nil, nil
	}
	f := strings.Fields(head)
	if len(f) != 3 {
		return "", "", nil, fmt.Errorf("cat-file: %q", strings.TrimSpace(head))
	}
	size, err := strconv.Atoi(f[2])
	if err != nil || out.Len() < size+1 {
		return "", "", nil, fmt.Errorf("cat-file: %q and %d bytes", strings.TrimSpace(head), out.Len())
	}
	data = out.Next(size + 1)[:size] // and the newline after it
	return f[0], f[1], data, nil
}

// parseTree splits a tree object into its entries (ids of idLen bytes).
func parseTree(data []byte, idLen int) ([]treeEntry, error) {
	var entries []treeEntry
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		nul := bytes.IndexByte(data, 0)
		if sp <= 0 || nul < sp+2 || len(data) < nul+1+idLen {
			return nil, errors.New("malformed entry")
		}
		entries = append(entries, treeEntry{mode: treeMode(data[:sp]), name: string(data[sp+1 : nul]), id: data[nul+1 : nul+1+idLen]})
		data = data[nul+1+idLen:]
	}
	return entries, nil
}

// treeMode is a tree entry's mode as a string, those git writes without
// a copy each.
func treeMode(m []byte) string {
	for _, known := range [...]string{"100644", "40000", "100755", "120000", "160000"} {
		if string(m) == known {
			return known
		}
	}
	return string(m)
}

// treeOrder compares two entries in the order of git's trees: by name, a
// tree's name as if it ended in a slash.
func treeOrder(a, b treeEntry) int {
	n := min(len(a.name), len(b.name))
	if c := strings.Compare(a.name[:n], b.name[:n]); c != 0 {
		return c
	}
	next := func(e treeEntry) int {
		switch {
		case len(e.name) > n:
			return int(e.name[n])
		case e.isTree():
			return '/'
		}
		return 0
	}
	return next(a) - next(b)
}

// writeTrees works out the new tree of e (its base with the edits) and
// those below it, adding every one that differs from its base to out. It
// returns the tree's id, or nil when it holds nothing (git writes no empty
// directory; only the root may be an empty tree).
func writeTrees(e *treeEdit, out *[]newTree, sha256Format, isRoot bool) ([]byte, error) {
	// The base's entries are in order already: those of the names edited
	// are taken out, and the new entries of those names, sorted, merged in.
	var kept []treeEntry
	var was map[string]treeEntry // the base's entries of the names edited
	for _, entry := range e.base {
		if _, edited := e.sub[entry.name]; !edited {
			kept = append(kept, entry)
			continue
		}
		if was == nil {
			was = map[string]treeEntry{}
		}
		was[entry.name] = entry
	}
	var put []treeEntry
	for name, sub := range e.sub {
		before, ok := was[name]
		switch {
		case sub.blob != nil:
			put = append(put, treeEntry{mode: sub.blob.mode, name: name, id: sub.blob.id})
		case len(sub.sub) > 0:
			// a directory of the base that cat-file did not answer as
			// the same tree (an object missing below a tree there) would
			// lose what it holds
			if ok && before.isTree() && hex.EncodeToString(before.id) != sub.baseID {
				return nil, fmt.Errorf("%s: tree %x read as %q", name, before.id, sub.baseID)
			}
			id, err := writeTrees(sub, out, sha256Format, false)
			if err != nil {
				return nil, err
			}
			// emptied: gone unless it was no directory (a file there
			// stays, but when removed itself)
			switch {
			case id != nil:
				put = append(put, treeEntry{mode: "40000", name: name, id: id})
			case ok && !sub.gone && !before.isTree():
				put = append(put, before)
			}
		case ok && !sub.gone:
			put = append(put, before)
		}
	}
	if len(kept)+len(put) == 0 && !isRoot {
		return nil, nil
	}
	slices.SortFunc(put, treeOrder)
	var data bytes.Buffer
	add := func(entry treeEntry) {
		data.WriteString(entry.mode)
		data.WriteByte(' ')
		data.WriteString(entry.name)
		data.WriteByte(0)
		data.Write(entry.id)
	}
	for len(kept) > 0 || len(put) > 0 {
		if len(put) == 0 || (len(kept) > 0 && treeOrder(kept[0], put[0]) < 0) {
			add(kept[0])
			kept = kept[1:]
		} else {
			add(put[0])
			put = put[1:]
		}
	}
	id := gitObjectID(packTree, data.Bytes(), sha256Format)
	if hex.EncodeToString(id) != e.baseID {
		*out = append(*out, newTree{id: id, data: data.Bytes()})
	}
	return id, nil
}

// newTree is a tree writeTrees worked out that the base does not have.
type newTree struct {
	id, data []byte
}

// packWriter writes objects into a new pack of the store, and its index.
type packWriter struct {
	dir     string
	f       *os.File
	w       *bufio.Writer
	off     int64
	sha256  bool
	objects []packedObject
	seen    map[string]bool
	done    bool
}

// packedObject is an object as a pack holds it (its type and size, then
// its content compressed), and where it is in the pack, for its index.
type packedObject struct {
	id, data []byte
	off      int64
	crc      uint32
}

// newPackWriter starts a pack in the store's objects/pack, as a temporary
// file until finish names it.
func newPackWriter(dir string, sha256Format bool) (*packWriter, error) {
	f, err := os.CreateTemp(dir, "tmp_pack_")
	if err != nil {
		return nil, err
	}
	p := &packWriter{dir: dir, f: f, w: bufio.NewWriterSize(f, 256<<10), sha256: sha256Format, seen: map[string]bool{}}
	// the count is written when known (finish)
	_, err = p.w.Write([]byte{'P', 'A', 'C', 'K', 0, 0, 0, 2, 0, 0, 0, 0})
	p.off = 12
	return p, err
}

// objectHash is the hash of a store's object ids: SHA-1, or SHA-256 for a
// store of that format.
func objectHash(sha256Format bool) hash.Hash {
	if sha256Format {
		return sha256.New()
	}
	return sha1.New()
}

// compressors are zlib writers, used again (a new one allocates hundreds
// of kilobytes): blobs and commits at git's default level, trees at the
// fastest (a tree is mostly object ids, which no level compresses; its
// names compress at any).
var compressors = map[int]*sync.Pool{}

func init() {
	for _, level := range []int{zlib.DefaultCompression, zlib.BestSpeed} {
		compressors[level] = &sync.Pool{New: func() any { z, _ := zlib.NewWriterLevel(nil, level); return z }}
	}
}

// objectTypes names the types of objects as git spells them.
var objectTypes = [...]string{packCommit: "commit", packTree: "tree", packBlob: "blob", packTag: "tag"}

// objectHeader is what git hashes (and a loose object holds) before an
// object's content.
func objectHeader(typ int, size int) string {
	return fmt.Sprintf("%s %d\x00", objectTypes[typ], size)
}

// gitObjectID is git's id of an object of type typ holding data.
func gitObjectID(typ int, data []byte, sha256Format bool) []byte {
	h := objectHash(sha256Format)
	io.WriteString(h, objectHeader(typ, len(data)))
	h.Write(data)
	return h.Sum(nil)
}

// writeCommit writes a checkpoint's commit of tree, without parents, with
// message and rewind's identity at date, as git commit-tree writes it (the
// same bytes, the same id): a git process less on every checkpoint's path.
// It is a loose object, written before the ref that names it and, as git
// writes one by default, without an fsync. A message that is not UTF-8 (a
// branch name's bytes in its trailer) is the one difference: git takes it
// for Latin-1 and rewrites it, rewind keeps its bytes, so that the branch
// reads back as the project names it.
func (s *Store) writeCommit(tree, message string, date time.Time) (string, error) {
	if strings.IndexByte(message, 0) >= 0 {
		return "", errors.New("a commit message cannot hold a NUL byte")
	}
	who := fmt.Sprintf("%s <%s> %d +0000", gitexec.IdentityName, gitexec.IdentityEmail, date.Unix())
	data := []byte("tree " + tree + "\nauthor " + who + "\ncommitter " + who + "\n\n" + message)
	id := hex.EncodeToString(gitObjectID(packCommit, data, len(tree) == 64))
	dir := filepath.Join(s.gitDir(), "objects", id[:2])
	name := filepath.Join(dir, id[2:])
	if _, err := os.Lstat(name); err == nil {
		return id, nil
	}
	var buf bytes.Buffer
	z := compressors[zlib.DefaultCompression].Get().(*zlib.Writer)
	defer compressors[zlib.DefaultCompression].Put(z)
	z.Reset(&buf)
	io.WriteString(z, objectHeader(packCommit, len(data)))
	z.Write(data)
	z.Close()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return "", fmt.Errorf("write the commit: %w", err)
	}
	tmp, err := os.CreateTemp(dir, "tmp_obj_")
	if err != nil {
		return "", fmt.Errorf("write the commit: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	_, err = tmp.Write(buf.Bytes())
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		os.Chmod(tmp.Name(), 0o444)
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		return "", fmt.Errorf("write the commit: %w", err)
	}
	return id, nil
}

// pack makes an object of type typ holding data as a pack holds it; id is
// its id when known (else worked out). A tree stays as written through the
// merges of the small packs unless stored as a delta of another: its
// compression (see compressors) is what it costs the store.
func (p *packWriter) pack(typ int, data, id []byte) packedObject {
	if id == nil {
		id = gitObjectID(typ, data, p.sha256)
	}
	var buf bytes.Buffer
	size := len(data)
	c := byte(typ<<4) | byte(size&15)
	for size >>= 4; size > 0; size >>= 7 {
		buf.WriteByte(c | 0x80)
		c = byte(size & 0x7f)
	}
	buf.WriteByte(c)
	level := zlib.DefaultCompression
	if typ == packTree {
		level = zlib.BestSpeed
	}
	z := compressors[level].Get().(*zlib.Writer)
	defer compressors[level].Put(z)
	z.Reset(&buf)
	z.Write(data)
	z.Close()
	return packedObject{id: id, data: buf.Bytes(), crc: crc32.ChecksumIEEE(buf.Bytes())}
}

// packAll makes n objects of type typ (object(i) is the i-th's content and
// id, nil when not known) as pack does, side by side, in order: for
// writing in that order.
func (p *packWriter) packAll(typ, n int, object func(i int) (data, id []byte)) []packedObject {
	packed := make([]packedObject, n)
	forEach(n, func(i int) {
		data, id := object(i)
		packed[i] = p.pack(typ, data, id)
	})
	return packed
}

// write appends an object made by pack; an object already in the pack is
// written once.
func (p *packWriter) write(o packedObject) error {
	if p.seen[string(o.id)] {
		return nil
	}
	p.seen[string(o.id)] = true
	if p.off+int64(len(o.data)) >= 1<<31 {
		// offsets past 2 GiB take a second table in the index: a change
		// this large is left to git
		return errors.New("the pack would pass 2 GiB")
	}
	o.off = p.off
	n, err := p.w.Write(o.data)
	p.off += int64(n)
	o.data = nil
	p.objects = append(p.objects, o)
	return err
}

// abort takes the unfinished pack away.
func (p *packWriter) abort() {
	if p.done {
		return
	}
	p.f.Close()
	os.Remove(p.f.Name())
}

// finish completes the pack (its count, its checksum) and writes its index
// (version 2), each synced, then names both as git does: a .keep file
// holding keep first (which keeps a repack from deleting its objects while
// no ref names them), then the pack, then its index, which makes it
// visible. It returns the .keep file's name.
func (p *packWriter) finish(keep string) (string, error) {
	if err := p.w.Flush(); err != nil {
		return "", err
	}
	var count [4]byte
	binary.BigEndian.PutUint32(count[:], uint32(len(p.objects)))
	if _, err := p.f.WriteAt(count[:], 8); err != nil {
		return "", err
	}
	h := objectHash(p.sha256)
	if _, err := io.Copy(h, io.NewSectionReader(p.f, 0, p.off)); err != nil {
		return "", err
	}
	sum := h.Sum(nil)
	if _, err := p.f.WriteAt(sum, p.off); err != nil {
		return "", err
	}
	if err := p.f.Sync(); err != nil {
		return "", err
	}
	if err := p.f.Close(); err != nil {
		return "", err
	}
	idx, err := os.CreateTemp(p.dir, "tmp_idx_")
	if err != nil {
		return "", err
	}
	defer os.Remove(idx.Name())
	if err := p.writeIndex(idx, sum); err != nil {
		idx.Close()
		return "", err
	}
	if err := idx.Close(); err != nil {
		return "", err
	}
	name := filepath.Join(p.dir, "pack-"+hex.EncodeToString(sum))
	for _, tmp := range []*os.File{p.f, idx} {
		os.Chmod(tmp.Name(), 0o444)
	}
	if err := os.WriteFile(name+".keep", []byte(keep), 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(p.f.Name(), name+".pack"); err != nil {
		os.Remove(name + ".keep")
		return "", err
	}
	p.done = true
	if err := os.Rename(idx.Name(), name+".idx"); err != nil {
		// a pack without its index: git would never read nor delete it
		os.Remove(name + ".pack")
		os.Remove(name + ".keep")
		return "", err
	}
	return name + ".keep", nil
}

// writeIndex writes the pack's index: the version 2 header, 256 counts of
// ids by first byte, the sorted ids, their CRC-32s, their offsets, the
// pack's checksum, its own.
func (p *packWriter) writeIndex(f *os.File, packSum []byte) error {
	objects := p.objects
	sort.Slice(objects, func(i, j int) bool { return bytes.Compare(objects[i].id, objects[j].id) < 0 })
	h := objectHash(p.sha256)
	w := bufio.NewWriter(io.MultiWriter(f, h))
	w.Write(packIndexV2)
	var word [8]byte
	put32 := func(v uint32) { binary.BigEndian.PutUint32(word[:4], v); w.Write(word[:4]) }
	n := 0
	for b := 0; b < 256; b++ {
		for n < len(objects) && int(objects[n].id[0]) == b {
			n++
		}
		put32(uint32(n))
	}
	for _, o := range objects {
		w.Write(o.id)
	}
	for _, o := range objects {
		put32(o.crc)
	}
	for _, o := range objects {
		put32(uint32(o.off)) // below 2 GiB: write refuses more
	}
	w.Write(packSum)
	if err := w.Flush(); err != nil {
		return err
	}
	if _, err := f.Write(h.Sum(nil)); err != nil {
		return err
	}
	return f.Sync()
}
