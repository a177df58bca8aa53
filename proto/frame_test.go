package proto

import (
	"bytes"
	"errors"
	"io"
	"math"
	"testing"
	"testing/iotest"

	"github.com/zxfs/zx"
)

var frameTypes = []uint8{FHello, FReq, FDir, FData, FErr, FEvent, FWindow, FCancel, FPing, FGoaway, FDirs}

func TestIsMessage(t *testing.T) {
	want := map[uint8]bool{FDir: true, FData: true, FErr: true, FEvent: true, FDirs: true}
	for ty := range 256 {
		if got := IsMessage(uint8(ty)); got != want[uint8(ty)] {
			t.Errorf("IsMessage(%d) = %v, want %v", ty, got, want[uint8(ty)])
		}
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	for _, ty := range frameTypes {
		flags := []uint8{0, FlagEnd, FlagAck, FlagEnd | FlagAck}
		if Compressible(ty) {
			flags = append(flags, FlagZstd, FlagZstd|FlagEnd)
		}
		for _, fl := range flags {
			for _, st := range []uint32{0, 1, 0x12345678, math.MaxUint32} {
				for _, n := range []uint32{0, 1, 4096, MaxPayload - 1, MaxPayload} {
					h := Header{Type: ty, Flags: fl, Stream: st, Len: n}
					var b [HeaderSize]byte
					for i := range b {
						b[i] = 0xAA // PutHeader must write every byte
					}
					PutHeader(b[:], h)
					got, err := ParseHeader(b[:])
					if err != nil {
						t.Fatalf("ParseHeader(PutHeader(%+v)): %v", h, err)
					}
					if got != h {
						t.Fatalf("ParseHeader(PutHeader(%+v)) = %+v", h, got)
					}
				}
			}
		}
	}
}

func TestHeaderWireLayout(t *testing.T) {
	var b [HeaderSize]byte
	PutHeader(b[:], Header{Type: FData, Flags: FlagEnd, Stream: 0x04030201, Len: 0x0000_0807})
	want := []byte{FData, FlagEnd, 0, 0, 1, 2, 3, 4, 7, 8, 0, 0}
	if !bytes.Equal(b[:], want) {
		t.Fatalf("PutHeader wrote % x, want % x", b[:], want)
	}
}

func header(ty, fl, r2, r3 uint8, stream, n uint32) []byte {
	var b [HeaderSize]byte
	PutHeader(b[:], Header{Type: ty, Flags: fl, Stream: stream, Len: n})
	b[2], b[3] = r2, r3
	return b[:]
}

func TestParseHeaderErrors(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		kind zx.Kind
	}{
		{"type 0", header(0, 0, 0, 0, 1, 0), zx.ErrProtocol},
		{"type 12", header(FDirs+1, 0, 0, 0, 1, 0), zx.ErrProtocol},
		{"type 255", header(255, 0, 0, 0, 1, 0), zx.ErrProtocol},
		{"flag bit 3", header(FData, 1<<3, 0, 0, 1, 0), zx.ErrProtocol},
		{"zstd on DIR", header(FDir, FlagZstd, 0, 0, 1, 0), zx.ErrProtocol},
		{"zstd on WINDOW", header(FWindow, FlagZstd, 0, 0, 0, 4), zx.ErrProtocol},
		{"zstd on EVENT", header(FEvent, FlagZstd, 0, 0, 1, 0), zx.ErrProtocol},
		{"zstd on ERR", header(FErr, FlagZstd, 0, 0, 1, 0), zx.ErrProtocol},
		{"flag bit 7", header(FData, 1<<7, 0, 0, 1, 0), zx.ErrProtocol},
		{"all flags", header(FData, 0xff, 0, 0, 1, 0), zx.ErrProtocol},
		{"reserved byte 2", header(FData, 0, 1, 0, 1, 0), zx.ErrProtocol},
		{"reserved byte 3", header(FData, 0, 0, 0x80, 1, 0), zx.ErrProtocol},
		{"MaxPayload+1", header(FData, 0, 0, 0, 1, MaxPayload+1), zx.ErrTooBig},
		{"huge length", header(FData, 0, 0, 0, 1, math.MaxUint32), zx.ErrTooBig},
		{"short header", header(FData, 0, 0, 0, 1, 0)[:HeaderSize-1], zx.ErrProtocol},
		{"empty header", nil, zx.ErrProtocol},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHeader(tt.b)
			if err == nil {
				t.Fatalf("ParseHeader(% x) succeeded", tt.b)
			}
			if !errors.Is(err, tt.kind) {
				t.Fatalf("ParseHeader(% x) = %v, want kind %v", tt.b, err, tt.kind)
			}
			if zx.KindOf(err) != tt.kind {
				t.Fatalf("KindOf(%v) = %v, want %v", err, zx.KindOf(err), tt.kind)
			}
		})
	}
}

func TestAppendFrameReadFrame(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), MaxPayload/16)
	frames := []struct {
		h Header
		p []byte
	}{
		{Header{Type: FHello}, AppendHello(nil, &Hello{Version: Version, Features: []string{"x"}})},
		{Header{Type: FReq, Stream: 1}, AppendRequest(nil, &Request{Op: OpStat, Path: "/a"})},
		{Header{Type: FDir, Stream: 1}, AppendDir(nil, zx.Dir{"path": "/a"})},
		{Header{Type: FData, Stream: 3}, []byte("hello")},
		{Header{Type: FData, Flags: FlagEnd, Stream: 3}, big},
		{Header{Type: FData, Stream: 5}, big[:MaxPayload-1]},
		{Header{Type: FErr, Flags: FlagEnd, Stream: 1}, AppendError(nil, zx.E(zx.ErrNotExist, "stat", "/a", ""))},
		{Header{Type: FEvent, Stream: 7}, AppendEvent(nil, &Event{Kind: 1, Dir: zx.Dir{"path": "/b"}})},
		{Header{Type: FWindow, Stream: 0}, AppendWindow(nil, 1<<16)},
		{Header{Type: FCancel, Stream: math.MaxUint32}, nil},
		{Header{Type: FPing}, []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{Header{Type: FPing, Flags: FlagAck}, []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{Header{Type: FGoaway}, AppendError(nil, errors.New("bye"))},
		{Header{Type: FData, Flags: FlagEnd | FlagAck, Stream: 9}, []byte{}},
	}
	var wire []byte
	for _, f := range frames {
		h := f.h
		h.Len = 12345 // AppendFrame sets Len from the payload
		n := len(wire)
		wire = AppendFrame(wire, h, f.p)
		if got := len(wire) - n; got != HeaderSize+len(f.p) {
			t.Fatalf("AppendFrame appended %d bytes, want %d", got, HeaderSize+len(f.p))
		}
	}
	readers := map[string]func(io.Reader) io.Reader{
		"plain":   func(r io.Reader) io.Reader { return r },
		"onebyte": iotest.OneByteReader,
		"half":    iotest.HalfReader,
		"dataerr": iotest.DataErrReader,
	}
	for name, wrap := range readers {
		t.Run(name, func(t *testing.T) {
			r := wrap(bytes.NewReader(wire))
			hdr := make([]byte, HeaderSize)
			for i, f := range frames {
				h, p, err := ReadFrame(r, hdr)
				if err != nil {
					t.Fatalf("frame %d: ReadFrame: %v", i, err)
				}
				want := f.h
				want.Len = uint32(len(f.p))
				if h != want {
					t.Fatalf("frame %d: header %+v, want %+v", i, h, want)
				}
				if !bytes.Equal(p, f.p) {
					t.Fatalf("frame %d: payload differs (%d bytes, want %d)", i, len(p), len(f.p))
				}
				if len(f.p) == 0 && p != nil {
					t.Fatalf("frame %d: empty payload is %#v, want nil", i, p)
				}
			}
			if _, _, err := ReadFrame(r, hdr); err != io.EOF {
				t.Fatalf("ReadFrame at the end = %v, want io.EOF", err)
			}
		})
	}
}

func TestReadFramePayloadOwned(t *testing.T) {
	wire := AppendFrame(nil, Header{Type: FData, Stream: 1}, []byte("abc"))
	wire = AppendFrame(wire, Header{Type: FData, Stream: 1}, []byte("def"))
	r := bytes.NewReader(wire)
	hdr := make([]byte, HeaderSize)
	_, p1, err := ReadFrame(r, hdr)
	if err != nil {
		t.Fatal(err)
	}
	_, p2, err := ReadFrame(r, hdr)
	if err != nil {
		t.Fatal(err)
	}
	if string(p1) != "abc" || string(p2) != "def" {
		t.Fatalf("payloads %q %q, want abc def", p1, p2)
	}
	wire[HeaderSize] = 'X'
	if string(p1) != "abc" {
		t.Fatalf("payload aliases the input")
	}
}

// ReadFrame reads into hdr[:HeaderSize]: a buffer of length 0 but capacity
// HeaderSize must work (it used to make ParseHeader index past len(hdr)).
func TestReadFrameHeaderBufferCapacity(t *testing.T) {
	wire := AppendFrame(nil, Header{Type: FData, Flags: FlagEnd, Stream: 2}, []byte("xy"))
	h, p, err := ReadFrame(bytes.NewReader(wire), make([]byte, 0, HeaderSize))
	if err != nil {
		t.Fatal(err)
	}
	if h != (Header{Type: FData, Flags: FlagEnd, Stream: 2, Len: 2}) || string(p) != "xy" {
		t.Fatalf("got %+v %q", h, p)
	}
}

func TestReadFrameTruncated(t *testing.T) {
	wire := AppendFrame(nil, Header{Type: FData, Stream: 1}, []byte("0123456789"))
	hdr := make([]byte, HeaderSize)
	for n := 0; n < len(wire); n++ {
		_, p, err := ReadFrame(bytes.NewReader(wire[:n]), hdr)
		want := io.ErrUnexpectedEOF
		if n == 0 {
			want = io.EOF
		}
		if err != want {
			t.Errorf("ReadFrame of %d of %d bytes = %v, want %v", n, len(wire), err, want)
		}
		if p != nil {
			t.Errorf("ReadFrame of %d bytes returned a payload with an error", n)
		}
	}
	// A clean end after whole frames is io.EOF; a partial frame after
	// whole frames is io.ErrUnexpectedEOF.
	two := append(append([]byte(nil), wire...), wire...)
	for n := len(wire); n <= len(two); n++ {
		r := bytes.NewReader(two[:n])
		if _, _, err := ReadFrame(r, hdr); err != nil {
			t.Fatalf("first frame: %v", err)
		}
		_, _, err := ReadFrame(r, hdr)
		switch {
		case n == len(wire) && err != io.EOF:
			t.Errorf("after one frame: %v, want io.EOF", err)
		case n > len(wire) && n < len(two) && err != io.ErrUnexpectedEOF:
			t.Errorf("partial second frame (%d bytes): %v, want io.ErrUnexpectedEOF", n-len(wire), err)
		case n == len(two) && err != nil:
			t.Errorf("second frame: %v", err)
		}
	}
}

func TestReadFrameLimits(t *testing.T) {
	hdr := make([]byte, HeaderSize)
	ok := append(header(FData, 0, 0, 0, 1, MaxPayload), make([]byte, MaxPayload)...)
	h, p, err := ReadFrame(bytes.NewReader(ok), hdr)
	if err != nil || h.Len != MaxPayload || len(p) != MaxPayload {
		t.Fatalf("MaxPayload frame: %+v, %d bytes, %v", h, len(p), err)
	}

	// The length is checked before the payload is read or allocated.
	tooBig := header(FData, 0, 0, 0, 1, MaxPayload+1)
	_, p, err = ReadFrame(bytes.NewReader(tooBig), hdr)
	if !errors.Is(err, zx.ErrTooBig) || p != nil {
		t.Fatalf("MaxPayload+1 frame: %d bytes, %v; want ErrTooBig", len(p), err)
	}
	huge := header(FData, 0, 0, 0, 1, math.MaxUint32)
	allocs := testing.AllocsPerRun(10, func() { ReadFrame(bytes.NewReader(huge), hdr) })
	if allocs > 10 {
		t.Errorf("rejecting a huge frame took %v allocations", allocs)
	}

	for _, b := range [][]byte{
		header(0, 0, 0, 0, 1, 0),
		header(FDirs+1, 0, 0, 0, 1, 0),
		header(FData, 8, 0, 0, 1, 0),
		header(FReq, FlagZstd, 0, 0, 1, 0),
		header(FData, 0, 1, 0, 1, 0),
	} {
		_, _, err := ReadFrame(bytes.NewReader(b), hdr)
		if !errors.Is(err, zx.ErrProtocol) {
			t.Errorf("ReadFrame(% x) = %v, want ErrProtocol", b, err)
		}
	}
}

func TestReadFrameReaderError(t *testing.T) {
	boom := errors.New("boom")
	hdr := make([]byte, HeaderSize)
	if _, _, err := ReadFrame(iotest.ErrReader(boom), hdr); err != boom {
		t.Fatalf("header read error: %v, want boom", err)
	}
	wire := AppendFrame(nil, Header{Type: FData, Stream: 1}, []byte("abcdef"))
	r := io.MultiReader(bytes.NewReader(wire[:HeaderSize+2]), iotest.ErrReader(boom))
	if _, _, err := ReadFrame(r, hdr); err != boom {
		t.Fatalf("payload read error: %v, want boom", err)
	}
}

func TestWindow(t *testing.T) {
	for _, v := range []uint32{1, 2, InitialStreamWindow, InitialConnWindow, math.MaxUint32} {
		b := AppendWindow(nil, v)
		if len(b) != 4 {
			t.Fatalf("AppendWindow(%d) is %d bytes", v, len(b))
		}
		got, err := ParseWindow(b)
		if err != nil || got != v {
			t.Fatalf("ParseWindow(AppendWindow(%d)) = %d, %v", v, got, err)
		}
	}
	if b := AppendWindow([]byte("pre"), 7); string(b[:3]) != "pre" || len(b) != 7 {
		t.Fatalf("AppendWindow does not append: % x", b)
	}
	for _, b := range [][]byte{nil, {}, {1}, {1, 0, 0}, {1, 0, 0, 0, 0}, {0, 0, 0, 0}} {
		if _, err := ParseWindow(b); !errors.Is(err, zx.ErrProtocol) {
			t.Errorf("ParseWindow(% x) = %v, want ErrProtocol", b, err)
		}
	}
}
