package manifest

import (
	"bytes"
	"io"
	"runtime"
)

// The first pass over a large manifest is mostly validating JSON, which is
// done here in parallel: the file is cut into blocks at line boundaries,
// workers classify the lines of each block, and the records are merged into
// the index in file order. Memory stays bounded: a few blocks are in flight,
// and their buffers are reused once merged.

// blockSize is a variable so tests can cut small blocks.
var blockSize = 1 << 20

type block struct {
	buf   []byte // the block's bytes: whole lines (the last may lack its newline at EOF)
	off   int64  // file offset of buf[0]
	recs  []lineRec
	lines int // lines in the block, blank ones included
	done  chan struct{}
}

// classifyBlock fills b.recs and b.lines (counts: see recOf). Line numbers are
// relative (from 1); the merger adds the lines of the blocks before.
func classifyBlock(b *block, counts bool) {
	data := b.buf
	rel := 0
	for pos := 0; pos < len(data); {
		end := bytes.IndexByte(data[pos:], '\n')
		var raw []byte
		next := len(data)
		noNewline := true
		if end >= 0 {
			raw = data[pos : pos+end]
			next = pos + end + 1
			noNewline = false
		} else {
			raw = data[pos:]
		}
		rel++
		if len(bytes.TrimSpace(raw)) > 0 {
			l := Line{No: rel, Off: b.off + int64(pos), Raw: raw, NoNewline: noNewline}
			classify(&l)
			b.recs = append(b.recs, recOf(&l, counts))
		}
		pos = next
	}
	b.lines = rel
}

// readFile is the parallel first pass over r (a file, read from its start).
func (ix *Index) readFile(r io.Reader) error {
	workers := runtime.GOMAXPROCS(0)
	if workers > 8 {
		workers = 8
	}
	inFlight := 2 * workers
	free := make(chan *block, inFlight+1)
	jobs := make(chan *block, inFlight)
	order := make(chan *block, inFlight)
	readErr := make(chan error, 1)

	for w := 0; w < workers; w++ {
		go func() {
			for b := range jobs {
				classifyBlock(b, ix.counts)
				close(b.done)
			}
		}()
	}

	// The reader cuts blocks at the last newline; a line longer than a block
	// grows the block until it ends.
	go func() {
		defer close(jobs)
		defer close(order)
		var carry []byte
		var off int64
		for {
			// A merged block's buffers are reused.
			b := &block{}
			select {
			case b = <-free:
			default:
				b.buf = make([]byte, 0, blockSize)
			}
			buf := append(b.buf[:0], carry...)
			eof := false
			for {
				if len(buf) == cap(buf) {
					buf = append(buf, 0)[:len(buf)] // grow: a line longer than the block
				}
				n, err := r.Read(buf[len(buf):cap(buf)])
				buf = buf[:len(buf)+n]
				if err == io.EOF {
					eof = true
					break
				}
				if err != nil {
					readErr <- err
					return
				}
				if len(buf) == cap(buf) && bytes.LastIndexByte(buf, '\n') >= 0 {
					break
				}
			}
			cut := len(buf)
			if !eof {
				cut = bytes.LastIndexByte(buf, '\n') + 1
			}
			carry = append(carry[:0], buf[cut:]...)
			b.buf, b.off, b.done = buf[:cut], off, make(chan struct{})
			b.recs, b.lines = b.recs[:0], 0
			off += int64(cut)
			order <- b
			jobs <- b
			if eof {
				readErr <- nil
				return
			}
		}
	}()

	var m merger
	base := 0
	for b := range order {
		<-b.done
		for i := range b.recs {
			b.recs[i].no += base
			m.push(ix, &b.recs[i])
		}
		base += b.lines
		select {
		case free <- b:
		default:
		}
	}
	m.finish(ix)
	return <-readErr
}
