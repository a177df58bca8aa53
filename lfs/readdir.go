package lfs

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
)

// readDir is on the path of every entry a find streams, so it is written
// for speed; what it returns is exactly what entry would return for each
// name. The costs it avoids, per entry:
//
//   - C strings: the names getdents(2) returns are copied, NUL-terminated,
//     into one buffer, and statx(2) and listxattrat(2) take them in place
//     (unix.Fstatat would copy each name to a new C string).
//   - Small strings: the paths and decimal numbers of up to dirChunk
//     entries are cut from one string (the name is the tail of the path),
//     instead of a dozen strings per entry; an entry kept after the walk
//     keeps only its chunk's string alive, not its whole directory's.
//   - Map growth: each map is made with room for the attributes it gets.
//
// The system calls stay: one statx per entry, and one listxattrat per
// entry the FS's xattrMemo cannot vouch for, as there is no cheaper way
// to know that a file has no extended attributes.
// Symbolic links and devices, which need more (readlink, rdev), go
// through entry; entries that have extended attributes through
// readXattrs.

// scannedHook, when set by tests, runs between reading a directory's names
// and their attributes.
var scannedHook func()

// noStatx is set when the kernel has no statx (before Linux 4.11).
var noStatx atomic.Bool

// dirAttrs is the number of attributes readDir sets on a plain entry: name,
// path, type, size, mode, mtime, atime, ctime, uid, gid, ino, nlink. Maps
// are made with room for two more (target, rdev or user attributes):
// a Go map made for 14 holds 16 in two groups, for 16 it would take four.
const (
	dirAttrs = 12
	dirHint  = dirAttrs + 2
)

// dirChunk is the number of entries whose strings readDir cuts from one
// string.
const dirChunk = 64

// numStride is the number of strings readDir cuts per entry from its
// directory's string: the path, then size, mtime, atime, ctime, uid, gid,
// ino and nlink.
const numStride = 9

// direntName is the offset of the name in a linux_dirent64.
const direntName = int(unsafe.Offsetof(unix.Dirent{}.Name))

// nameRef locates a name in dirbuf.arena: it starts at off and has n bytes,
// followed by a NUL.
type nameRef struct{ off, n int32 }

// scanNames reads the names in directory dfd into db.arena and db.refs,
// sorted, without ".", ".." and temporaries.
func scanNames(dfd int, db *dirbuf) error {
	db.arena = db.arena[:0]
	db.refs = db.refs[:0]
	db.temps = false
	for {
		n, err := unix.Getdents(dfd, db.ents)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n <= 0 {
			break
		}
		for b := db.ents[:n]; len(b) >= direntName; {
			reclen := int(binary.NativeEndian.Uint16(b[unsafe.Offsetof(unix.Dirent{}.Reclen):]))
			if reclen < direntName || reclen > len(b) {
				return unix.EIO // a kernel bug; never seen
			}
			ino := binary.NativeEndian.Uint64(b)
			name := b[direntName:reclen]
			if i := bytes.IndexByte(name, 0); i >= 0 {
				name = name[:i]
			}
			b = b[reclen:]
			if ino == 0 || isDot(name) {
				continue
			}
			if bytes.HasPrefix(name, tempPrefix) {
				db.temps = true
				continue
			}
			db.refs = append(db.refs, nameRef{int32(len(db.arena)), int32(len(name))})
			db.arena = append(db.arena, name...)
			db.arena = append(db.arena, 0)
		}
	}
	a := db.arena
	slices.SortFunc(db.refs, func(x, y nameRef) int {
		return bytes.Compare(a[x.off:x.off+x.n], a[y.off:y.off+y.n])
	})
	return nil
}

var tempPrefix = []byte(TempPrefix)

func isDot(name []byte) bool {
	return len(name) == 1 && name[0] == '.' || len(name) == 2 && name[0] == '.' && name[1] == '.'
}

// readDir returns the entries in directory dfd, whose path is p, sorted by
// name. An entry that vanishes while it is read is skipped. If mem is not
// nil, it is called with the number of names once they are read and
// before the entries are made (which is where the memory goes: see
// entryMem); an error from it is readDir's.
func (f *FS) readDir(dfd int, p string, mem func(n int) error) ([]zx.Dir, error) {
	if noStatx.Load() {
		return f.readDirStat(dfd, p, mem)
	}
	db := dirbufs.Get().(*dirbuf)
	defer dirbufs.Put(db)
	if err := scanNames(dfd, db); err != nil {
		return nil, err
	}
	if mem != nil {
		if err := mem(len(db.refs)); err != nil {
			return nil, err
		}
	}
	if db.temps {
		f.sweepTemps(dfd)
	}
	if scannedHook != nil {
		scannedHook()
	}
	refs := db.refs
	if cap(db.stx) < len(refs) {
		db.stx = make([]unix.Statx_t, len(refs))
	}
	stx := db.stx[:len(refs)]
	how := slices.Grow(db.how[:0], len(refs))[:len(refs)]
	db.how = how
	for i, r := range refs {
		name := &db.arena[r.off]
		st := &stx[i]
		if err := statxAt(dfd, name, st); err != nil {
			if err == unix.ENOSYS {
				noStatx.Store(true)
				return f.readDirStat(dfd, p, nil) // (mem has counted them)
			}
			how[i] = skip
			continue
		}
		how[i] = plain
		switch uint32(st.Mode) & unix.S_IFMT {
		case unix.S_IFLNK, unix.S_IFCHR, unix.S_IFBLK:
			how[i] = other
		}
	}
	if !f.opts.NoXattrs {
		f.markXattrs(dfd, db, stx, how)
	}
	pref := p + "/"
	if p == "/" {
		pref = "/"
	}
	ds := make([]zx.Dir, 0, len(refs))
	// The strings of each chunk of entries are cut from one string, so
	// that an entry kept long after the walk keeps little else alive.
	for i0 := 0; i0 < len(refs); i0 += dirChunk {
		i1 := min(i0+dirChunk, len(refs))
		sb := db.sb[:0]
		ends := db.ends[:0]
		for i := i0; i < i1; i++ {
			if how[i] != plain && how[i] != xattrs {
				continue
			}
			r, st := refs[i], &stx[i]
			sb = append(sb, pref...)
			sb = append(sb, db.arena[r.off:r.off+r.n]...)
			ends = append(ends, int32(len(sb)))
			sb = strconv.AppendUint(sb, st.Size, 10)
			ends = append(ends, int32(len(sb)))
			sb = strconv.AppendInt(sb, stxNsec(st.Mtime), 10)
			ends = append(ends, int32(len(sb)))
			sb = strconv.AppendInt(sb, stxNsec(st.Atime), 10)
			ends = append(ends, int32(len(sb)))
			sb = strconv.AppendInt(sb, stxNsec(st.Ctime), 10)
			ends = append(ends, int32(len(sb)))
			sb = strconv.AppendUint(sb, uint64(st.Uid), 10)
			ends = append(ends, int32(len(sb)))
			sb = strconv.AppendUint(sb, uint64(st.Gid), 10)
			ends = append(ends, int32(len(sb)))
			sb = strconv.AppendUint(sb, st.Ino, 10)
			ends = append(ends, int32(len(sb)))
			sb = strconv.AppendUint(sb, uint64(st.Nlink), 10)
			ends = append(ends, int32(len(sb)))
		}
		db.sb, db.ends = sb, ends
		s := string(sb)
		start := int32(0)
		for i := i0; i < i1; i++ {
			r := refs[i]
			switch how[i] {
			case skip:
				continue
			case other:
				name := string(db.arena[r.off : r.off+r.n])
				var st unix.Stat_t
				if lstat(dfd, name, &st) != nil {
					continue
				}
				if d, err := f.entry(dfd, name, pref+name, &st, &db.xb); err == nil {
					ds = append(ds, d)
				}
				continue
			}
			e := ends[:numStride]
			ends = ends[numStride:]
			st := &stx[i]
			path := s[start:e[0]]
			d := make(zx.Dir, dirHint)
			d[zx.AName] = path[len(path)-int(r.n):]
			d[zx.APath] = path
			d[zx.AType] = zx.TypeOfUnix(uint32(st.Mode))
			d[zx.ASize] = s[e[0]:e[1]]
			d[zx.AMode] = octal[st.Mode&07777]
			d[zx.AMtime] = s[e[1]:e[2]]
			d[zx.AAtime] = s[e[2]:e[3]]
			d[zx.ACtime] = s[e[3]:e[4]]
			d[zx.AUid] = s[e[4]:e[5]]
			d[zx.AGid] = s[e[5]:e[6]]
			d[zx.AIno] = s[e[6]:e[7]]
			d[zx.ANlink] = s[e[7]:e[8]]
			start = e[8]
			if how[i] == xattrs {
				f.readXattrs(dfd, d[zx.AName], d, &db.xb)
			}
			ds = append(ds, d)
		}
	}
	return ds, nil
}

// markXattrs sets how[i] to xattrs for each plain entry that has
// extended attributes (or may have: an error leaves it to readXattrs),
// asking listxattrat only of those the memo does not know to be bare.
func (f *FS) markXattrs(dfd int, db *dirbuf, stx []unix.Statx_t, how []uint8) {
	key := func(st *unix.Statx_t) inodeKey {
		return inodeKey{dev: uint64(st.Dev_major)<<32 | uint64(st.Dev_minor), ino: st.Ino}
	}
	ask := db.ask[:0]
	// Taken before any listxattrat: see xattrMemo.remember.
	listed := time.Now()
	f.xattrs.mu.Lock()
	f.xattrs.check(listed)
	for i := range how {
		if how[i] == plain && !f.xattrs.bare(key(&stx[i]), stxNsec(stx[i].Ctime)) {
			ask = append(ask, int32(i))
		}
	}
	f.xattrs.asked += int64(len(ask))
	f.xattrs.hits += int64(len(how) - len(ask))
	f.xattrs.mu.Unlock()
	if len(ask) == 0 {
		db.ask = ask
		return
	}
	bare := ask[:0]
	for _, i := range ask {
		// Asking for the size alone (an empty buffer) tells whether
		// there are any.
		r := db.refs[i]
		if n, err := listxattratPtr(dfd, &db.arena[r.off], nil); err != nil || n > 0 {
			how[i] = xattrs // or the kernel has no listxattrat: let readXattrs see
			continue
		}
		bare = append(bare, i)
	}
	if len(bare) > 0 {
		f.xattrs.mu.Lock()
		for _, i := range bare {
			f.xattrs.remember(key(&stx[i]), stxNsec(stx[i].Ctime), listed)
		}
		f.xattrs.mu.Unlock()
	}
	db.ask = ask
}

// What readDir does with each entry.
const (
	skip   = iota // it vanished
	plain         // its attributes are in sb
	xattrs        // plain, and it has extended attributes
	other         // a link or device: ask entry
)

func stxNsec(t unix.StatxTimestamp) int64 { return t.Sec*1e9 + int64(t.Nsec) }

// readDirStat is readDir for kernels without statx: lstat and entry for
// each name.
func (f *FS) readDirStat(dfd int, p string, mem func(n int) error) ([]zx.Dir, error) {
	db := dirbufs.Get().(*dirbuf)
	defer dirbufs.Put(db)
	names, err := readNames(dfd, db)
	if err != nil {
		return nil, err
	}
	if mem != nil {
		if err := mem(len(names)); err != nil {
			return nil, err
		}
	}
	ds := make([]zx.Dir, 0, len(names))
	pref := p + "/"
	if p == "/" {
		pref = "/"
	}
	var st unix.Stat_t
	for _, name := range names {
		if err := lstat(dfd, name, &st); err != nil {
			continue
		}
		d, err := f.entry(dfd, name, pref+name, &st, &db.xb)
		if err != nil {
			continue
		}
		ds = append(ds, d)
	}
	return ds, nil
}
