package server_test

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/proto"
	"github.com/zxfs/zx/server"
)

// rawRequest sends req on mc, with data after it if data is not nil (a
// put), and returns the data of the reply and its error message, if any.
// It speaks mux directly: the client package cleans paths before they
// leave, and a hostile client would not.
func rawRequest(t *testing.T, mc *mux.Conn, req *proto.Request, data []byte) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var flags mux.OpenFlags
	if data != nil {
		flags = mux.WithData
	}
	st, err := mc.Open(ctx, proto.AppendRequest(nil, req), flags)
	if err != nil {
		t.Fatalf("open %s %q: %v", proto.OpName(req.Op), req.Path, err)
	}
	if data != nil {
		// The server may refuse the request before taking its data.
		if err := st.Send(ctx, proto.FData, data, true); err != nil && !errors.Is(err, mux.ErrPeerEnded) {
			t.Fatalf("send %s %q: %v", proto.OpName(req.Op), req.Path, err)
		}
	}
	var got []byte
	for {
		m, err := st.Recv(ctx)
		if err == io.EOF {
			return got, nil
		}
		if err != nil {
			t.Fatalf("%s %q: the server did not answer: %v", proto.OpName(req.Op), req.Path, err)
		}
		switch m.Type {
		case proto.FErr:
			e, perr := proto.ParseError(m.Data)
			if perr != nil {
				t.Fatalf("%s %q: bad error message: %v", proto.OpName(req.Op), req.Path, perr)
			}
			return got, e
		case proto.FData:
			got = append(got, m.Data...)
		}
	}
}

// describe returns every name under dir with its mode and contents.
func describe(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(p + " " + fi.Mode().String())
		if fi.Mode().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b.WriteString(" " + string(data))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestHostilePathsOnTheWire sends requests with hostile paths straight
// to a server over an lfs export whose root holds links out of it: "..",
// relative, NUL bytes, overlong names and paths, and paths through the
// links. Each is refused with an error that does not reveal the export's
// place on the host (the cleaning ones with the kind that says why);
// nothing outside the root is read or changed; the connection goes on
// serving.
func TestHostilePathsOnTheWire(t *testing.T) {
	top := t.TempDir()
	root, out := filepath.Join(top, "root"), filepath.Join(top, "out")
	for _, d := range []string{root, out, filepath.Join(root, "in")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const secret = "the secret outside the export"
	if err := os.WriteFile(filepath.Join(out, "secret"), []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "in", "f"), []byte("inside"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{
		"abs":  out,
		"fabs": filepath.Join(out, "secret"),
		"rel":  "../out",
		"frel": "../out/secret",
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	before := describe(t, out)
	tr, err := lfs.New(root, lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	_, addr := serve(t, tr, server.Config{})
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	mc := mux.Client(nc, mux.Config{})
	t.Cleanup(func() { mc.Close() })

	// Paths the server's cleaning refuses, and the kind it says.
	cleaned := []struct {
		path string
		kind zx.Kind
	}{
		{"..", zx.ErrInvalid},
		{"../out/secret", zx.ErrInvalid},
		{"/../out/secret", zx.ErrInvalid},
		{"/in/../../out/secret", zx.ErrInvalid},
		{"/in/f\x00", zx.ErrInvalid},
		{"/x\x00y", zx.ErrInvalid},
		{"/" + strings.Repeat("n", zx.MaxName+1), zx.ErrNameTooLong},
		{strings.Repeat("/abc", zx.MaxPath/4+1), zx.ErrNameTooLong},
	}
	// Paths that clean well but cross a link out of the root: refused by
	// the export (whatever it says), never followed.
	crossing := []string{"/abs/secret", "/rel/secret", "/abs/new", "/rel/d/x", "/abs/../in/f"}
	// Links out of the root named last: what is done to them is done to
	// the links, which are inside (stat, remove, a whole put replaces
	// one); reading or writing through them is refused.
	namedLast := []string{"/fabs", "/frel", "/abs", "/rel"}

	type op struct {
		what  string
		req   proto.Request
		data  []byte
		named bool // refused even for a link named last
	}
	ops := func(p string) []op {
		return []op{
			{"stat", proto.Request{Op: proto.OpStat, Path: p}, nil, false},
			{"get", proto.Request{Op: proto.OpGet, Path: p, Count: -1}, nil, true},
			{"put in place", proto.Request{Op: proto.OpPut, Path: p}, []byte("pwned"), true},
			{"truncate", proto.Request{Op: proto.OpWstat, Path: p, Dir: zx.Dir{zx.ASize: "0"}}, nil, true},
			{"mkdir under", proto.Request{Op: proto.OpPut, Path: p + "/d", Dir: zx.Dir{zx.AType: zx.TypeDir, zx.AMode: "0777"}}, []byte{}, true},
			{"find", proto.Request{Op: proto.OpFind, Path: p + "/x"}, nil, true},
			{"link to", proto.Request{Op: proto.OpLink, Path: p, To: "/in/l"}, nil, false},
			{"move from", proto.Request{Op: proto.OpMove, Path: p, To: "/in/moved"}, nil, false},
			{"chmod", proto.Request{Op: proto.OpWstat, Path: p, Dir: zx.Dir{zx.AMode: "0777"}}, nil, false},
			{"put", proto.Request{Op: proto.OpPut, Path: p, Dir: zx.Dir{zx.AType: zx.TypeFile, zx.AMode: "0666"}}, []byte("pwned"), false},
			{"remove", proto.Request{Op: proto.OpRemove, Path: p}, nil, false},
		}
	}
	check := func(what, p string, data []byte, err error) {
		t.Helper()
		if strings.Contains(string(data), secret) {
			t.Fatalf("%s %q read the secret outside the export", what, p)
		}
		if now := describe(t, out); now != before {
			t.Fatalf("%s %q changed what is outside the export:\nbefore %s\nafter  %s", what, p, before, now)
		}
		if err != nil && strings.Contains(err.Error(), top) {
			t.Errorf("%s %q: the error reveals where the export is: %v", what, p, err)
		}
	}
	for _, c := range cleaned {
		for _, o := range ops(c.path) {
			data, err := rawRequest(t, mc, &o.req, o.data)
			check(o.what, c.path, data, err)
			if err == nil {
				t.Errorf("%s %q: no error", o.what, c.path)
			} else if !errors.Is(err, c.kind) {
				t.Errorf("%s %q: %v, want an error of kind %v", o.what, c.path, err, c.kind)
			}
		}
	}
	for _, p := range crossing {
		for _, o := range ops(p) {
			data, err := rawRequest(t, mc, &o.req, o.data)
			check(o.what, p, data, err)
			if err == nil {
				t.Errorf("%s %q: no error", o.what, p)
			}
		}
	}
	for _, p := range namedLast {
		for _, o := range ops(p) {
			data, err := rawRequest(t, mc, &o.req, o.data)
			check(o.what, p, data, err)
			if err == nil && o.named {
				t.Errorf("%s %q: no error", o.what, p)
			}
		}
	}

	// The connection still serves, and the file inside is whole.
	data, err := rawRequest(t, mc, &proto.Request{Op: proto.OpGet, Path: "/in/f", Count: -1}, nil)
	if err != nil || string(data) != "inside" {
		t.Fatalf("after the hostile requests, get of the file inside: %q, %v", data, err)
	}
}
