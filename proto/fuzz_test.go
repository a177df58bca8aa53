package proto

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/zxfs/zx"
)

// Seed corpora are also committed under testdata/fuzz/<Name>/; the seeds
// added here are the valid encodings the other tests use.

func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendFrame(nil, Header{Type: FData, Flags: FlagEnd, Stream: 1}, []byte("hello")))
	f.Add(AppendFrame(AppendFrame(nil, Header{Type: FHello}, AppendHello(nil, &Hello{Version: Version})),
		Header{Type: FReq, Stream: 1}, AppendRequest(nil, &Request{Op: OpStat, Path: "/"})))
	f.Add(AppendFrame(nil, Header{Type: FWindow}, AppendWindow(nil, 1<<20)))
	f.Add(header(FData, 0, 0, 0, 1, MaxPayload+1))
	var codec Codec
	z, _ := codec.Compress(nil, bytes.Repeat([]byte("zx "), 1000))
	f.Add(AppendFrame(nil, Header{Type: FData, Flags: FlagZstd, Stream: 1}, z))
	var ds []zx.Dir
	for i := range 50 {
		ds = append(ds, zx.Dir{"path": "/src/f" + strconv.Itoa(i), "name": "f" + strconv.Itoa(i), "type": "-", "mode": "0644"})
	}
	zd, _ := codec.Compress(nil, AppendDirs(nil, ds))
	f.Add(AppendFrame(nil, Header{Type: FDirs, Flags: FlagZstd, Stream: 1}, zd))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		hdr := make([]byte, HeaderSize)
		for {
			start := len(data) - r.Len()
			h, p, err := ReadFrame(r, hdr)
			if err != nil {
				if err == io.EOF && start != len(data) {
					t.Fatalf("io.EOF with %d bytes left", len(data)-start)
				}
				if err == io.ErrUnexpectedEOF && start == len(data) {
					t.Fatalf("io.ErrUnexpectedEOF at a frame boundary")
				}
				if p != nil {
					t.Fatalf("payload returned with error %v", err)
				}
				var ze *zx.Error
				if err != io.EOF && err != io.ErrUnexpectedEOF && !errors.As(err, &ze) {
					t.Fatalf("unexpected error type %T: %v", err, err)
				}
				return
			}
			if len(p) > MaxPayload || uint32(len(p)) != h.Len {
				t.Fatalf("payload of %d bytes, header says %d, limit %d", len(p), h.Len, MaxPayload)
			}
			// The header encoding is canonical: re-encoding gives the input.
			if enc := AppendFrame(nil, h, p); !bytes.Equal(enc, data[start:len(data)-r.Len()]) {
				t.Fatalf("re-encoded frame differs from its input")
			}
			// Decoding any payload never panics.
			switch h.Type {
			case FHello:
				ParseHello(p)
			case FReq:
				ParseRequest(p)
			case FDir:
				ParseDir(p)
			case FDirs:
				if h.Flags&FlagZstd != 0 {
					// What a receiver of a compressed batch does: the
					// payload, then the batch, each bounded.
					d, err := codec.Decompress(p)
					if len(d) > MaxPayload || (err != nil && zx.KindOf(err) != zx.ErrProtocol) {
						t.Fatalf("Decompress: %d bytes, %v", len(d), err)
					}
					if err != nil {
						break
					}
					p = d
				}
				if ds, err := ParseDirs(p); err == nil && DirsCount(p) != int64(len(ds)) {
					t.Fatalf("%d entries, count says %d", len(ds), DirsCount(p))
				}
			case FErr, FGoaway:
				ParseError(p)
			case FEvent:
				ParseEvent(p)
			case FWindow:
				ParseWindow(p)
			case FData:
				if h.Flags&FlagZstd != 0 {
					if d, err := codec.Decompress(p); len(d) > MaxPayload || (err != nil && zx.KindOf(err) != zx.ErrProtocol) {
						t.Fatalf("Decompress: %d bytes, %v", len(d), err)
					}
				}
			}
		}
	})
}

func FuzzParseRequest(f *testing.F) {
	for _, tt := range requestTests {
		if len(tt.r.Dir) < 20 && len(tt.r.Path) < 100 {
			f.Add(AppendRequest(nil, &tt.r))
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseRequest(data)
		if err != nil {
			if r != nil {
				t.Fatalf("request and error %v", err)
			}
			return
		}
		if r.Op < OpAttach || r.Op > maxOp {
			t.Fatalf("parsed unknown op %d", r.Op)
		}
		if want := carried(*r); !reflect.DeepEqual(normRequest(r), normRequest(&want)) {
			t.Fatalf("parsed fields op %s does not carry: %+v", OpName(r.Op), r)
		}
		enc := AppendRequest(nil, r)
		r2, err := ParseRequest(enc)
		if err != nil {
			t.Fatalf("re-encoded request does not parse: %v\n%+v", err, r)
		}
		if !reflect.DeepEqual(normRequest(r), normRequest(r2)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", r2, r)
		}
		if enc2 := AppendRequest(nil, r2); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable")
		}
	})
}

func FuzzParseDir(f *testing.F) {
	for _, b := range validEncodings()["Dir"] {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ParseDir(data)
		// The same, sharing a copy of the input.
		od, oerr := ParseDirOwned(bytes.Clone(data))
		if (err == nil) != (oerr == nil) || !reflect.DeepEqual(d, od) {
			t.Fatalf("ParseDir: %v %v; ParseDirOwned: %v %v", d, err, od, oerr)
		}
		if err != nil {
			if d != nil {
				t.Fatalf("dir and error %v", err)
			}
			return
		}
		if d == nil {
			t.Fatalf("nil dir without an error")
		}
		if _, ok := d[""]; ok {
			t.Fatalf("empty attribute name accepted")
		}
		enc := AppendDir(nil, d)
		if len(enc) > len(data) {
			t.Fatalf("re-encoding (%d bytes) longer than the input (%d)", len(enc), len(data))
		}
		d2, err := ParseDir(enc)
		if err != nil {
			t.Fatalf("re-encoded dir does not parse: %v", err)
		}
		if !reflect.DeepEqual(normDir(d), normDir(d2)) {
			t.Fatalf("round trip:\n got %v\nwant %v", d2, d)
		}
	})
}

func FuzzParseDirs(f *testing.F) {
	for _, b := range validEncodings()["Dirs"] {
		f.Add(b)
	}
	f.Add([]byte{0})
	f.Add([]byte{2, 1, 1, 'a', 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		ds, err := ParseDirs(data)
		// The same, sharing a copy of the input.
		ods, oerr := ParseDirsOwned(bytes.Clone(data))
		if (err == nil) != (oerr == nil) || !reflect.DeepEqual(ds, ods) {
			t.Fatalf("ParseDirs: %v %v; ParseDirsOwned: %v %v", ds, err, ods, oerr)
		}
		if err != nil {
			if ds != nil {
				t.Fatalf("entries and error %v", err)
			}
			if zx.KindOf(err) != zx.ErrProtocol {
				t.Fatalf("error of kind %v: %v", zx.KindOf(err), err)
			}
			return
		}
		if len(ds) == 0 || DirsCount(data) != int64(len(ds)) {
			t.Fatalf("%d entries, count says %d", len(ds), DirsCount(data))
		}
		// Each entry is what ParseDir makes of its bytes, so a batch
		// is exactly its entries: re-encoding them one by one, or as a
		// batch, parses back to the same.
		var b DirBatch
		for _, d := range ds {
			if _, ok := d[""]; ok {
				t.Fatalf("empty attribute name accepted")
			}
			if !b.Add(d) {
				t.Fatalf("a decoded batch does not fit in a batch again")
			}
		}
		enc := b.Payload()
		if len(enc) > len(data) {
			t.Fatalf("re-encoding (%d bytes) longer than the input (%d)", len(enc), len(data))
		}
		ds2, err := ParseDirs(enc)
		if err != nil {
			t.Fatalf("re-encoded batch does not parse: %v", err)
		}
		if len(ds2) != len(ds) {
			t.Fatalf("round trip: %d entries, want %d", len(ds2), len(ds))
		}
		for i := range ds {
			if !reflect.DeepEqual(normDir(ds[i]), normDir(ds2[i])) {
				t.Fatalf("round trip of entry %d:\n got %v\nwant %v", i, ds2[i], ds[i])
			}
		}
	})
}

func FuzzParseError(f *testing.F) {
	for _, b := range validEncodings()["Error"][:6] {
		f.Add(b)
	}
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{255, 1, 'a', 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := ParseError(data)
		if err != nil {
			if e != nil {
				t.Fatalf("error and error %v", err)
			}
			return
		}
		if !e.Kind.Valid() {
			t.Fatalf("parsed invalid kind %d", e.Kind)
		}
		if e.Err != nil {
			t.Fatalf("parsed an underlying error")
		}
		e2, err := ParseError(AppendError(nil, e))
		if err != nil {
			t.Fatalf("re-encoded error does not parse: %v", err)
		}
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", e2, e)
		}
	})
}

func FuzzParseHello(f *testing.F) {
	for _, b := range validEncodings()["Hello"] {
		f.Add(b)
	}
	f.Add([]byte("zx"))
	f.Add([]byte("xz\x01\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHello(data)
		if err != nil {
			if h != nil {
				t.Fatalf("hello and error %v", err)
			}
			return
		}
		h2, err := ParseHello(AppendHello(nil, h))
		if err != nil {
			t.Fatalf("re-encoded hello does not parse: %v", err)
		}
		if !reflect.DeepEqual(normHello(h), normHello(h2)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", h2, h)
		}
	})
}

func FuzzParseEvent(f *testing.F) {
	for _, b := range validEncodings()["Event"] {
		f.Add(b)
	}
	f.Add([]byte{1, 0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := ParseEvent(data)
		if err != nil {
			if ev != nil {
				t.Fatalf("event and error %v", err)
			}
			return
		}
		ev2, err := ParseEvent(AppendEvent(nil, ev))
		if err != nil {
			t.Fatalf("re-encoded event does not parse: %v", err)
		}
		if !reflect.DeepEqual(normEvent(ev), normEvent(ev2)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", ev2, ev)
		}
	})
}

// The committed seeds named valid-* decode and those named invalid-* do not,
// so the corpora keep covering both sides.
func TestSeedCorpora(t *testing.T) {
	targets := map[string]func([]byte) error{
		"FuzzParseRequest": parserFor("Request"),
		"FuzzParseDir":     parserFor("Dir"),
		"FuzzParseDirs":    parserFor("Dirs"),
		"FuzzParseError":   parserFor("Error"),
		"FuzzParseHello":   parserFor("Hello"),
		"FuzzParseEvent":   parserFor("Event"),
		"FuzzReadFrame": func(b []byte) error {
			r := bytes.NewReader(b)
			for {
				if _, _, err := ReadFrame(r, make([]byte, HeaderSize)); err == io.EOF {
					return nil
				} else if err != nil {
					return err
				}
			}
		},
	}
	for target, parse := range targets {
		dir := filepath.Join("testdata", "fuzz", target)
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var valid, invalid int
		for _, e := range ents {
			text, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(text)), "\n")
			if len(lines) != 2 || lines[0] != "go test fuzz v1" ||
				!strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
				t.Fatalf("%s/%s: not a one-[]byte go test fuzz v1 file", target, e.Name())
			}
			s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
			if err != nil {
				t.Fatalf("%s/%s: %v", target, e.Name(), err)
			}
			err = parse([]byte(s))
			switch {
			case strings.HasPrefix(e.Name(), "valid-"):
				valid++
				if err != nil {
					t.Errorf("%s/%s: %v", target, e.Name(), err)
				}
			case strings.HasPrefix(e.Name(), "invalid-"):
				invalid++
				if err == nil {
					t.Errorf("%s/%s: accepted", target, e.Name())
				}
			}
		}
		if valid < 3 || invalid < 3 {
			t.Errorf("%s: %d valid and %d invalid seeds", target, valid, invalid)
		}
	}
}
