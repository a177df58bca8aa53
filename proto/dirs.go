package proto

import (
	"encoding/binary"
	"fmt"

	"github.com/zxfs/zx"
)

// FeatureDirs is the hello feature that says the sender accepts DIRS
// frames: several directory entries in one message, so that a long find or
// listing costs one frame per batch instead of one per entry.
const FeatureDirs = "dirs"

// batchPrefix is the room a DirBatch keeps for its count: a batch fits in a
// frame and each entry takes at least a byte, so the count is below 2^17
// and its uvarint takes at most 3 bytes.
const batchPrefix = 3

// DirBatch builds a DIRS payload one entry at a time: the count of
// entries, then each entry encoded as in a DIR message. The zero value is
// an empty batch that may grow to MaxPayload bytes.
type DirBatch struct {
	Max int // largest payload, at most (and by default) MaxPayload

	b    []byte // batchPrefix bytes of room for the count, then the entries
	n    int
	last int // bytes of entries in the last payload
}

// Add appends d to the batch if the payload stays within Max, and reports
// whether it did; if not, the batch is as it was. An entry too large for
// an empty batch never fits: send it as a DIR of its own.
func (b *DirBatch) Add(d zx.Dir) bool {
	if b.b == nil {
		// Room for as much as the last batch had, and a little more:
		// batches of a fast walk fill up, and growing each from a small
		// buffer by doubling showed in a find's profile (allocation and
		// copies); those of a slow one hold an entry or two. The slack
		// takes the entry that does not fit, encoded before it is
		// refused, without growing the buffer.
		const slack = 1 << 10
		b.b = make([]byte, batchPrefix, batchPrefix+min(b.last+b.last/4, b.max())+slack)
	}
	mark := len(b.b)
	e := encoder{b.b}
	e.dir(d)
	b.b = e.b
	if uvarintLen(uint64(b.n+1))+len(b.b)-batchPrefix > b.max() {
		b.b = b.b[:mark]
		return false
	}
	b.n++
	return true
}

func (b *DirBatch) max() int {
	if b.Max <= 0 || b.Max > MaxPayload {
		return MaxPayload
	}
	return b.Max
}

// Len returns the number of entries in the batch.
func (b *DirBatch) Len() int { return b.n }

// Payload returns the encoded batch, which the caller then owns, and
// empties the batch. The batch must not be empty.
func (b *DirBatch) Payload() []byte {
	var cb [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(cb[:], uint64(b.n))
	p := b.b[batchPrefix-n:]
	copy(p, cb[:n])
	*b = DirBatch{Max: b.Max, last: len(b.b) - batchPrefix}
	return p
}

// AppendDirs appends the DIRS payload of ds, which must fit in a frame.
func AppendDirs(b []byte, ds []zx.Dir) []byte {
	e := encoder{b}
	e.uvarint(uint64(len(ds)))
	for _, d := range ds {
		e.dir(d)
	}
	return e.b
}

// ParseDirs decodes a DIRS payload. A batch is taken whole or not at all:
// if any part of it is malformed (a count that does not match the entries,
// a truncated entry, more than a frame) the error says what and no entry
// is returned.
func ParseDirs(b []byte) ([]zx.Dir, error) {
	return parseDirs(decoder{b: b})
}

// ParseDirsOwned is ParseDirs for a payload that the caller hands over:
// the entries' names and values share b's memory (see ParseDirOwned).
func ParseDirsOwned(b []byte) ([]zx.Dir, error) {
	return parseDirs(decoder{b: b, owned: true})
}

func parseDirs(d decoder) ([]zx.Dir, error) {
	if len(d.b) > MaxPayload {
		d.fail(fmt.Sprintf("entry batch of %d bytes exceeds a frame (%d)", len(d.b), MaxPayload))
		return nil, d.err
	}
	n := d.uvarint()
	switch {
	case d.err != nil:
		return nil, d.err
	case n == 0:
		d.fail("empty entry batch")
		return nil, d.err
	case n > uint64(len(d.b)): // each entry takes at least a byte
		d.fail(fmt.Sprintf("entry batch says %d entries but has only %d bytes for them", n, len(d.b)))
		return nil, d.err
	}
	// A lying count must not allocate much: the slice grows as entries
	// actually decode.
	ds := make([]zx.Dir, 0, min(n, 256))
	for i := range n {
		if len(d.b) == 0 {
			d.fail(fmt.Sprintf("entry batch says %d entries but holds %d", n, i))
			return nil, d.err
		}
		dir := d.dir()
		if d.err != nil {
			return nil, zx.E(zx.ErrProtocol, "decode", "", fmt.Sprintf("entry %d of %d in a batch: %s", i+1, n, d.err.(*zx.Error).Msg))
		}
		ds = append(ds, dir)
	}
	if len(d.b) != 0 {
		d.fail(fmt.Sprintf("entry batch holds %d bytes more than its %d entries", len(d.b), n))
		return nil, d.err
	}
	return ds, nil
}

// DirsCount returns the number of entries a DIRS payload says it holds,
// without decoding them (0 if it does not say).
func DirsCount(b []byte) int64 {
	n, m := binary.Uvarint(b)
	if m <= 0 || n > MaxPayload {
		return 0
	}
	return int64(n)
}
