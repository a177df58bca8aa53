package cache

import (
	"bufio"
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zxfs/zx"
)

// The disk cache keeps whole-file data in Options.Dir, persistent across
// sessions and bounded by Options.DiskBytes (LRU, by last use). Each
// cached file is one file named after a hash of its path, holding:
//
//	zxcache 1\n
//	{JSON header: path, size, mtime, ino, data length, sha256 of the data}\n
//	data
//
// written to "tmp-*" and renamed into place, not fsynced: it is only a
// cache, and its checksum decides. A crash of the client leaves either the
// old file, the new one, or a temporary removed on the next open; a power
// loss may leave a file whose data never reached the disk (empty, or
// torn), whose header or checksum then does not check: it is ignored and
// removed. A file's data is used only while the cache's entry for the path
// has the header's size, mtime and ino; at open, the whole index is
// revalidated against the server with one Find (see revalidate).
type disk struct {
	dir  string
	max  int64
	idx  map[string]*dfile // by path; c.mu
	lru  list.List         // of *dfile, most recent first; c.mu
	used int64             // c.mu
	wq   chan dwrite
	done chan struct{}
	ok   bool // revalidated against the server: entries may be used
}

type dfile struct {
	hdr  dheader
	name string // file name in dir
	el   *list.Element
}

type dheader struct {
	Path  string `json:"path"`
	Size  string `json:"size"`
	Mtime string `json:"mtime"`
	Ino   string `json:"ino,omitempty"`
	Len   int64  `json:"len"`
	Sum   string `json:"sum"`
}

type dwrite struct {
	p    string
	d    zx.Dir
	data []byte
}

const diskMagic = "zxcache 1\n"

func diskName(p string) string {
	h := sha256.Sum256([]byte(p))
	return hex.EncodeToString(h[:16])
}

func matches(h *dheader, d zx.Dir) bool {
	return d != nil && h.Size == d[zx.ASize] && h.Mtime == d[zx.AMtime] && (h.Ino == "" || d[zx.AIno] == "" || h.Ino == d[zx.AIno])
}

// openDisk loads the index of the disk cache (headers only) and starts
// its writer. Entries are not used before revalidate.
func (c *Cache) openDisk() error {
	if c.opts.DiskBytes <= 0 {
		c.opts.DiskBytes = 1 << 30
	}
	dir := c.opts.Dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("disk cache: %w", err)
	}
	dk := &disk{dir: dir, max: c.opts.DiskBytes, idx: make(map[string]*dfile), wq: make(chan dwrite, 64), done: make(chan struct{})}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("disk cache: %w", err)
	}
	type loaded struct {
		f  *dfile
		at time.Time
	}
	var ls []loaded
	for _, e := range ents {
		full := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), "tmp-") {
			os.Remove(full)
			continue
		}
		if !e.Type().IsRegular() {
			continue
		}
		h, err := readHeader(full)
		if err != nil || diskName(h.Path) != e.Name() {
			c.log.Warn("cache: ignoring a bad disk cache file", "file", full, "err", err)
			os.Remove(full)
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		ls = append(ls, loaded{&dfile{hdr: *h, name: e.Name()}, info.ModTime()})
	}
	slices.SortFunc(ls, func(a, b loaded) int { return b.at.Compare(a.at) })
	for _, l := range ls {
		l.f.el = dk.lru.PushBack(l.f)
		dk.idx[l.f.hdr.Path] = l.f
		dk.used += l.f.hdr.Len
	}
	c.disk = dk
	c.evictDisk()
	go c.diskWriter(dk.wq)
	return nil
}

func (c *Cache) closeDisk() {
	if c.disk == nil {
		return
	}
	c.mu.Lock()
	wq := c.disk.wq
	c.disk.wq = nil
	c.mu.Unlock()
	if wq != nil {
		close(wq)
		<-c.disk.done
	}
}

// readHeader reads the header of the cache file at name.
func readHeader(name string) (*dheader, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 4096)
	magic := make([]byte, len(diskMagic))
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != diskMagic {
		return nil, errors.New("not a zx cache file")
	}
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, errors.New("truncated header")
	}
	h := &dheader{}
	if err := json.Unmarshal(line, h); err != nil {
		return nil, fmt.Errorf("header: %v", err)
	}
	return h, nil
}

// readDiskFile reads and checks the data of the cache file at name
// against its header h.
func readDiskFile(name string, h *dheader) ([]byte, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	rest, ok := bytes.CutPrefix(b, []byte(diskMagic))
	if !ok {
		return nil, errors.New("not a zx cache file")
	}
	_, data, ok := bytes.Cut(rest, []byte("\n"))
	if !ok || int64(len(data)) != h.Len {
		return nil, errors.New("truncated")
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != h.Sum {
		return nil, errors.New("checksum mismatch")
	}
	return data, nil
}

// storeDisk queues data, the contents of the file whose entry is d, to be
// written to the disk cache. c.mu is held.
func (c *Cache) storeDisk(p string, d zx.Dir, data []byte) {
	dk := c.disk
	if dk == nil || dk.wq == nil || int64(len(data)) > dk.max {
		return
	}
	if f := dk.idx[p]; f != nil && matches(&f.hdr, d) {
		return // already there
	}
	select {
	case dk.wq <- dwrite{p: p, d: d, data: data}:
	default: // the disk is behind: skip this one
	}
}

// diskWriter writes what storeDisk queues on wq (dk.wq, which closeDisk
// clears under c.mu: it is passed, not read here).
func (c *Cache) diskWriter(wq <-chan dwrite) {
	dk := c.disk
	defer close(dk.done)
	for w := range wq {
		sum := sha256.Sum256(w.data)
		h := dheader{Path: w.p, Size: w.d[zx.ASize], Mtime: w.d[zx.AMtime], Ino: w.d[zx.AIno], Len: int64(len(w.data)), Sum: hex.EncodeToString(sum[:])}
		name := diskName(w.p)
		if err := writeDiskFile(dk.dir, name, &h, w.data); err != nil {
			c.log.Warn("cache: writing the disk cache", "path", w.p, "err", err)
			continue
		}
		c.mu.Lock()
		if old := dk.idx[w.p]; old != nil {
			dk.lru.Remove(old.el)
			dk.used -= old.hdr.Len
		}
		f := &dfile{hdr: h, name: name}
		f.el = dk.lru.PushFront(f)
		dk.idx[w.p] = f
		dk.used += h.Len
		c.evictDisk()
		c.mu.Unlock()
	}
}

func writeDiskFile(dir, name string, h *dheader, data []byte) error {
	hdr, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return writeFileAtomic(dir, name, diskMagic, hdr, data)
}

// writeFileAtomic writes magic, the header line hdr and data to dir/name,
// through a temporary in dir that is renamed into place, so that after a
// crash of this process the file is either whole or absent (the on-disk
// rule of the disk cache and of the write-back journal). It does not
// fsync: after a power loss the file may be empty or torn, which its
// reader detects with the checksum in hdr.
func writeFileAtomic(dir, name, magic string, hdr, data []byte) error {
	f, err := createAtomic(dir, name, magic, hdr, data)
	if err == nil {
		err = f.Close()
	}
	return err
}

// createAtomic is writeFileAtomic returning the file, open for reading
// and writing (the write-back queue reads its requests' data from it
// without opening it again). The caller closes it.
func createAtomic(dir, name, magic string, hdr, data []byte) (*os.File, error) {
	f, err := os.CreateTemp(dir, "tmp-*")
	if err != nil {
		return nil, err
	}
	// One write for a small file (most of them: a 256 KiB buffer per
	// file showed in tar -x's profile), two for a large one.
	head := make([]byte, 0, len(magic)+len(hdr)+1+min(len(data), 64<<10))
	head = append(append(append(head, magic...), hdr...), '\n')
	if len(data) <= 64<<10 {
		head, data = append(head, data...), nil
	}
	_, err = f.Write(head)
	if err == nil && len(data) > 0 {
		_, err = f.Write(data)
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return f, nil
}

// evictDisk removes the least recently used files while over the bound.
// c.mu is held.
func (c *Cache) evictDisk() {
	dk := c.disk
	for dk.used > dk.max && dk.lru.Len() > 0 {
		f := dk.lru.Back().Value.(*dfile)
		c.dropDisk(f)
	}
}

// dropDisk forgets f and removes its file. c.mu is held.
func (c *Cache) dropDisk(f *dfile) {
	dk := c.disk
	if dk.idx[f.hdr.Path] == f {
		delete(dk.idx, f.hdr.Path)
	}
	dk.lru.Remove(f.el)
	dk.used -= f.hdr.Len
	os.Remove(filepath.Join(dk.dir, f.name))
}

// diskData returns the data of the file at p, whose entry is d, from the
// disk cache, and keeps it in memory too. c.mu is not held.
func (c *Cache) diskData(p string, d zx.Dir) ([]byte, bool) {
	c.mu.Lock()
	dk := c.disk
	if dk == nil || !dk.ok {
		c.mu.Unlock()
		return nil, false
	}
	f := dk.idx[p]
	if f == nil || !matches(&f.hdr, d) {
		c.mu.Unlock()
		return nil, false
	}
	h, name := f.hdr, filepath.Join(dk.dir, f.name)
	c.mu.Unlock()
	data, err := readDiskFile(name, &h)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.log.Warn("cache: ignoring a bad disk cache file", "file", name, "err", err)
		if dk.idx[p] == f {
			c.dropDisk(f)
		}
		return nil, false
	}
	if dk.idx[p] == f {
		dk.lru.MoveToFront(f.el)
		now := time.Now()
		os.Chtimes(name, now, now) // the LRU order survives remounts
	}
	c.setData(p, d, data)
	c.stats.DiskHits++
	return data, true
}

// Revalidate checks the disk cache against the server with one Find of
// the whole tree: files whose size, mtime or inode changed, or that are
// gone, are dropped; the others may be used again. The entries the find
// returns are cached too (with complete listings), so the files it kept
// can be opened and read with no round trip. Called by Open; a failed
// find leaves the disk cache unused for this session.
func (c *Cache) revalidate(ctx context.Context) error {
	f, ok := c.remote.(zx.Finder)
	if !ok {
		return errors.New("disk cache: the remote cannot find; cached files are not used")
	}
	c.mu.Lock()
	s, ep, at := c.seq, c.epoch, time.Now()
	c.mu.Unlock()
	var ds []zx.Dir
	for it := range f.Find(ctx, "/", zx.FindOpts{}) {
		if it.Err != nil {
			return fmt.Errorf("disk cache: revalidating: %w", it.Err)
		}
		if it.Dir != nil {
			ds = append(ds, it.Dir)
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("disk cache: revalidating: %w", ctx.Err())
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	dk := c.disk
	byPath := make(map[string]zx.Dir, len(ds))
	kids := make(map[string]map[string]bool)
	for _, d := range ds {
		p := d.Path()
		byPath[p] = d
		if d.IsDir() && kids[p] == nil {
			kids[p] = make(map[string]bool)
		}
		if p != "/" {
			pp := zx.Parent(p)
			if kids[pp] == nil {
				kids[pp] = make(map[string]bool)
			}
			kids[pp][d.Name()] = true
		}
	}
	dropped := 0
	for p, f := range dk.idx {
		if d := byPath[p]; d == nil || d.Type() != zx.TypeFile || !matches(&f.hdr, d) {
			c.dropDisk(f)
			dropped++
		}
	}
	if dropped > 0 {
		c.log.Info("cache: disk cache revalidated", "dropped", dropped, "kept", len(dk.idx))
	}
	dk.ok = true
	if len(ds) > maxRevalEntries {
		return nil
	}
	w := c.watching && c.epoch == ep
	for _, d := range ds {
		p := d.Path()
		if c.changedSince(s, p, false) {
			continue
		}
		c.set(p, d, at, w)
	}
	for p, names := range kids {
		e := c.ents[p]
		if e == nil || e.d == nil || !e.d.IsDir() || c.changedSince(s, p, true) {
			continue
		}
		e.kids, e.listAt, e.listWtch = names, at, w
	}
	return nil
}

// maxRevalEntries bounds how many entries the revalidating find installs
// in the cache.
const maxRevalEntries = 200000
