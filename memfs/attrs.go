package memfs

import (
	"strconv"

	"github.com/zxfs/zx"
)

// attrs is the validated content of the Dir of a Put or Wstat.
type attrs struct {
	typ          string // "" when absent
	size         int64  // -1 when absent
	mode         int64  // -1 when absent
	mtime, atime *int64
	uid, gid     string // "" when absent
	target       *string
	rdev         *string
	name, path   *string
	user         map[string]string // "" deletes
	excl         bool
}

var validTypes = map[string]bool{
	zx.TypeFile: true, zx.TypeDir: true, zx.TypeLink: true, zx.TypeFifo: true,
	zx.TypeSocket: true, zx.TypeCharDev: true, zx.TypeBlkDev: true,
}

// parseAttrs checks the attributes in d. Read-only attributes (ctime, ino,
// nlink) and upper-case ones are ignored; an attribute that is neither a
// system, user nor upper-case attribute, or a malformed value, fails with
// ErrInvalid.
func parseAttrs(op, p string, d zx.Dir) (*attrs, error) {
	a := &attrs{size: -1, mode: -1, user: map[string]string{}, excl: d[zx.AExcl] == "y"}
	bad := func(k, v string) error {
		return zx.E(zx.ErrInvalid, op, p, "bad "+k+" "+strconv.Quote(v))
	}
	for k, v := range d {
		switch k {
		case zx.AName, zx.APath:
			v := v
			if k == zx.AName {
				a.name = &v
			} else {
				a.path = &v
			}
		case zx.AType:
			if !validTypes[v] {
				return nil, bad(k, v)
			}
			a.typ = v
		case zx.ASize:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return nil, bad(k, v)
			}
			if n > maxSize {
				return nil, zx.E(zx.ErrTooBig, op, p, "size too large")
			}
			a.size = n
		case zx.AMode:
			m, err := strconv.ParseUint(v, 8, 32)
			if err != nil || m > 07777 {
				return nil, bad(k, v)
			}
			a.mode = int64(m)
		case zx.AMtime, zx.AAtime:
			t, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, bad(k, v)
			}
			if k == zx.AMtime {
				a.mtime = &t
			} else {
				a.atime = &t
			}
		case zx.AUid, zx.AGid:
			id, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return nil, bad(k, v)
			}
			if k == zx.AUid {
				a.uid = strconv.FormatUint(id, 10)
			} else {
				a.gid = strconv.FormatUint(id, 10)
			}
		case zx.ATarget:
			v := v
			a.target = &v
		case zx.ARdev:
			if _, err := strconv.ParseUint(v, 10, 64); err != nil {
				return nil, bad(k, v)
			}
			v := v
			a.rdev = &v
		case zx.ACtime, zx.AIno, zx.ANlink:
			// read only: ignored
		default:
			switch {
			case zx.IsTransient(k):
			case zx.IsUserAttr(k):
				a.user[k] = v
			default:
				return nil, zx.E(zx.ErrInvalid, op, p, "bad attribute name "+strconv.Quote(k))
			}
		}
	}
	return a, nil
}

// setMeta sets the mode, ownership and user attributes given in a.
func (a *attrs) setMeta(n *node) {
	if a.mode >= 0 && n.typ != zx.TypeLink {
		n.mode = uint32(a.mode)
	}
	if a.uid != "" {
		n.uid = a.uid
	}
	if a.gid != "" {
		n.gid = a.gid
	}
	for k, v := range a.user {
		if v == "" {
			delete(n.user, k)
			continue
		}
		if n.user == nil {
			n.user = make(map[string]string)
		}
		n.user[k] = v
	}
}

// setTimes sets the times given in a; mtime is set to t when not given
// and touched is set.
func (a *attrs) setTimes(n *node, touched bool, t int64) {
	switch {
	case a.mtime != nil:
		n.mtime = *a.mtime
	case touched:
		n.mtime = t
	}
	if a.atime != nil {
		n.atime = *a.atime
	}
	n.ctime = t
}
