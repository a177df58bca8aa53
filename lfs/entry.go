package lfs

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
)

func itoa(n int64) string  { return strconv.FormatInt(n, 10) }
func utoa(n uint64) string { return strconv.FormatUint(n, 10) }

func nsec(t unix.Timespec) int64 { return t.Sec*1e9 + t.Nsec }

// smallOctal caches the common modes.
var octal [07777 + 1]string

func init() {
	for i := range octal {
		octal[i] = "0" + strconv.FormatUint(uint64(i), 8)
	}
}

// statDir converts a stat to an entry (without target and user attributes).
func statDir(st *unix.Stat_t, name, p string) zx.Dir {
	d := make(zx.Dir, 16)
	d[zx.AName] = name
	d[zx.APath] = p
	typ := zx.TypeOfUnix(st.Mode)
	d[zx.AType] = typ
	d[zx.ASize] = itoa(st.Size)
	d[zx.AMode] = octal[st.Mode&07777]
	d[zx.AMtime] = itoa(nsec(st.Mtim))
	d[zx.AAtime] = itoa(nsec(st.Atim))
	d[zx.ACtime] = itoa(nsec(st.Ctim))
	d[zx.AUid] = utoa(uint64(st.Uid))
	d[zx.AGid] = utoa(uint64(st.Gid))
	d[zx.AIno] = utoa(st.Ino)
	d[zx.ANlink] = utoa(uint64(st.Nlink))
	if typ == zx.TypeCharDev || typ == zx.TypeBlkDev {
		d[zx.ARdev] = utoa(st.Rdev)
	}
	return d
}

// entry returns the full entry for name in directory dfd, whose path is p,
// given its stat.
func (f *FS) entry(dfd int, name, p string, st *unix.Stat_t, xb *xbuf) (zx.Dir, error) {
	dname := name
	if p == "/" {
		dname = "/"
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		t, err := f.linkTarget(dfd, name, st)
		if err != nil {
			return nil, err
		}
		d := statDir(st, dname, p)
		d[zx.ATarget] = t
		return d, nil
	}
	d := statDir(st, dname, p)
	if !f.opts.NoXattrs {
		f.readXattrs(dfd, name, d, xb)
	}
	return d, nil
}

// linkTarget returns the target of the link name in dfd, whose stat is
// st, from the memo when it can: reading it may set its atime (see
// linkMemo). After a read, st is updated to the link's stat then, so the
// entry tells the times the link has.
func (f *FS) linkTarget(dfd int, name string, st *unix.Stat_t) (string, error) {
	k := inodeKey{dev: st.Dev, ino: st.Ino}
	if t, ok := f.links.target(k, nsec(st.Ctim)); ok {
		return t, nil
	}
	now := time.Now()
	t, err := readlink(dfd, name)
	if err != nil {
		return "", err
	}
	var lst unix.Stat_t
	if lstat(dfd, name, &lst) == nil && lst.Ino == st.Ino {
		if lst.Ctim == st.Ctim {
			f.links.read(k, nsec(st.Ctim), t, now)
		}
		*st = lst
	}
	return t, nil
}

// keepLink remembers that the link name in dfd, whose inode was ino before
// the FS changed its attributes, still has target t.
func (f *FS) keepLink(dfd int, name string, ino uint64, t string) {
	var st unix.Stat_t
	if lstat(dfd, name, &st) == nil && st.Ino == ino && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		f.links.set(inodeKey{dev: st.Dev, ino: st.Ino}, nsec(st.Ctim), t)
	}
}

// stat returns the entry at clean path p.
func (f *FS) stat(p string) (zx.Dir, error) {
	pd, name, err := f.openParent(p)
	if err != nil {
		return nil, err
	}
	defer pd.close()
	var st unix.Stat_t
	if err := lstat(pd.fd, name, &st); err != nil {
		return nil, err
	}
	return f.entry(pd.fd, name, p, &st, nil)
}

func readlink(dfd int, name string) (string, error) {
	for n := 256; ; n *= 4 {
		buf := make([]byte, n)
		m, err := unix.Readlinkat(dfd, name, buf)
		if err != nil {
			return "", err
		}
		if m < n {
			return string(buf[:m]), nil
		}
	}
}

// xbuf holds buffers for reading extended attributes.
type xbuf struct {
	path []byte // "/proc/self/fd/N/" prefix, then the name
	list []byte
	val  []byte
}

var xbufs = sync.Pool{New: func() any { return &xbuf{list: make([]byte, 1024), val: make([]byte, 1024)} }}

// readXattrs adds the user attributes of name in directory dfd to d.
// Errors are ignored: attributes are a best effort when listing.
func (f *FS) readXattrs(dfd int, name string, d zx.Dir, xb *xbuf) {
	if xb == nil {
		xb = xbufs.Get().(*xbuf)
		defer xbufs.Put(xb)
	}
	n, err := listxattrat(dfd, name, xb.list)
	if err == nil && n == 0 {
		return // the common case: none
	}
	pp := f.procPath(dfd, name)
	for {
		n, err = unix.Llistxattr(pp, xb.list)
		if err == unix.ERANGE {
			sz, err := unix.Llistxattr(pp, nil)
			if err != nil {
				return
			}
			xb.list = make([]byte, sz+64)
			continue
		}
		break
	}
	if err != nil || n == 0 {
		return
	}
	for l := xb.list[:n]; len(l) > 0; {
		i := slices.Index(l, 0)
		if i < 0 {
			i = len(l)
		}
		xn := string(l[:i])
		if i < len(l) {
			l = l[i+1:]
		} else {
			l = nil
		}
		an, ok := strings.CutPrefix(xn, "user.")
		if !ok || !zx.IsUserAttr(an) {
			continue
		}
		v, err := getxattr(pp, xn, xb)
		if err == nil {
			d[an] = v
		}
	}
}

func getxattr(pp, xn string, xb *xbuf) (string, error) {
	for {
		n, err := unix.Lgetxattr(pp, xn, xb.val)
		if err == unix.ERANGE {
			sz, err := unix.Lgetxattr(pp, xn, nil)
			if err != nil {
				return "", err
			}
			xb.val = make([]byte, sz+64)
			continue
		}
		if err != nil {
			return "", err
		}
		return string(xb.val[:n]), nil
	}
}

// userXattrs returns the names (with "user.") of the user attributes of the
// entry at pp.
func userXattrs(pp string) ([]string, error) {
	sz, err := unix.Llistxattr(pp, nil)
	if err != nil || sz == 0 {
		return nil, err
	}
	buf := make([]byte, sz+256)
	n, err := unix.Llistxattr(pp, buf)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, xn := range strings.Split(string(buf[:n]), "\x00") {
		if strings.HasPrefix(xn, "user.") {
			names = append(names, xn)
		}
	}
	return names, nil
}

// dirbuf is scratch space for reading a directory.
type dirbuf struct {
	ents  []byte
	names []string
	xb    xbuf

	// readDir's
	arena []byte    // the names, each followed by a NUL
	refs  []nameRef // into arena, sorted by name
	stx   []unix.Statx_t
	how   []uint8
	ask   []int32 // entries to ask listxattrat
	sb    []byte  // the strings of the entries
	ends  []int32 // where each string ends in sb
	temps bool    // scanNames skipped temporaries
}

var dirbufs = sync.Pool{New: func() any {
	return &dirbuf{ents: make([]byte, 32<<10), xb: xbuf{list: make([]byte, 1024), val: make([]byte, 1024)}}
}}

// readNames returns the sorted names in directory dfd, temporaries
// excluded. The slice is owned by db.
func readNames(dfd int, db *dirbuf) ([]string, error) {
	names, err := readAllNames(dfd, db)
	if err != nil {
		return nil, err
	}
	names = slices.DeleteFunc(names, isTemp)
	slices.Sort(names)
	db.names = names
	return names, nil
}
