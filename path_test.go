package zx

import (
	"io/fs"
	"testing"
)

func TestSplitJoin(t *testing.T) {
	for _, c := range []struct{ p, dir, name, base string }{
		{"/", "/", "", "/"},
		{"/a", "/", "a", "a"},
		{"/a/b", "/a", "b", "b"},
		{"/a/b/c.go", "/a/b", "c.go", "c.go"},
	} {
		dir, name := Split(c.p)
		if dir != c.dir || name != c.name {
			t.Errorf("Split(%q) = %q, %q; want %q, %q", c.p, dir, name, c.dir, c.name)
		}
		if p := Parent(c.p); p != c.dir {
			t.Errorf("Parent(%q) = %q; want %q", c.p, p, c.dir)
		}
		if b := Base(c.p); b != c.base {
			t.Errorf("Base(%q) = %q; want %q", c.p, b, c.base)
		}
		if c.p != "/" {
			if p := Join(dir, name); p != c.p {
				t.Errorf("Join(%q, %q) = %q; want %q", dir, name, p, c.p)
			}
		}
	}
}

// TestTypes checks the one table of types both ways, for stat(2) modes
// and io/fs modes.
func TestTypes(t *testing.T) {
	for _, c := range []struct {
		typ  string
		unix uint32
		fs   fs.FileMode
	}{
		{TypeFile, 0o100000, 0},
		{TypeDir, 0o040000, fs.ModeDir},
		{TypeLink, 0o120000, fs.ModeSymlink},
		{TypeFifo, 0o010000, fs.ModeNamedPipe},
		{TypeSocket, 0o140000, fs.ModeSocket},
		{TypeCharDev, 0o020000, fs.ModeDevice | fs.ModeCharDevice},
		{TypeBlkDev, 0o060000, fs.ModeDevice},
	} {
		if got := UnixType(c.typ); got != c.unix {
			t.Errorf("UnixType(%q) = %o; want %o", c.typ, got, c.unix)
		}
		if got := TypeOfUnix(c.unix | 0o644); got != c.typ {
			t.Errorf("TypeOfUnix(%o) = %q; want %q", c.unix|0o644, got, c.typ)
		}
		if got := TypeOf(c.fs | 0o644); got != c.typ {
			t.Errorf("TypeOf(%v) = %q; want %q", c.fs|0o644, got, c.typ)
		}
		if got := (Dir{AType: c.typ, AMode: "04755"}).FileMode(); got != c.fs|fs.ModeSetuid|0o755 {
			t.Errorf("FileMode of %q = %v; want %v", c.typ, got, c.fs|fs.ModeSetuid|0o755)
		}
	}
	if got := UnixType(TypeCtl); got != 0o100000 {
		t.Errorf("UnixType(TypeCtl) = %o; want a regular file's", got)
	}
	if got := UnixType("x"); got != 0 {
		t.Errorf("UnixType(x) = %o; want 0", got)
	}
	if got := TypeOfUnix(0o170000); got != TypeCtl {
		t.Errorf("TypeOfUnix(0170000) = %q; want %q", got, TypeCtl)
	}
}
