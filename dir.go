package zx

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Dir is a directory entry: a set of attributes, each a name and a string
// value. Attributes whose names start with an upper-case letter are never
// stored: caches and tools decorate entries with them, and a few of them are
// request controls (Excl). Lower-case attributes that are not system
// attributes are user attributes, stored on the server (as extended
// attributes "user.NAME" on a local disk).
type Dir map[string]string

// System attribute names.
const (
	AName   = "name"   // last path element; "/" for the root
	APath   = "path"   // absolute path in the tree
	AType   = "type"   // see the Type constants
	ASize   = "size"   // bytes, decimal
	AMode   = "mode"   // permission bits incl. setuid, setgid, sticky: octal, "0644"
	AMtime  = "mtime"  // modification time: nanoseconds since the epoch, decimal
	AAtime  = "atime"  // access time, as mtime
	ACtime  = "ctime"  // status change time, as mtime (read only)
	AUid    = "uid"    // owner's numeric user id
	AGid    = "gid"    // owner's numeric group id
	ATarget = "target" // symbolic link target
	AIno    = "ino"    // inode number on the server (read only)
	ANlink  = "nlink"  // number of hard links (read only)
	ARdev   = "rdev"   // device number for device nodes
	AExcl   = "Excl"   // Put control: "y" fails if the file exists
)

var systemAttrs = map[string]bool{
	AName: true, APath: true, AType: true, ASize: true, AMode: true, AMtime: true,
	AAtime: true, ACtime: true, AUid: true, AGid: true, ATarget: true, AIno: true,
	ANlink: true, ARdev: true,
}

// IsSystemAttr reports whether name is an attribute the file system itself
// maintains.
func IsSystemAttr(name string) bool { return systemAttrs[name] }

// IsUserAttr reports whether name is a user attribute: lower-case first
// letter, not a system attribute, no NUL or '=' (which cannot be stored).
func IsUserAttr(name string) bool {
	if name == "" || systemAttrs[name] || strings.ContainsAny(name, "\x00=") || len(name) > 200 {
		return false
	}
	r := []rune(name)[0]
	return !unicode.IsUpper(r)
}

// IsTransient reports whether an attribute is never stored (upper-case).
func IsTransient(name string) bool {
	return name != "" && unicode.IsUpper([]rune(name)[0])
}

// Entry types, the values of the "type" attribute.
const (
	TypeFile    = "-"
	TypeDir     = "d"
	TypeLink    = "l"
	TypeFifo    = "p"
	TypeSocket  = "s"
	TypeCharDev = "c"
	TypeBlkDev  = "b"
	TypeCtl     = "C" // a synthetic control file: never cached, read with direct I/O
)

// Clone returns a copy of d.
func (d Dir) Clone() Dir { return maps.Clone(d) }

// Name returns the "name" attribute.
func (d Dir) Name() string { return d[AName] }

// Path returns the "path" attribute.
func (d Dir) Path() string { return d[APath] }

// Type returns the "type" attribute.
func (d Dir) Type() string { return d[AType] }

// IsDir reports whether d is a directory.
func (d Dir) IsDir() bool { return d[AType] == TypeDir }

// Int returns a decimal attribute, or 0.
func (d Dir) Int(name string) int64 {
	n, _ := strconv.ParseInt(d[name], 10, 64)
	return n
}

// Size returns the "size" attribute.
func (d Dir) Size() int64 { return d.Int(ASize) }

// Mode returns the "mode" attribute's permission bits (07777).
func (d Dir) Mode() uint32 {
	m, _ := strconv.ParseUint(d[AMode], 8, 32)
	return uint32(m) & 07777
}

// Time returns a time attribute ("mtime", "atime", "ctime").
func (d Dir) Time(name string) time.Time {
	ns, err := strconv.ParseInt(d[name], 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

// Mtime returns the "mtime" attribute.
func (d Dir) Mtime() time.Time { return d.Time(AMtime) }

// SetInt sets a decimal attribute.
func (d Dir) SetInt(name string, v int64) { d[name] = strconv.FormatInt(v, 10) }

// SetMode sets the "mode" attribute.
func (d Dir) SetMode(m uint32) { d[AMode] = FormatMode(m) }

// SetTime sets a time attribute.
func (d Dir) SetTime(name string, t time.Time) { d[name] = FormatTime(t) }

// FormatMode formats permission bits as the "mode" attribute does.
func FormatMode(m uint32) string { return fmt.Sprintf("0%o", m&07777) }

// FormatTime formats a time as the time attributes do.
func FormatTime(t time.Time) string { return strconv.FormatInt(t.UnixNano(), 10) }

// FileMode converts d's type and mode to an fs.FileMode.
func (d Dir) FileMode() fs.FileMode {
	m := d.Mode()
	fm := fs.FileMode(m & 0777)
	if m&04000 != 0 {
		fm |= fs.ModeSetuid
	}
	if m&02000 != 0 {
		fm |= fs.ModeSetgid
	}
	if m&01000 != 0 {
		fm |= fs.ModeSticky
	}
	for _, t := range types {
		if t.typ == d.Type() {
			return fm | t.fs
		}
	}
	return fm
}

// types is the one table of entry types and what other systems call them.
var types = [...]struct {
	typ  string
	unix uint32      // stat(2) file type bits (S_IFMT)
	fs   fs.FileMode // io/fs type bits
}{
	{TypeFile, 0o100000, 0},
	{TypeDir, 0o040000, fs.ModeDir},
	{TypeLink, 0o120000, fs.ModeSymlink},
	{TypeFifo, 0o010000, fs.ModeNamedPipe},
	{TypeSocket, 0o140000, fs.ModeSocket},
	{TypeCharDev, 0o020000, fs.ModeDevice | fs.ModeCharDevice},
	{TypeBlkDev, 0o060000, fs.ModeDevice},
	// To POSIX programs a control file is a regular file.
	{TypeCtl, 0o100000, fs.ModeIrregular},
}

// sIFMT is the mask of the file type bits in a stat(2) mode.
const sIFMT = 0o170000

// TypeOf returns the "type" attribute for an fs.FileMode.
func TypeOf(m fs.FileMode) string {
	for _, t := range types {
		if m&fs.ModeType == t.fs {
			return t.typ
		}
	}
	return TypeCtl
}

// UnixType returns the stat(2) file type bits (S_IFREG, S_IFDIR ...) of
// an entry type; 0 for a type zx does not know.
func UnixType(typ string) uint32 {
	for _, t := range types {
		if t.typ == typ {
			return t.unix
		}
	}
	return 0
}

// TypeOfUnix returns the entry type of a stat(2) mode; TypeCtl for file
// type bits zx does not know.
func TypeOfUnix(mode uint32) string {
	for _, t := range types {
		if mode&sIFMT == t.unix {
			return t.typ
		}
	}
	return TypeCtl
}

// PermOf returns the "mode" bits (07777) of an fs.FileMode.
func PermOf(m fs.FileMode) uint32 {
	p := uint32(m.Perm())
	if m&fs.ModeSetuid != 0 {
		p |= 04000
	}
	if m&fs.ModeSetgid != 0 {
		p |= 02000
	}
	if m&fs.ModeSticky != 0 {
		p |= 01000
	}
	return p
}

// String formats d as attributes in a stable order: system attributes
// first, then the rest sorted, as name=value pairs with quoted values
// where needed.
func (d Dir) String() string {
	var b strings.Builder
	for i, k := range d.Keys() {
		if i > 0 {
			b.WriteByte(' ')
		}
		v := d[k]
		b.WriteString(k)
		b.WriteByte('=')
		if v == "" || strings.ContainsAny(v, " \t\n\"'\\") {
			v = strconv.Quote(v)
		}
		b.WriteString(v)
	}
	return b.String()
}

var keyOrder = []string{APath, AName, AType, ASize, AMode, AMtime, AUid, AGid, ATarget}

// Keys returns d's attribute names, the common system ones first, then the
// rest sorted.
func (d Dir) Keys() []string {
	keys := make([]string, 0, len(d))
	for _, k := range keyOrder {
		if _, ok := d[k]; ok {
			keys = append(keys, k)
		}
	}
	rest := make([]string, 0, len(d))
	for k := range d {
		if !slices.Contains(keyOrder, k) {
			rest = append(rest, k)
		}
	}
	slices.Sort(rest)
	return append(keys, rest...)
}
