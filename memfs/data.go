package memfs

// blockSize is the unit of storage of file data.
const blockSize = 64 << 10

// maxSize bounds file sizes (and offsets): data is sparse, so this is not
// memory, but offsets must not overflow.
const maxSize = 1 << 50

// data is the contents of a regular file: a sparse array of blocks, holes
// read as zeros. A stored block is never modified: a write replaces the
// blocks it touches, so a snapshot (clone) is cheap and stays intact while
// the file changes.
type data struct {
	size   int64
	blocks map[int64][]byte // block number → blockSize bytes
}

func newData() *data { return &data{blocks: make(map[int64][]byte)} }

// clone returns a snapshot of d sharing its (immutable) blocks.
func (d *data) clone() *data {
	c := &data{size: d.size, blocks: make(map[int64][]byte, len(d.blocks))}
	for k, v := range d.blocks {
		c.blocks[k] = v
	}
	return c
}

// readAt fills p from offset off and returns the number of bytes read,
// which is short only at the end of the file.
func (d *data) readAt(p []byte, off int64) int {
	if off >= d.size {
		return 0
	}
	if rest := d.size - off; int64(len(p)) > rest {
		p = p[:rest]
	}
	n := 0
	for n < len(p) {
		bn, bo := (off+int64(n))/blockSize, (off+int64(n))%blockSize
		m := min(len(p)-n, blockSize-int(bo))
		if b, ok := d.blocks[bn]; ok {
			copy(p[n:n+m], b[bo:])
		} else {
			clear(p[n : n+m])
		}
		n += m
	}
	return n
}

// writeAt writes p at offset off, extending the file if needed.
func (d *data) writeAt(p []byte, off int64) {
	for n := 0; n < len(p); {
		bn, bo := (off+int64(n))/blockSize, (off+int64(n))%blockSize
		m := min(len(p)-n, blockSize-int(bo))
		nb := make([]byte, blockSize)
		if m < blockSize {
			copy(nb, d.blocks[bn])
		}
		copy(nb[bo:], p[n:n+m])
		d.blocks[bn] = nb
		n += m
	}
	d.size = max(d.size, off+int64(len(p)))
}

// truncate sets the size of the file: bytes past a shrunk end are dropped,
// an extension reads as zeros.
func (d *data) truncate(size int64) {
	if size >= d.size {
		d.size = size
		return
	}
	for bn := range d.blocks {
		if bn*blockSize >= size {
			delete(d.blocks, bn)
		}
	}
	if bo := size % blockSize; bo != 0 {
		bn := size / blockSize
		if b, ok := d.blocks[bn]; ok {
			nb := make([]byte, blockSize)
			copy(nb, b[:bo])
			d.blocks[bn] = nb
		}
	}
	d.size = size
}

// zero makes the bytes from off to end (within the file) read as zeros:
// blocks wholly inside are dropped (holes), the others replaced.
func (d *data) zero(off, end int64) {
	first, last := off/blockSize, (end-1)/blockSize
	zero := func(bn int64) {
		b, ok := d.blocks[bn]
		if !ok {
			return
		}
		lo, hi := max(off-bn*blockSize, 0), min(end-bn*blockSize, blockSize)
		if lo == 0 && hi == blockSize {
			delete(d.blocks, bn)
			return
		}
		nb := make([]byte, blockSize)
		copy(nb, b)
		clear(nb[lo:hi])
		d.blocks[bn] = nb
	}
	if last-first >= int64(len(d.blocks)) {
		// A range larger than what is stored: visit what is stored.
		for bn := range d.blocks {
			if bn >= first && bn <= last {
				zero(bn)
			}
		}
		return
	}
	for bn := first; bn <= last; bn++ {
		zero(bn)
	}
}
