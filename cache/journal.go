package cache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
// for. Each record is one file, "NNNNNNNNNNNNNNNNNNNN.rec" (its sequence
// number), holding:
//
//	zxjournal 1\n
//	{JSON header: seq, path, ops, data length, sha256 of the data}\n
//	data
//
// written to "tmp-*" in the same directory and renamed into place, without
// fsync: close() in write-back mode is as durable as close() on a local
// disk. Once renamed, a record survives a crash or kill of the client (its
// data is in the kernel's page cache); a background group commit (commit,
// at most every commitInterval) then fsyncs the records written since the
// last one and the directory, once per batch, so that they survive a power
// loss too (a large batch with one syncfs). A record caught by a power loss before its commit may be
// empty or torn: its checksum fails and it is moved to "bad/", as is any
// record whose checksum fails. Leftover temporaries (a crash while writing
// a record, before close returned) are removed on open. Records the
// server refused are moved to "rejected/" (and fsynced there): the data is
// kept for the user, never dropped silently.
type journal struct {
	dir  string
	kick chan struct{} // a record awaits a commit

	mu       sync.Mutex
	unsynced []string // records renamed into place since the last commit

	commitMu sync.Mutex // one commit at a time: a commit returns once all before it are durable

	// onSync, if set (by tests), is called with the name of each file
	// or directory a commit fsyncs, after the fsync.
	onSync func(name string)
}

// commitInterval bounds how long a record written by close() may stay
// in the page cache only (lost by a power loss, not by a crash of the
// client) before the group commit fsyncs it.
const commitInterval = 200 * time.Millisecond

const journalMagic = "zxjournal 1\n"

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
	Sum     string `json:"sum"`

	file    string // the record's file
	dataOff int64  // where its data starts in the file
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

// write stores a record: when it returns, the record survives a crash of
// the client, and the next commit makes it survive a power loss. It
// returns the record's file, open; the caller closes it.
func (j *journal) write(r *record, data []byte) (*os.File, error) {
	sum := sha256.Sum256(data)
	r.DataLen = int64(len(data))
	r.Sum = hex.EncodeToString(sum[:])
	hdr, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	name := recName(r.Seq)
	f, err := createAtomic(j.dir, name, journalMagic, hdr, data)
	if err != nil {
		return nil, fmt.Errorf("write-back journal: %w", err)
	}
	full := filepath.Join(j.dir, name)
	r.file = full
	r.dataOff = int64(len(journalMagic) + len(hdr) + 1)
	j.mu.Lock()
	j.unsynced = append(j.unsynced, full)
	j.mu.Unlock()
	select {
	case j.kick <- struct{}{}:
	default:
	}
	return f, nil
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

// commit makes the records written before it survive a power loss: it
// fsyncs (fdatasync) each of them that is still in the journal (a record
// acknowledged meanwhile is gone: the server has its data) and then the
// directory; or, for a batch of more than syncfsBatch records, flushes the
// journal's file system once (syncfs).
func (j *journal) commit() error {
	j.commitMu.Lock()
	defer j.commitMu.Unlock()
	j.mu.Lock()
	names := j.unsynced
	j.unsynced = nil
	j.mu.Unlock()
	if len(names) == 0 {
		return nil
	}
	var errs []error
	if len(names) > syncfsBatch {
		// One flush of the journal's file system for the whole batch
		// (what the kernel offers as a group commit) rather than one
		// journal commit of the file system per record.
		if err := j.syncfs(names); err != nil {
			return fmt.Errorf("write-back journal: commit: %w", err)
		}
		return nil
	}
	for _, name := range names {
		if err := j.fsync(name, false); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	// The records' names (and the removal of acknowledged ones).
	if err := j.fsync(j.dir, true); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("write-back journal: commit: %w", errors.Join(errs...))
	}
	return nil
}

// syncfsBatch is the size of a batch above which a commit flushes the
// journal's file system (syncfs) instead of each record.
const syncfsBatch = 16

// syncfs flushes the file system of the journal, which holds the records
// names.
func (j *journal) syncfs(names []string) error {
	d, err := os.Open(j.dir)
	if err != nil {
		return err
	}
	err = unix.Syncfs(int(d.Fd()))
	d.Close()
	if err != nil {
		return &fs.PathError{Op: "syncfs", Path: j.dir, Err: err}
	}
	if j.onSync != nil {
		for _, name := range names {
			if _, err := os.Stat(name); err == nil {
				j.onSync(name)
			}
		}
		j.onSync(j.dir)
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

// done removes an acknowledged record.
func (j *journal) done(r *record) {
	os.Remove(r.file)
}

// reject moves a record the server refused aside, keeping its data.
func (j *journal) reject(r *record) string {
	to := filepath.Join(j.dir, "rejected", filepath.Base(r.file))
	if err := os.Rename(r.file, to); err != nil {
		return r.file
	}
	// Rare: made durable at once, off the close path.
	j.fsync(to, false)
	j.fsync(filepath.Dir(to), true)
	return to
}

// load returns the complete records in the journal, in sequence order.
// Temporaries (a crash while writing a record, before close() returned)
// are removed; records that fail their checksum are moved to bad/.
func (j *journal) load() ([]*record, []error) {
	ents, err := os.ReadDir(j.dir)
	if err != nil {
		return nil, []error{err}
	}
	var recs []*record
	var errs []error
	for _, e := range ents {
		name := e.Name()
		full := filepath.Join(j.dir, name)
		switch {
		case strings.HasPrefix(name, "tmp-"):
			os.Remove(full)
			continue
		case !strings.HasSuffix(name, ".rec") || !e.Type().IsRegular():
			continue
		}
		r, err := readRecord(full)
		if err != nil {
			errs = append(errs, fmt.Errorf("write-back journal: %s: %v (moved to bad/)", name, err))
			os.Rename(full, filepath.Join(j.dir, "bad", name))
			continue
		}
		recs = append(recs, r)
	}
	slices.SortFunc(recs, func(a, b *record) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	return recs, errs
}

// readRecord reads and checks the record in file.
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
	if _, err := zx.CleanPath(r.Path); err != nil || r.Path == "/" {
		return nil, fmt.Errorf("bad path %q", r.Path)
	}
	var n int64
	for _, op := range r.Ops {
		if op.Off < 0 || op.Len < 0 {
			return nil, errors.New("bad op")
		}
		n += op.Len
	}
	if n != r.DataLen {
		return nil, errors.New("ops do not cover the data")
	}
	if base := filepath.Base(file); base != recName(r.Seq) {
		if s, err := strconv.ParseUint(strings.TrimSuffix(base, ".rec"), 10, 64); err != nil || s != r.Seq {
			return nil, errors.New("sequence number does not match the name")
		}
	}
	r.file = file
	r.dataOff = int64(len(journalMagic) + len(hdr) + 1)
	return r, nil
}

// section returns a reader of n bytes of r's data from offset off.
func (r *record) section(f *os.File, off, n int64) io.Reader {
	return io.NewSectionReader(f, r.dataOff+off, n)
}
