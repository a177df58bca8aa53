// Package dump archives zx trees into a content-addressed store on local
// disk, one snapshot per run, and serves the store as a read-only zx tree.
//
// # The store
//
// A store is a directory:
//
//	blobs/ab/cdef...        file contents, named by their SHA-256 (hex):
//	                        the first two digits name a subdirectory
//	snap/TREE/YYYY/MMDD     one snapshot of the tree TREE, taken that day
//	snap/TREE/YYYY/MMDD.1   a second one the same day, then .2 ...
//	tmp/                    files being written
//
// A blob is written to tmp/, synced and linked into place, so it is
// complete or absent; a blob that exists is never written again, so
// contents are stored once whatever their paths and however many
// snapshots hold them. A snapshot is a manifest: gzipped JSON lines, a
// header and then one line per entry (directories too) with the entry's
// attributes and, for files and directories, a content hash in the
// attribute Sha256 (for a directory, a hash of its children's names,
// types, modes and hashes, so that a directory's hash changes when
// anything below it does). A snapshot is written at the end of a run,
// to tmp/, and linked into place under the first free name: a run that
// fails or is interrupted leaves no snapshot, and the earlier ones
// intact.
//
// See docs/dump.md.
package dump

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zxfs/zx"
)

// AHash is the attribute that holds the content hash (SHA-256, hex) of a
// file or a directory in snapshots and in the entries of FS. It is
// upper-case: a decoration, never stored by a tree.
const AHash = "Sha256"

// Format is the version of the manifest format.
const Format = 1

// Store is a dump store on local disk.
type Store struct {
	dir string
}

// OpenStore opens the store at dir, creating it if needed.
func OpenStore(dir string) (*Store, error) {
	for _, d := range []string{"blobs", "snap", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	return &Store{dir: dir}, nil
}

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// BlobPath returns the file that holds the blob with the given hash.
func (s *Store) BlobPath(sum string) string {
	if len(sum) < 3 {
		return filepath.Join(s.dir, "blobs", "_", sum)
	}
	return filepath.Join(s.dir, "blobs", sum[:2], sum[2:])
}

// HasBlob reports whether the blob with the given hash is stored.
func (s *Store) HasBlob(sum string) bool {
	if !validHash(sum) {
		return false
	}
	_, err := os.Stat(s.BlobPath(sum))
	return err == nil
}

func validHash(sum string) bool {
	if len(sum) != 64 {
		return false
	}
	_, err := hex.DecodeString(sum)
	return err == nil
}

// OpenBlob opens a stored blob.
func (s *Store) OpenBlob(sum string) (*os.File, error) {
	if !validHash(sum) {
		return nil, zx.E(zx.ErrIO, "", "", "bad content hash "+strconv.Quote(sum))
	}
	return os.Open(s.BlobPath(sum))
}

// tempFile creates a file in tmp/.
func (s *Store) tempFile(prefix string) (*os.File, error) {
	var b [8]byte
	rand.Read(b[:])
	return os.OpenFile(filepath.Join(s.dir, "tmp", prefix+hex.EncodeToString(b[:])), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
}

// cleanTemp removes temporary files left by runs that died, a day old
// or more.
func (s *Store) cleanTemp() {
	ents, _ := os.ReadDir(filepath.Join(s.dir, "tmp"))
	for _, e := range ents {
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
			os.Remove(filepath.Join(s.dir, "tmp", e.Name()))
		}
	}
}

// syncDir syncs a directory, so that a rename in it is durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// smallBlob is the size under which a blob is kept in memory until its
// hash is known, so that contents already stored are never written.
const smallBlob = 256 << 10

// blobWriter computes the hash of contents while it keeps them: in
// memory while they are small, in a temporary file after.
type blobWriter struct {
	s   *Store
	h   hash.Hash
	buf bytes.Buffer
	f   *os.File
	n   int64
	err error
}

func (s *Store) newBlob() *blobWriter { return &blobWriter{s: s, h: sha256.New()} }

func (w *blobWriter) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	w.h.Write(p)
	w.n += int64(len(p))
	if w.f == nil && w.buf.Len()+len(p) <= smallBlob {
		w.buf.Write(p)
		return len(p), nil
	}
	if w.f == nil {
		f, err := w.s.tempFile("blob-")
		if err != nil {
			w.err = err
			return 0, err
		}
		w.f = f
		if _, err := f.Write(w.buf.Bytes()); err != nil {
			w.err = err
			return 0, err
		}
		w.buf = bytes.Buffer{}
	}
	if _, err := w.f.Write(p); err != nil {
		w.err = err
		return 0, err
	}
	return len(p), nil
}

// abort discards the contents.
func (w *blobWriter) abort() {
	if w.f != nil {
		w.f.Close()
		os.Remove(w.f.Name())
		w.f = nil
	}
}

// commit stores the contents, unless a blob with the same hash exists,
// and returns the hash and whether a new blob was written.
func (w *blobWriter) commit() (sum string, created bool, err error) {
	if w.err != nil {
		w.abort()
		return "", false, w.err
	}
	sum = hex.EncodeToString(w.h.Sum(nil))
	dst := w.s.BlobPath(sum)
	if _, err := os.Stat(dst); err == nil {
		w.abort()
		return sum, false, nil
	}
	f := w.f
	if f == nil {
		if f, err = w.s.tempFile("blob-"); err != nil {
			return "", false, err
		}
		if _, err = f.Write(w.buf.Bytes()); err != nil {
			f.Close()
			os.Remove(f.Name())
			return "", false, err
		}
	}
	w.f = nil
	tmp := f.Name()
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		os.Chmod(tmp, 0o444)
		// A link, not a rename: it fails if another writer stored the
		// same contents meanwhile, so "created" is counted once.
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			err = os.Link(tmp, dst)
		}
	}
	os.Remove(tmp)
	if errors.Is(err, os.ErrExist) {
		return sum, false, nil
	}
	if err != nil {
		return "", false, err
	}
	return sum, true, nil
}

// Header is the first line of a snapshot.
type Header struct {
	Format  int       `json:"zxdump"`
	Tree    string    `json:"tree"`
	Source  string    `json:"source"` // the location dumped: zx://... or a local directory
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Entries int       `json:"entries"`
}

// Snapshot is a snapshot read from the store. Entry paths are paths in
// the tree dumped ("/" for its root).
type Snapshot struct {
	Header
	Name    string // YYYY/MMDD[.N]
	Entries []zx.Dir
	once    sync.Once
	byPath  map[string]zx.Dir
	kids    map[string][]string // sorted names, by directory path
}

// Lookup returns the entry at path p of the snapshot, or nil.
func (sn *Snapshot) Lookup(p string) zx.Dir {
	sn.index()
	return sn.byPath[p]
}

// Children returns the entries in the directory at path p, sorted by name.
func (sn *Snapshot) Children(p string) []zx.Dir {
	sn.index()
	names := sn.kids[p]
	ds := make([]zx.Dir, 0, len(names))
	for _, n := range names {
		ds = append(ds, sn.byPath[path.Join(p, n)])
	}
	return ds
}

func (sn *Snapshot) index() { sn.once.Do(sn.build) }

func (sn *Snapshot) build() {
	sn.byPath = make(map[string]zx.Dir, len(sn.Entries))
	sn.kids = make(map[string][]string)
	for _, d := range sn.Entries {
		p := d[zx.APath]
		sn.byPath[p] = d
		if p != "/" {
			dir := path.Dir(p)
			sn.kids[dir] = append(sn.kids[dir], path.Base(p))
		}
	}
	for _, k := range sn.kids {
		slices.Sort(k)
	}
}

// ValidTreeName reports whether name may name a tree in a store.
func ValidTreeName(name string) bool {
	if name == "" || name[0] == '.' || len(name) > zx.MaxName {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' || r == '+' || r == ':' || r == ',') {
			return false
		}
	}
	return true
}

// snapName is a parsed snapshot name: YYYY/MMDD or YYYY/MMDD.N.
type snapName struct {
	year, day string
	n         int
}

func parseSnapName(s string) (snapName, bool) {
	y, rest, ok := strings.Cut(s, "/")
	if !ok {
		return snapName{}, false
	}
	return parseSnapFile(y, rest)
}

// parseSnapFile parses the year directory and file name of a snapshot.
func parseSnapFile(y, f string) (snapName, bool) {
	if len(y) != 4 || !digits(y) {
		return snapName{}, false
	}
	day, suf, hasSuf := strings.Cut(f, ".")
	if len(day) != 4 || !digits(day) {
		return snapName{}, false
	}
	n := 0
	if hasSuf {
		if suf == "" || !digits(suf) || suf[0] == '0' || len(suf) > 6 {
			return snapName{}, false
		}
		n, _ = strconv.Atoi(suf)
	}
	return snapName{y, day, n}, true
}

func digits(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

func (n snapName) String() string {
	if n.n == 0 {
		return n.year + "/" + n.day
	}
	return n.year + "/" + n.day + "." + strconv.Itoa(n.n)
}

func (n snapName) file() string {
	_, f, _ := strings.Cut(n.String(), "/")
	return f
}

func cmpSnapName(a, b snapName) int {
	if c := strings.Compare(a.year, b.year); c != 0 {
		return c
	}
	if c := strings.Compare(a.day, b.day); c != 0 {
		return c
	}
	return a.n - b.n
}

// CompareSnapshotNames orders snapshot names by date, then number.
func CompareSnapshotNames(a, b string) int {
	na, oka := parseSnapName(a)
	nb, okb := parseSnapName(b)
	if !oka || !okb {
		return strings.Compare(a, b)
	}
	return cmpSnapName(na, nb)
}

// Trees returns the names of the trees in the store, sorted.
func (s *Store) Trees() ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "snap"))
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() && ValidTreeName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// years returns the year directories of a tree, sorted.
func (s *Store) years(tree string) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "snap", tree))
	if err != nil {
		return nil, err
	}
	var ys []string
	for _, e := range ents {
		if e.IsDir() && len(e.Name()) == 4 && digits(e.Name()) {
			ys = append(ys, e.Name())
		}
	}
	return ys, nil
}

// snapFiles returns the snapshots of a tree in a year, oldest first.
func (s *Store) snapFiles(tree, year string) ([]snapName, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "snap", tree, year))
	if err != nil {
		return nil, err
	}
	var ns []snapName
	for _, e := range ents {
		if n, ok := parseSnapFile(year, e.Name()); ok && e.Type().IsRegular() {
			ns = append(ns, n)
		}
	}
	slices.SortFunc(ns, cmpSnapName)
	return ns, nil
}

// Snapshots returns the names of the snapshots of a tree (YYYY/MMDD[.N]),
// oldest first. A tree without snapshots has none (and no error).
func (s *Store) Snapshots(tree string) ([]string, error) {
	if !ValidTreeName(tree) {
		return nil, zx.E(zx.ErrInvalid, "", tree, "bad tree name")
	}
	ys, err := s.years(tree)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, y := range ys {
		ns, err := s.snapFiles(tree, y)
		if err != nil {
			return nil, err
		}
		for _, n := range ns {
			names = append(names, n.String())
		}
	}
	return names, nil
}

func (s *Store) snapPath(tree string, n snapName) string {
	return filepath.Join(s.dir, "snap", tree, n.year, n.file())
}

// openSnapshot opens a snapshot and reads its header.
func (s *Store) openSnapshot(tree, name string) (*manifestReader, error) {
	n, ok := parseSnapName(name)
	if !ok || !ValidTreeName(tree) {
		return nil, zx.E(zx.ErrNotExist, "", tree+"/"+name, "no such snapshot")
	}
	f, err := os.Open(s.snapPath(tree, n))
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("snapshot %s/%s: %w", tree, name, err)
	}
	r := &manifestReader{f: f, zr: zr, sc: bufio.NewScanner(zr)}
	r.sc.Buffer(make([]byte, 64<<10), 16<<20)
	if !r.sc.Scan() {
		r.Close()
		return nil, fmt.Errorf("snapshot %s/%s: no header: %v", tree, name, r.sc.Err())
	}
	if err := json.Unmarshal(r.sc.Bytes(), &r.hdr); err != nil || r.hdr.Format != Format {
		r.Close()
		return nil, fmt.Errorf("snapshot %s/%s: bad header", tree, name)
	}
	return r, nil
}

type manifestReader struct {
	f   *os.File
	zr  *gzip.Reader
	sc  *bufio.Scanner
	hdr Header
	n   int
}

// next returns the next line, or nil at the end (with an error if the
// manifest is truncated).
func (r *manifestReader) next() ([]byte, error) {
	if r.sc.Scan() {
		r.n++
		return r.sc.Bytes(), nil
	}
	if err := r.sc.Err(); err != nil {
		return nil, err
	}
	if r.n != r.hdr.Entries {
		return nil, fmt.Errorf("snapshot truncated: %d entries of %d", r.n, r.hdr.Entries)
	}
	return nil, nil
}

func (r *manifestReader) Close() error {
	r.zr.Close()
	return r.f.Close()
}

// ReadSnapshot reads a whole snapshot.
func (s *Store) ReadSnapshot(tree, name string) (*Snapshot, error) {
	r, err := s.openSnapshot(tree, name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	n, _ := parseSnapName(name)
	sn := &Snapshot{Header: r.hdr, Name: n.String(), Entries: make([]zx.Dir, 0, r.hdr.Entries)}
	for {
		line, err := r.next()
		if err != nil {
			return nil, fmt.Errorf("snapshot %s/%s: %w", tree, name, err)
		}
		if line == nil {
			break
		}
		var d zx.Dir
		if err := json.Unmarshal(line, &d); err != nil || d[zx.APath] == "" {
			return nil, fmt.Errorf("snapshot %s/%s: bad entry %q", tree, name, line)
		}
		sn.Entries = append(sn.Entries, d)
	}
	return sn, nil
}

// ReadHeader reads the header of a snapshot.
func (s *Store) ReadHeader(tree, name string) (Header, error) {
	r, err := s.openSnapshot(tree, name)
	if err != nil {
		return Header{}, err
	}
	defer r.Close()
	return r.hdr, nil
}

// Latest returns the newest snapshot of tree, or nil if it has none.
func (s *Store) Latest(tree string) (*Snapshot, error) {
	names, err := s.Snapshots(tree)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	return s.ReadSnapshot(tree, names[len(names)-1])
}

// writeSnapshot writes a snapshot of tree dated t under the first free
// name of that day and returns the name. The snapshot appears whole or
// not at all.
func (s *Store) writeSnapshot(hdr Header, entries []zx.Dir, t time.Time) (string, error) {
	f, err := s.tempFile("snap-")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	hdr.Format = Format
	hdr.Entries = len(entries)
	bw := bufio.NewWriterSize(f, 256<<10)
	zw, _ := gzip.NewWriterLevel(bw, gzip.BestSpeed)
	enc := json.NewEncoder(zw)
	enc.SetEscapeHTML(false)
	err = enc.Encode(hdr)
	for _, d := range entries {
		if err != nil {
			break
		}
		err = enc.Encode(d)
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		f.Chmod(0o444)
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	year := t.Format("2006")
	ydir := filepath.Join(s.dir, "snap", hdr.Tree, year)
	if err := os.MkdirAll(ydir, 0o755); err != nil {
		return "", err
	}
	for i := 0; ; i++ {
		n := snapName{year: year, day: t.Format("0102"), n: i}
		err := os.Link(tmp, s.snapPath(hdr.Tree, n))
		if errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		syncDir(ydir)
		return n.String(), nil
	}
}

// keepAttr reports whether a source attribute goes into a snapshot:
// not the volatile ones, nor decorations.
func keepAttr(k string) bool {
	switch k {
	case zx.AName, zx.AAtime, zx.ACtime, zx.AIno, zx.ANlink:
		return false
	}
	return !zx.IsTransient(k)
}

// dirHash computes the hash of a directory from its children.
func dirHash(kids []zx.Dir) string {
	h := sha256.New()
	for _, k := range kids {
		fmt.Fprintf(h, "%q %s %s %s %q\n", path.Base(k[zx.APath]), k[zx.AType], k[zx.AMode], k[AHash], k[zx.ATarget])
	}
	return hex.EncodeToString(h.Sum(nil))
}

var errNoBlob = errors.New("blob missing")

// readBlob returns a blob's contents.
func (s *Store) readBlob(sum string) ([]byte, error) {
	f, err := s.OpenBlob(sum)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// ReadBlob returns the contents of a stored blob.
func (s *Store) ReadBlob(sum string) ([]byte, error) { return s.readBlob(sum) }
