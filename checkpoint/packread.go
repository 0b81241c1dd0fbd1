package checkpoint

// Reading objects of the store's packs and loose files, for the import's
// base trees: a capture's change of a hundred files needs the trees above
// them, which a git cat-file took 10-40 ms to give (a process, and each path
// walked down from the root again), most of an import's time.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/klauspost/compress/zlib"
	"golang.org/x/sys/unix"
)

// Pack entry types beyond the objects' own (packCommit ...).
const (
	packOfsDelta = 6
	packRefDelta = 7
)

// objectReader reads objects as git stores them: loose, or in a pack
// (version 2 index), whole or as a delta of another. Every object read is
// checked against its id, so that what it gives is what git would; anything
// it does not know (an alternate object directory, a damaged pack) is an
// error, and the caller asks git.
type objectReader struct {
	dir    string // the objects directory
	sha256 bool
	packs  []*packFile
	opened bool
	depth  int           // of bases by id being read (a damaged pack may loop)
	z      io.ReadCloser // a zlib reader, reset for each object
	// budget, unless negative, bounds the bytes the reader makes (objects,
	// and the deltas and bases on their way): past it a read is an error.
	budget int64
}

// packFile is a pack and its index, mapped into memory while the reader is
// open, with the objects of its delta chains read so far.
type packFile struct {
	idx, pack []byte
	bases     map[int64]packed
}

// packed is an object's type and content as read from a pack.
type packed struct {
	typ  int
	data []byte
}

func newObjectReader(objectsDir string, sha256Format bool) *objectReader {
	return &objectReader{dir: objectsDir, sha256: sha256Format, budget: -1}
}

// charge takes n bytes off the budget.
func (r *objectReader) charge(n int64) error {
	if r.budget < 0 {
		return nil
	}
	if n > r.budget {
		return errors.New("objects larger than the reader may hold")
	}
	r.budget -= n
	return nil
}

// open maps the packs, the newest first (where a base tree of a recent
// checkpoint is).
func (r *objectReader) open() error {
	r.opened = true
	idxs, err := filepath.Glob(filepath.Join(r.dir, "pack", "pack-*.idx"))
	if err != nil {
		return err
	}
	mtime := map[string]int64{}
	for _, i := range idxs {
		if fi, err := os.Stat(i); err == nil {
			mtime[i] = fi.ModTime().UnixNano()
		}
	}
	sort.SliceStable(idxs, func(a, b int) bool { return mtime[idxs[a]] > mtime[idxs[b]] })
	for _, i := range idxs {
		idx, err := mapFile(i)
		if err != nil {
			return err
		}
		pack, err := mapFile(strings.TrimSuffix(i, ".idx") + ".pack")
		if err != nil {
			unix.Munmap(idx)
			if errors.Is(err, os.ErrNotExist) {
				continue // an index without its pack: git reads no such pack
			}
			return err
		}
		p := &packFile{idx: idx, pack: pack, bases: map[int64]packed{}}
		r.packs = append(r.packs, p)
		if err := p.checkIndex(r.idLen()); err != nil {
			return fmt.Errorf("%s: %w", filepath.Base(i), err)
		}
		if len(pack) < 12 || string(pack[:4]) != "PACK" {
			return fmt.Errorf("%s: not a pack", filepath.Base(i))
		}
	}
	return nil
}

func mapFile(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() == 0 || fi.Size() != int64(int(fi.Size())) {
		return nil, fmt.Errorf("%s: a size of %d", filepath.Base(name), fi.Size())
	}
	return unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
}

// close unmaps the packs.
func (r *objectReader) close() {
	for _, p := range r.packs {
		unix.Munmap(p.idx)
		unix.Munmap(p.pack)
	}
	r.packs = nil
}

func (r *objectReader) idLen() int {
	if r.sha256 {
		return 32
	}
	return 20
}

// checkIndex makes sure the index is one offset can search: version 2,
// with room for the tables its count of objects needs (git checks the size
// the same way before it uses an index: a damaged count must not send a
// search past the file).
func (p *packFile) checkIndex(idLen int) error {
	if len(p.idx) < 8+256*4 || !bytes.Equal(p.idx[:8], packIndexV2) {
		return errors.New("not a version 2 pack index")
	}
	n := int64(p.count(255))
	if int64(len(p.idx)) < 8+256*4+n*int64(idLen+8)+2*int64(idLen) {
		return errors.New("a pack index shorter than its objects")
	}
	return nil
}

func (p *packFile) count(b int) uint32 { return binary.BigEndian.Uint32(p.idx[8+4*b:]) }

// offset looks id up in the index (version 2: a header, 256 cumulative
// counts by first byte, the sorted ids, their CRC-32s, their offsets, the
// offsets past 2 GiB): its offset in the pack, -1 when it is not there, -2
// when the index is damaged.
func (p *packFile) offset(id []byte) int64 {
	idLen := len(id)
	lo := uint32(0)
	if id[0] > 0 {
		lo = p.count(int(id[0]) - 1)
	}
	hi := p.count(int(id[0]))
	if hi < lo || hi > p.count(255) {
		return -2
	}
	ids := p.idx[8+256*4:]
	i := lo + uint32(sort.Search(int(hi-lo), func(k int) bool {
		at := int(lo) + k
		return bytes.Compare(ids[at*idLen:at*idLen+idLen], id) >= 0
	}))
	if i >= hi || !bytes.Equal(ids[int(i)*idLen:int(i)*idLen+idLen], id) {
		return -1
	}
	n := int(p.count(255))
	offsets := ids[n*(idLen+4):]
	off := binary.BigEndian.Uint32(offsets[4*i:])
	if off&0x80000000 == 0 {
		return int64(off)
	}
	large := offsets[4*n:]
	k := int(off &^ 0x80000000)
	if len(large) < 8*(k+1) {
		return -2 // damaged: not found, and read says why
	}
	return int64(binary.BigEndian.Uint64(large[8*k:]))
}

// read gives the type and content of the object id (raw bytes), loose or
// packed, checked against the id.
func (r *objectReader) read(id []byte) (typ int, data []byte, err error) {
	// A pack cut short since it was mapped faults (SIGBUS) where it is read
	// past its new end: a panic recovered below, not a crash of rewind.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		// a damaged pack whose bounds the checks below missed, or cut short
		if e := recover(); e != nil {
			err = fmt.Errorf("object %x: a damaged pack: %v", id, e)
		}
	}()
	if !r.opened {
		if err := r.open(); err != nil {
			return 0, nil, err
		}
	}
	if len(id) != r.idLen() {
		return 0, nil, fmt.Errorf("an id of %d bytes", len(id))
	}
	typ, data, err = r.find(id)
	if err != nil {
		return 0, nil, fmt.Errorf("object %x: %w", id, err)
	}
	if typ < packCommit || typ > packTag || !bytes.Equal(gitObjectID(typ, data, r.sha256), id) {
		return 0, nil, fmt.Errorf("object %x: what the store holds under it is not it", id)
	}
	return typ, data, nil
}

// find reads id from the first pack that has it, else its loose file.
func (r *objectReader) find(id []byte) (int, []byte, error) {
	for _, p := range r.packs {
		switch off := p.offset(id); {
		case off >= 0:
			o, err := r.unpack(p, off)
			return o.typ, o.data, err
		case off == -2:
			return 0, nil, errors.New("a damaged pack index")
		}
	}
	return r.loose(id)
}

// loose reads a loose object: zlib of "<type> <size>\0<content>".
func (r *objectReader) loose(id []byte) (int, []byte, error) {
	h := hex.EncodeToString(id)
	f, err := os.Open(filepath.Join(r.dir, h[:2], h[2:]))
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	z, err := zlib.NewReader(f)
	if err != nil {
		return 0, nil, err
	}
	var from io.Reader = z
	if r.budget >= 0 {
		from = io.LimitReader(z, 64+r.budget+1) // the header, the budget and a byte past it
	}
	raw, err := io.ReadAll(from)
	if err != nil {
		return 0, nil, err
	}
	head, data, ok := bytes.Cut(raw, []byte{0})
	if err := r.charge(int64(len(data))); err != nil {
		return 0, nil, err
	}
	name, size, _ := strings.Cut(string(head), " ")
	typ := slices.Index(objectTypes[:], name)
	if !ok || typ < packCommit || size != fmt.Sprint(len(data)) {
		return 0, nil, errors.New("a damaged loose object")
	}
	return typ, data, nil
}

// unpack reads the entry at off: whole, or its delta chain down to a whole
// object, then each delta applied on the way back up. The objects of a
// chain are kept (bases) for the other trees of the same chain.
func (r *objectReader) unpack(p *packFile, off int64) (packed, error) {
	var chain []int64 // deltas, from off down
	var deltas [][]byte
	var base packed
	for {
		if o, ok := p.bases[off]; ok {
			base = o
			break
		}
		typ, size, body, err := p.entry(off)
		if err != nil {
			return packed{}, err
		}
		switch typ {
		case packCommit, packTree, packBlob, packTag:
			data, err := r.inflate(p.pack[body:], size)
			if err != nil {
				return packed{}, err
			}
			base = packed{typ, data}
			p.bases[off] = base
		case packOfsDelta:
			rel, n := ofsDeltaOffset(p.pack[body:])
			if n == 0 || rel <= 0 || rel > off {
				return packed{}, errors.New("a damaged delta offset")
			}
			delta, err := r.inflate(p.pack[body+int64(n):], size)
			if err != nil {
				return packed{}, err
			}
			chain, deltas = append(chain, off), append(deltas, delta)
			off -= rel
			continue
		case packRefDelta:
			idLen := r.idLen()
			if int64(len(p.pack)) < body+int64(idLen) {
				return packed{}, errors.New("a damaged pack entry")
			}
			delta, err := r.inflate(p.pack[body+int64(idLen):], size)
			if err != nil {
				return packed{}, err
			}
			if r.depth++; r.depth > 64 {
				return packed{}, errors.New("a delta chain too long")
			}
			typ, data, err := r.find(p.pack[body : body+int64(idLen)])
			r.depth--
			if err != nil {
				return packed{}, err
			}
			chain, deltas = append(chain, off), append(deltas, delta)
			base = packed{typ, data}
		default:
			return packed{}, fmt.Errorf("a pack entry of type %d", typ)
		}
		break
	}
	if len(chain) > 10000 {
		return packed{}, errors.New("a delta chain too long")
	}
	for i := len(chain) - 1; i >= 0; i-- {
		data, err := applyDelta(base.data, deltas[i], r.charge)
		if err != nil {
			return packed{}, err
		}
		base = packed{base.typ, data}
		p.bases[chain[i]] = base
	}
	return base, nil
}

// entry reads the header of the pack entry at off: its type, the size of
// its content (a delta's for a delta), and where what follows the header
// starts.
func (p *packFile) entry(off int64) (typ int, size int64, body int64, err error) {
	if off < 12 || off >= int64(len(p.pack)) {
		return 0, 0, 0, errors.New("an offset outside the pack")
	}
	c := p.pack[off]
	typ, size = int(c>>4&7), int64(c&15)
	for shift, i := 4, off+1; ; shift += 7 {
		if c&0x80 == 0 {
			return typ, size, i, nil
		}
		if i >= int64(len(p.pack)) || shift > 56 {
			return 0, 0, 0, errors.New("a damaged pack entry")
		}
		c = p.pack[i]
		size |= int64(c&0x7f) << shift
		i++
	}
}

// ofsDeltaOffset decodes the distance back to an offset delta's base, and
// the bytes it took (0: damaged).
func ofsDeltaOffset(b []byte) (int64, int) {
	var rel int64
	for i := 0; i < len(b) && i < 9; i++ {
		if i > 0 {
			rel++
		}
		rel = rel<<7 | int64(b[i]&0x7f)
		if b[i]&0x80 == 0 {
			return rel, i + 1
		}
	}
	return 0, 0
}

// inflate reads a zlib stream of size bytes of content.
func (r *objectReader) inflate(b []byte, size int64) ([]byte, error) {
	if size > int64(len(b))*1032+64 {
		return nil, errors.New("a size its compressed data cannot hold")
	}
	if err := r.charge(size); err != nil {
		return nil, err
	}
	var err error
	if r.z == nil {
		r.z, err = zlib.NewReader(bytes.NewReader(b))
	} else {
		err = r.z.(zlib.Resetter).Reset(bytes.NewReader(b), nil)
	}
	if err != nil {
		return nil, err
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(r.z, data); err != nil {
		return nil, err
	}
	return data, nil
}

// applyDelta makes an object from base and a git delta: the sizes of the
// base and of the result, then copies from the base and inserted bytes.
// The result's size is charged before it is made: a delta of a few bytes
// may say 65536 times as many.
func applyDelta(base, delta []byte, charge func(int64) error) ([]byte, error) {
	varint := func() (int, bool) {
		v, shift := 0, 0
		for len(delta) > 0 && shift < 63 {
			c := delta[0]
			delta = delta[1:]
			v |= int(c&0x7f) << shift
			if c&0x80 == 0 {
				return v, true
			}
			shift += 7
		}
		return 0, false
	}
	damaged := errors.New("a damaged delta")
	from, ok1 := varint()
	size, ok2 := varint()
	if !ok1 || !ok2 || from != len(base) || size > len(delta)*0x10000+len(base) {
		return nil, damaged
	}
	if err := charge(int64(size)); err != nil {
		return nil, err
	}
	out := make([]byte, 0, size)
	for len(delta) > 0 {
		op := delta[0]
		delta = delta[1:]
		if op&0x80 == 0 {
			n := int(op)
			if n == 0 || n > len(delta) {
				return nil, damaged
			}
			out, delta = append(out, delta[:n]...), delta[n:]
			continue
		}
		var at, n int
		for bit := 0; bit < 7; bit++ {
			if op&(1<<bit) == 0 {
				continue
			}
			if len(delta) == 0 {
				return nil, damaged
			}
			if bit < 4 {
				at |= int(delta[0]) << (8 * bit)
			} else {
				n |= int(delta[0]) << (8 * (bit - 4))
			}
			delta = delta[1:]
		}
		if n == 0 {
			n = 0x10000
		}
		if at+n > len(base) || len(out)+n > size {
			return nil, damaged
		}
		out = append(out, base[at:at+n]...)
	}
	if len(out) != size {
		return nil, damaged
	}
	return out, nil
}
