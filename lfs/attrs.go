package lfs

import (
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
)

// attrs is the validated content of the Dir of a Put or Wstat.
type attrs struct {
	typ          string // "" when absent
	size         int64  // -1 when absent
	mode         int64  // -1 when absent
	mtime, atime *int64
	uid, gid     int // -1 when absent
	target       *string
	rdev         *uint64
	name, path   *string
	user         map[string]string // "" deletes
	excl         bool
}

// parseAttrs checks the attributes in d. Read-only attributes (ctime, ino,
// nlink) and upper-case ones are ignored; an attribute that is neither a
// system, user nor upper-case attribute, or a malformed value, fails with
// ErrInvalid.
func parseAttrs(op, p string, d zx.Dir) (*attrs, error) {
	a := &attrs{size: -1, mode: -1, uid: -1, gid: -1, excl: d[zx.AExcl] == "y"}
	bad := func(k, v string) error {
		return zx.E(zx.ErrInvalid, op, p, "bad "+k+" "+strconv.Quote(v))
	}
	for k, v := range d {
		switch k {
		case zx.AName:
			a.name = &v
		case zx.APath:
			a.path = &v
		case zx.AType:
			if zx.UnixType(v) == 0 || v == zx.TypeCtl {
				return nil, bad(k, v)
			}
			a.typ = v
		case zx.ASize:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, bad(k, v)
			}
			a.size = n
		case zx.AMode:
			m, err := parseMode(v)
			if err != nil {
				return nil, bad(k, v)
			}
			a.mode = int64(m)
		case zx.AMtime, zx.AAtime:
			t, err := parseInt(v)
			if err != nil {
				return nil, bad(k, v)
			}
			if k == zx.AMtime {
				a.mtime = &t
			} else {
				a.atime = &t
			}
		case zx.AUid, zx.AGid:
			id, err := parseID(v)
			if err != nil {
				return nil, bad(k, v)
			}
			if k == zx.AUid {
				a.uid = id
			} else {
				a.gid = id
			}
		case zx.ATarget:
			if v == "" || len(v) >= zx.MaxPath || containsNUL(v) {
				return nil, bad(k, v)
			}
			a.target = &v
		case zx.ARdev:
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return nil, bad(k, v)
			}
			a.rdev = &n
		case zx.ACtime, zx.AIno, zx.ANlink:
			// read only: ignored
		default:
			switch {
			case zx.IsTransient(k):
			case zx.IsUserAttr(k):
				if a.user == nil {
					a.user = make(map[string]string)
				}
				a.user[k] = v
			default:
				return nil, zx.E(zx.ErrInvalid, op, p, "bad attribute name "+strconv.Quote(k))
			}
		}
	}
	return a, nil
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// timespecs returns the utimensat times for a, with now for an absent
// mtime when touch is set.
func (a *attrs) timespecs(touch bool) ([]unix.Timespec, bool) {
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	set := false
	if a.atime != nil {
		ts[0] = unix.NsecToTimespec(*a.atime)
		set = true
	}
	switch {
	case a.mtime != nil:
		ts[1] = unix.NsecToTimespec(*a.mtime)
		set = true
	case touch:
		ts[1] = unix.Timespec{Nsec: unix.UTIME_NOW}
		set = true
	}
	return ts, set
}

// setTimes sets the times given in a on name in dfd, itself if a link.
func (a *attrs) setTimes(dfd int, name string, touch bool) error {
	ts, set := a.timespecs(touch)
	if !set {
		return nil
	}
	return unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// setMeta sets ownership, mode and user attributes given in a on name in
// dfd, whose current stat is st. Ownership goes first, as chown clears
// setuid bits. Links keep their mode.
func (f *FS) setMeta(a *attrs, dfd int, name string, st *unix.Stat_t) error {
	chowned := false
	if (a.uid >= 0 && uint32(a.uid) != st.Uid) || (a.gid >= 0 && uint32(a.gid) != st.Gid) {
		if err := unix.Fchownat(dfd, name, a.uid, a.gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		chowned = true // and maybe setuid and setgid cleared
	}
	isLink := st.Mode&unix.S_IFMT == unix.S_IFLNK
	if a.mode >= 0 && !isLink && (chowned || uint32(a.mode) != st.Mode&07777) {
		if err := f.chmod(dfd, name, uint32(a.mode)); err != nil {
			return err
		}
	}
	if len(a.user) > 0 {
		if f.opts.NoXattrs {
			return zx.E(zx.ErrNotSupp, "", "", "user attributes not supported")
		}
		if isLink {
			return zx.E(zx.ErrNotSupp, "", "", "no user attributes on symbolic links")
		}
		pp := f.procPath(dfd, name)
		for k, v := range a.user {
			var err error
			if v == "" {
				err = unix.Lremovexattr(pp, "user."+k)
				if err == unix.ENODATA {
					err = nil
				}
			} else {
				err = unix.Lsetxattr(pp, "user."+k, []byte(v), 0)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// chmod sets the mode of name in dfd without following it.
func (f *FS) chmod(dfd int, name string, mode uint32) error {
	err := unix.Fchmodat(dfd, name, mode, unix.AT_SYMLINK_NOFOLLOW)
	if err != unix.EOPNOTSUPP || f.proc == "" {
		return err
	}
	// No fchmodat2: open the entry itself (O_PATH, not followed) and
	// chmod it through /proc, which names exactly that inode.
	fd, err := openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return unix.EOPNOTSUPP
	}
	return unix.Chmod(f.proc+strconv.Itoa(fd), mode)
}
