package cache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
)

// A journal keeps write-back records on the client's disk until the server
// acknowledged them, so that a client crash loses nothing close() returned
// for. It is an append-only log: a few segment files,
// "NNNNNNNNNNNNNNNNNNNN.log" (the segment's number), each
//
//	zxjournal 2\n
//	entry...
//
// where an entry is a 24-byte frame (magic "ZXJ2", kind, header length,
// data length, CRC-32C of the frame, header and data) followed by its
// header and data. A write entry ('W') holds a record: a JSON header
// (seq, path, ops) and the data; an acknowledgement ('A') holds the
// sequence number of a record the server has (or that was moved to
// rejected/). Closing a file appends one entry with one pwritev, without
// creating, renaming or removing a file (tar -x spent most of its journal
// time there) and without fsync: close() in write-back mode is as durable
// as close() on a local disk. Once appended, a record survives a crash or
// kill of the client (its data is in the kernel's page cache); a
// background group commit (commit, at most every commitInterval) then
// fdatasyncs the segments written since the last one (and the directory
// when segments were made or removed), so that they survive a power loss
// too. A record caught by a power loss before its commit may be cut short
// or garbage: its checksum fails, the segment is read up to it, and the
// rest is moved to "bad/". A segment whose records are all acknowledged,
// and whose predecessors are gone (its acknowledgements may concern
// their records), is removed; a new segment starts when the current one
// is large. Records the server refused are copied to "rejected/" (and
// fsynced there) before they are acknowledged: the data is kept for the
// user, never dropped silently.
//
// Records of the first format (one "SEQ.rec" file each, see readRecord)
// left by an earlier version are replayed too.
type journal struct {
	dir  string
	kick chan struct{} // a record awaits a commit

	mu       sync.Mutex
	segs     []*segment // oldest first; the last is the one appended to (if it is not a v1 record)
	cur      *segment   // the segment appended to, nil until the first write
	nextSeg  uint64     // number of the next segment
	dirDirty bool       // segments made or removed since the last commit
	closed   bool       // close was called: nothing more is appended
	closing  []*os.File // removed segments' files, closed by the next commit

	commitMu sync.Mutex // one commit at a time: a commit returns once all before it are durable

	// onSync, if set (by tests), is called with the name of each file
	// or directory a commit fsyncs, after the fsync.
	onSync func(name string)
}

// A segment is one file of the log (or a record file of the first
// format, v1).
type segment struct {
	name  string
	f     *os.File
	size  int64 // bytes appended so far
	live  int   // records not yet acknowledged
	dirty bool  // appended to since the last commit
	v1    bool  // a "SEQ.rec" file of the first format: one record
	gone  bool  // removed
}

// commitInterval bounds how long a record written by close() may stay
// in the page cache only (lost by a power loss, not by a crash of the
// client) before the group commit fsyncs it.
const commitInterval = 200 * time.Millisecond

const (
	journalMagic = "zxjournal 1\n" // a v1 record file, and a rejected record
	segMagic     = "zxjournal 2\n" // a log segment
	entryMagic   = "ZXJ2"
	frameLen     = 24
	// segMax is the size from which the next record starts a new
	// segment, so that acknowledged records' space is given back.
	segMax = 8 << 20
	// maxHeader bounds a header read from the disk.
	maxHeader = 1 << 20
)

const (
	kindWrite = 'W'
	kindAck   = 'A'
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Op is one write of a write-back record: data (Len bytes, taken in
// order from the record's data) put at Off, or, with Trunc, a resize of
// the file to Off. Whole means the first op replaces the whole file (a
// create-or-truncate put carrying the new size).
type Op struct {
	Off   int64 `json:"off"`
	Len   int64 `json:"len,omitempty"`
	Trunc bool  `json:"trunc,omitempty"`
	Whole bool  `json:"whole,omitempty"`
}

// record is the header of one journal record.
type record struct {
	Seq     uint64 `json:"seq"`
	Path    string `json:"path"`
	Ops     []Op   `json:"ops"`
	DataLen int64  `json:"datalen"`
	Sum     string `json:"sum,omitempty"` // v1 records: sha256 of the data
	// Change, if set, is a change of the name space or of attributes
	// (no ops, no data) rather than written data.
	Change *Change `json:"change,omitempty"`
	// Caller, if set, is the user the record's requests are made for
	// (a mount shared by several users).
	Caller *zx.Caller `json:"caller,omitempty"`
	// Under is the path of the delegation the record was made under
	// ("" for none): replayed after the delegation may have been
	// revoked, it is checked against what others changed since.
	Under string `json:"under,omitempty"`

	seg     *segment // where it is
	dataOff int64    // where its data starts in the segment's file
}

func openJournal(dir string) (*journal, error) {
	for _, d := range []string{dir, filepath.Join(dir, "bad"), filepath.Join(dir, "rejected")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("write-back journal: %w", err)
		}
	}
	return &journal{dir: dir, kick: make(chan struct{}, 1)}, nil
}

func recName(seq uint64) string { return fmt.Sprintf("%020d.rec", seq) }
func segName(n uint64) string   { return fmt.Sprintf("%020d.log", n) }

// frame returns the frame of an entry of kind with header hdr and data.
func frame(kind byte, hdr, data []byte) []byte {
	b := make([]byte, frameLen, frameLen+len(hdr))
	copy(b, entryMagic)
	b[4] = kind
	binary.LittleEndian.PutUint32(b[8:], uint32(len(hdr)))
	binary.LittleEndian.PutUint64(b[12:], uint64(len(data)))
	c := crc32.Update(0, castagnoli, b[:20])
	c = crc32.Update(c, castagnoli, hdr)
	c = crc32.Update(c, castagnoli, data)
	binary.LittleEndian.PutUint32(b[20:], c)
	return append(b, hdr...)
}

// appendLocked appends an entry to the current segment, starting one
// if needed, and returns the segment and the offset of the entry's
// data. j.mu is held: entries are appended whole, one after another, so
// that a crash of the client leaves no hole before an entry close()
// returned for.
func (j *journal) appendLocked(kind byte, hdr, data []byte) (*segment, int64, error) {
	if j.closed {
		return nil, 0, errors.New("journal closed")
	}
	if j.cur == nil || j.cur.size >= segMax && kind == kindWrite {
		if err := j.startSegment(); err != nil {
			return nil, 0, err
		}
	}
	s := j.cur
	head := frame(kind, hdr, data)
	iov := [][]byte{head, data}
	off := s.size
	for n := int64(len(head) + len(data)); n > 0; {
		w, err := unix.Pwritev(int(s.f.Fd()), iov, off)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			// Cut the torn entry off, so the next one follows
			// the last whole one.
			s.f.Truncate(s.size)
			return nil, 0, &fs.PathError{Op: "pwritev", Path: s.name, Err: err}
		}
		off += int64(w)
		n -= int64(w)
		for w > 0 && len(iov) > 0 {
			k := min(w, len(iov[0]))
			iov[0] = iov[0][k:]
			w -= k
			if len(iov[0]) == 0 {
				iov = iov[1:]
			}
		}
	}
	dataOff := s.size + int64(len(head))
	s.size = off
	s.dirty = true
	return s, dataOff, nil
}

// startSegment starts a new segment to append to. j.mu is held.
func (j *journal) startSegment() error {
	j.nextSeg++
	name := filepath.Join(j.dir, segName(j.nextSeg))
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write([]byte(segMagic)); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	s := &segment{name: name, f: f, size: int64(len(segMagic)), dirty: true}
	j.segs = append(j.segs, s)
	j.cur = s
	j.dirDirty = true
	j.gcLocked()
	return nil
}

// write appends a record: when it returns, the record survives a crash
// of the client, and the next commit makes it survive a power loss.
func (j *journal) write(r *record, data []byte) error {
	r.DataLen = int64(len(data))
	hdr, err := json.Marshal(r)
	if err != nil {
		return err
	}
	j.mu.Lock()
	s, off, err := j.appendLocked(kindWrite, hdr, data)
	if err == nil {
		s.live++
		r.seg, r.dataOff = s, off
	}
	j.mu.Unlock()
	if err != nil {
		return fmt.Errorf("write-back journal: %w", err)
	}
	select {
	case j.kick <- struct{}{}:
	default:
	}
	return nil
}

// committer runs the group commit until ctx is done: after a record is
// written, it waits commitInterval (gathering the records written
// meanwhile) and commits them all.
func (j *journal) committer(ctx context.Context, log *slog.Logger) {
	t := time.NewTimer(0)
	<-t.C
	for {
		select {
		case <-ctx.Done():
			return
		case <-j.kick:
		}
		t.Reset(commitInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if err := j.commit(); err != nil {
			log.Error("cache: "+err.Error(), "journal", j.dir)
		}
	}
}

// commit makes the entries appended before it survive a power loss: it
// fdatasyncs each segment appended to since the last commit (one for a
// batch of records, usually), and then the directory if segments were
// made or removed.
func (j *journal) commit() error {
	j.commitMu.Lock()
	defer j.commitMu.Unlock()
	j.mu.Lock()
	var segs []*segment
	for _, s := range j.segs {
		if s.dirty && !s.gone {
			s.dirty = false
			segs = append(segs, s)
		}
	}
	dir := j.dirDirty
	j.dirDirty = false
	closing := j.closing
	j.closing = nil
	j.mu.Unlock()
	var errs []error
	// A segment removed meanwhile keeps its file open until the next
	// commit (this one's closing list is from before the snapshot), so
	// the descriptor is still its own.
	for _, s := range segs {
		if err := unix.Fdatasync(int(s.f.Fd())); err != nil {
			errs = append(errs, &fs.PathError{Op: "fdatasync", Path: s.name, Err: err})
			j.mu.Lock()
			s.dirty = true // try again next time
			j.mu.Unlock()
			continue
		}
		if j.onSync != nil {
			j.onSync(s.name)
		}
	}
	if dir {
		if err := j.fsync(j.dir, true); err != nil {
			errs = append(errs, err)
			j.mu.Lock()
			j.dirDirty = true
			j.mu.Unlock()
		}
	}
	for _, f := range closing {
		f.Close()
	}
	if len(errs) > 0 {
		return fmt.Errorf("write-back journal: commit: %w", errors.Join(errs...))
	}
	return nil
}

// fsync flushes the file or directory name to the disk.
func (j *journal) fsync(name string, dir bool) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	if dir {
		err = f.Sync()
	} else {
		err = unix.Fdatasync(int(f.Fd()))
		if err != nil {
			err = &fs.PathError{Op: "fdatasync", Path: name, Err: err}
		}
	}
	f.Close()
	if err == nil && j.onSync != nil {
		j.onSync(name)
	}
	return err
}

// done acknowledges a record the server has: it will not be replayed.
func (j *journal) done(r *record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ackLocked(r)
}

// ackLocked appends r's acknowledgement (a v1 record's file is removed
// instead) and removes the segments no longer needed. j.mu is held.
func (j *journal) ackLocked(r *record) error {
	s := r.seg
	if s == nil || s.gone || j.closed {
		// Closed: the record stays, replayed by the next session
		// (docs/cache.md, the known limit).
		return nil
	}
	if !s.v1 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], r.Seq)
		if _, _, err := j.appendLocked(kindAck, b[:], nil); err != nil {
			return fmt.Errorf("write-back journal: %w", err)
		}
	}
	s.live--
	j.gcLocked()
	return nil
}

// gcLocked removes the oldest segments while all their records are
// acknowledged (their acknowledgements are in them or after them; a
// later segment's acknowledgements may concern an earlier one's records,
// so segments go oldest first), and v1 record files whose record is.
// j.mu is held.
func (j *journal) gcLocked() {
	keep := j.segs[:0]
	oldest := true
	for _, s := range j.segs {
		switch {
		case s.v1 && s.live <= 0:
			j.remove(s)
			continue
		case s.v1:
			keep = append(keep, s)
			continue
		}
		if oldest && s.live <= 0 && s != j.cur {
			j.remove(s)
			continue
		}
		oldest = false
		keep = append(keep, s)
	}
	clear(j.segs[len(keep):])
	j.segs = keep
}

// remove removes segment s's file; the file is closed by the next commit.
// j.mu is held.
func (j *journal) remove(s *segment) {
	os.Remove(s.name)
	s.gone = true
	j.dirDirty = true
	if s.f != nil {
		j.closing = append(j.closing, s.f)
	}
}

// reject copies a record the server refused to rejected/ (made durable
// at once: rare, and off the close path), then acknowledges it. It
// returns where the data is.
func (j *journal) reject(r *record) string {
	to := filepath.Join(j.dir, "rejected", recName(r.Seq))
	data := make([]byte, r.DataLen)
	_, err := io.ReadFull(r.section(0, r.DataLen), data)
	if err == nil {
		sum := sha256.Sum256(data)
		h := *r
		h.Sum = hex.EncodeToString(sum[:])
		var hdr []byte
		if hdr, err = json.Marshal(&h); err == nil {
			err = writeFileAtomic(filepath.Dir(to), filepath.Base(to), journalMagic, hdr, data)
		}
	}
	if err != nil {
		// Kept in the journal, replayed by the next session.
		return r.seg.name
	}
	j.fsync(to, false)
	j.fsync(filepath.Dir(to), true)
	j.done(r)
	return to
}

// close closes the journal's files, removing the segments whose records
// are all acknowledged. Commit first.
func (j *journal) close() {
	j.commitMu.Lock()
	defer j.commitMu.Unlock()
	j.mu.Lock()
	defer j.mu.Unlock()
	if cur := j.cur; cur != nil && cur.live <= 0 {
		j.cur = nil
		j.gcLocked()
		if !cur.gone && len(j.segs) == 1 {
			j.remove(cur)
			j.segs = nil
		}
	}
	for _, s := range j.segs {
		if s.f != nil {
			s.f.Close()
		}
	}
	for _, f := range j.closing {
		f.Close()
	}
	j.segs, j.closing, j.cur = nil, nil, nil
	j.closed = true
	if j.dirDirty {
		if d, err := os.Open(j.dir); err == nil {
			d.Sync()
			d.Close()
		}
	}
}

// load returns the complete records in the journal not yet acknowledged,
// in sequence order, and the largest sequence number seen. Temporaries of
// the first format (a crash while writing a record, before close()
// returned) are removed; what fails its checksum is moved to bad/.
func (j *journal) load() ([]*record, uint64, []error) {
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, 0, []error{err}
	}
	var recs []*record
	var errs []error
	acked := map[uint64]bool{}
	var maxSeq uint64
	for _, e := range ents {
		name := e.Name()
		full := filepath.Join(j.dir, name)
		switch {
		case strings.HasPrefix(name, "tmp-"):
			os.Remove(full)
		case !e.Type().IsRegular():
		case strings.HasSuffix(name, ".log"):
			n, err := strconv.ParseUint(strings.TrimSuffix(name, ".log"), 10, 64)
			if err != nil {
				continue
			}
			j.nextSeg = max(j.nextSeg, n)
			s, rs, acks, err := j.readSegment(full)
			if err != nil {
				errs = append(errs, fmt.Errorf("write-back journal: %s: %v", name, err))
			}
			if s == nil {
				continue
			}
			for _, seq := range acks {
				acked[seq] = true
				maxSeq = max(maxSeq, seq)
			}
			recs = append(recs, rs...)
			j.segs = append(j.segs, s)
		case strings.HasSuffix(name, ".rec"):
			r, err := readRecord(full)
			if err != nil {
				errs = append(errs, fmt.Errorf("write-back journal: %s: %v (moved to bad/)", name, err))
				os.Rename(full, filepath.Join(j.dir, "bad", name))
				continue
			}
			r.seg.live = 1
			recs = append(recs, r)
			j.segs = append(j.segs, r.seg)
		}
	}
	live := recs[:0]
	for _, r := range recs {
		maxSeq = max(maxSeq, r.Seq)
		if acked[r.Seq] && !r.seg.v1 {
			r.seg.live--
			continue
		}
		live = append(live, r)
	}
	clear(recs[len(live):])
	slices.SortFunc(live, func(a, b *record) int { return compareSeq(a.Seq, b.Seq) })
	j.mu.Lock()
	j.gcLocked()
	j.mu.Unlock()
	return live, maxSeq, errs
}

// readSegment reads the log segment file: its write entries (each with
// live 1 in the segment) and acknowledgements, up to the first entry that
// fails its check, whose bytes and the rest are moved to bad/ (the
// segment is cut there). It returns the segment with its file open, or
// nil if the file is not a segment.
func (j *journal) readSegment(file string) (*segment, []*record, []uint64, error) {
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	size := fi.Size()
	s := &segment{name: file, f: f, size: size}
	magic := make([]byte, len(segMagic))
	if _, err := f.ReadAt(magic, 0); err != nil || string(magic) != segMagic {
		// Empty or cut in its first line: what a power loss leaves of
		// a segment just made. Nothing in it was committed.
		return s, nil, nil, j.cutSegment(s, 0, "not a journal segment")
	}
	var recs []*record
	var acks []uint64
	off := int64(len(segMagic))
	fr := make([]byte, frameLen)
	for off < size {
		r, ack, n, why := readEntry(f, off, size, fr)
		if why != "" {
			return s, recs, acks, j.cutSegment(s, off, why)
		}
		switch {
		case r != nil:
			r.seg = s
			s.live++
			recs = append(recs, r)
		default:
			acks = append(acks, ack)
		}
		off += n
	}
	return s, recs, acks, nil
}

// readEntry reads and checks the entry at off of f (size bytes long).
// It returns the record or the acknowledged sequence number, the entry's
// length, or why it is not a whole, valid entry.
func readEntry(f *os.File, off, size int64, fr []byte) (*record, uint64, int64, string) {
	if size-off < frameLen {
		return nil, 0, 0, "entry cut short"
	}
	if _, err := f.ReadAt(fr, off); err != nil {
		return nil, 0, 0, err.Error()
	}
	if string(fr[:4]) != entryMagic {
		return nil, 0, 0, "no entry"
	}
	kind := fr[4]
	hlen := int64(binary.LittleEndian.Uint32(fr[8:]))
	dlen := int64(binary.LittleEndian.Uint64(fr[12:]))
	if hlen > maxHeader || dlen < 0 || dlen > size || off+frameLen+hlen+dlen > size {
		return nil, 0, 0, "entry cut short"
	}
	hdr := make([]byte, hlen)
	if _, err := f.ReadAt(hdr, off+frameLen); err != nil {
		return nil, 0, 0, err.Error()
	}
	c := crc32.Update(0, castagnoli, fr[:20])
	c = crc32.Update(c, castagnoli, hdr)
	hc := crc32Continue{c: c}
	if _, err := io.Copy(&hc, io.NewSectionReader(f, off+frameLen+hlen, dlen)); err != nil {
		return nil, 0, 0, err.Error()
	}
	if hc.c != binary.LittleEndian.Uint32(fr[20:]) {
		return nil, 0, 0, "checksum mismatch"
	}
	n := frameLen + hlen + dlen
	switch kind {
	case kindAck:
		if hlen != 8 || dlen != 0 {
			return nil, 0, 0, "bad acknowledgement"
		}
		return nil, binary.LittleEndian.Uint64(hdr), n, ""
	case kindWrite:
		r := &record{}
		if err := json.Unmarshal(hdr, r); err != nil {
			return nil, 0, 0, fmt.Sprintf("header: %v", err)
		}
		if r.DataLen != dlen {
			return nil, 0, 0, "data length does not match the header"
		}
		if why := r.check(); why != "" {
			return nil, 0, 0, why
		}
		r.dataOff = off + frameLen + hlen
		return r, 0, n, ""
	}
	return nil, 0, 0, "unknown entry"
}

// crc32Continue is a CRC-32C that continues from c.
type crc32Continue struct{ c uint32 }

func (h *crc32Continue) Write(p []byte) (int, error) {
	h.c = crc32.Update(h.c, castagnoli, p)
	return len(p), nil
}

// cutSegment moves the bytes of s from off on to bad/ and cuts s there.
func (j *journal) cutSegment(s *segment, off int64, why string) error {
	n := s.size - off
	if n <= 0 {
		return nil
	}
	bad := filepath.Join(j.dir, "bad", fmt.Sprintf("%s-%d", filepath.Base(s.name), off))
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, off); err != nil && err != io.EOF {
		return fmt.Errorf("at %d: %s; reading the rest: %v", off, why, err)
	}
	if err := os.WriteFile(bad, b, 0o600); err != nil {
		return fmt.Errorf("at %d: %s; saving the rest: %v", off, why, err)
	}
	if err := s.f.Truncate(off); err != nil {
		return fmt.Errorf("at %d: %s; cutting: %v", off, why, err)
	}
	s.size = off
	return fmt.Errorf("at %d: %s (the %d bytes from there moved to %s)", off, why, n, bad)
}

// check checks a record's header.
func (r *record) check() string {
	if _, err := zx.CleanPath(r.Path); err != nil || r.Path == "/" {
		return fmt.Sprintf("bad path %q", r.Path)
	}
	var n int64
	for _, op := range r.Ops {
		if op.Off < 0 || op.Len < 0 {
			return "bad op"
		}
		n += op.Len
	}
	if n != r.DataLen {
		return "ops do not cover the data"
	}
	if c := r.Change; c != nil {
		switch {
		case len(r.Ops) > 0:
			return "a change with data"
		case c.Op == "move":
			if t, err := zx.CleanPath(c.To); err != nil || t == "/" {
				return fmt.Sprintf("bad target %q", c.To)
			}
		case c.Op != "put" && c.Op != "remove" && c.Op != "wstat":
			return fmt.Sprintf("unknown change %q", c.Op)
		}
	}
	return ""
}

// readRecord reads and checks the record in file, of the first format:
//
//	zxjournal 1\n
//	{JSON header: seq, path, ops, data length, sha256 of the data}\n
//	data
//
// (what rejected/ holds too). It returns it in a v1 segment of its own.
func readRecord(file string) (*record, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	rest, ok := bytes.CutPrefix(b, []byte(journalMagic))
	if !ok {
		return nil, errors.New("not a journal record")
	}
	hdr, data, ok := bytes.Cut(rest, []byte("\n"))
	if !ok {
		return nil, errors.New("truncated header")
	}
	r := &record{}
	if err := json.Unmarshal(hdr, r); err != nil {
		return nil, fmt.Errorf("header: %v", err)
	}
	if int64(len(data)) != r.DataLen {
		return nil, fmt.Errorf("data is %d bytes, header says %d", len(data), r.DataLen)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != r.Sum {
		return nil, errors.New("checksum mismatch")
	}
	if why := r.check(); why != "" {
		return nil, errors.New(why)
	}
	if base := filepath.Base(file); base != recName(r.Seq) {
		if s, err := strconv.ParseUint(strings.TrimSuffix(base, ".rec"), 10, 64); err != nil || s != r.Seq {
			return nil, errors.New("sequence number does not match the name")
		}
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	r.seg = &segment{name: file, f: f, size: int64(len(b)), v1: true}
	r.dataOff = int64(len(journalMagic) + len(hdr) + 1)
	return r, nil
}

// section returns a reader of n bytes of r's data from offset off.
func (r *record) section(off, n int64) io.Reader {
	return io.NewSectionReader(r.seg.f, r.dataOff+off, n)
}

// JournalPending returns the paths of the records in the write-back
// journal dir not yet acknowledged by the server (one per record, in
// sequence order), reading it without changing it: what the next mount
// with this journal will replay.
func JournalPending(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	acked := map[uint64]bool{}
	var recs []*record
	for _, e := range ents {
		full := filepath.Join(dir, e.Name())
		switch {
		case !e.Type().IsRegular():
		case strings.HasSuffix(e.Name(), ".log"):
			f, err := os.Open(full)
			if err != nil {
				return nil, err
			}
			fi, err := f.Stat()
			if err != nil {
				f.Close()
				return nil, err
			}
			fr := make([]byte, frameLen)
			for off := int64(len(segMagic)); off < fi.Size(); {
				r, ack, n, why := readEntry(f, off, fi.Size(), fr)
				if why != "" {
					break
				}
				if r != nil {
					recs = append(recs, r)
				} else {
					acked[ack] = true
				}
				off += n
			}
			f.Close()
		case strings.HasSuffix(e.Name(), ".rec"):
			if r, err := readRecord(full); err == nil {
				r.seg.f.Close()
				recs = append(recs, r)
			}
		}
	}
	slices.SortFunc(recs, func(a, b *record) int { return compareSeq(a.Seq, b.Seq) })
	var ps []string
	for _, r := range recs {
		if !acked[r.Seq] {
			ps = append(ps, r.Path)
		}
	}
	return ps, nil
}
