package proto

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zxfs/zx"
)

// normRequest makes nil and empty Dirs equal: the wire does not tell them
// apart.
func normRequest(r *Request) *Request {
	c := *r
	if len(c.Dir) == 0 {
		c.Dir = nil
	}
	return &c
}

func normDir(d zx.Dir) zx.Dir {
	if len(d) == 0 {
		return nil
	}
	return d
}

func normHello(h *Hello) *Hello {
	c := *h
	if len(c.Features) == 0 {
		c.Features = nil
	}
	return &c
}

func normEvent(ev *Event) *Event {
	c := *ev
	c.Dir = normDir(c.Dir)
	return &c
}

// carried zeroes the fields that op does not send.
func carried(r Request) Request {
	w := Request{Op: r.Op, Tree: r.Tree, Path: r.Path, HasCaller: r.HasCaller, Uid: r.Uid, Gid: r.Gid}
	switch r.Op {
	case OpGet:
		w.Off, w.Count = r.Off, r.Count
	case OpPut:
		w.Dir, w.Off = r.Dir, r.Off
	case OpMove, OpLink:
		w.To = r.To
	case OpWstat:
		w.Dir = r.Dir
	case OpFind, OpFindGet:
		w.Pred, w.Spref, w.Dpref, w.Depth = r.Pred, r.Spref, r.Dpref, r.Depth
	case OpRecalls:
		w.Owner = r.Owner
	case OpAllocate:
		w.Mode, w.Off, w.Count = r.Mode, r.Off, r.Count
	}
	return w
}

func manyAttrs(n int) zx.Dir {
	d := zx.Dir{}
	for i := range n {
		d[fmt.Sprintf("attr%04d", i)] = strings.Repeat("v", i%7)
	}
	return d
}

var bigDir = zx.Dir{
	"name": "ünïcödé", "path": "/a/ünïcödé", "type": "-", "size": "123456789012",
	"mode": "0644", "mtime": "1700000000000000000", "uid": "1000", "gid": "1000",
	"empty": "", "Excl": "y", "user.x": "val\x00with\nnul", "Ω": "日本語",
	strings.Repeat("k", 300): strings.Repeat("v", 1000),
}

// requestTests are valid requests holding only the fields their op sends.
var requestTests = []struct {
	name string
	r    Request
}{
	{"attach empty", Request{Op: OpAttach}},
	{"attach tree", Request{Op: OpAttach, Tree: "home", Path: "/"}},
	{"stat", Request{Op: OpStat, Tree: "t", Path: "/a/b"}},
	{"stat unicode", Request{Op: OpStat, Path: "/ünï/日本語/🙂"}},
	{"stat empty", Request{Op: OpStat}},
	{"get zero", Request{Op: OpGet, Path: "/f"}},
	{"get all", Request{Op: OpGet, Path: "/f", Off: 0, Count: -1}},
	{"get large", Request{Op: OpGet, Path: "/f", Off: math.MaxInt64, Count: math.MaxInt64}},
	{"get negative", Request{Op: OpGet, Path: "/f", Off: math.MinInt64, Count: math.MinInt64}},
	{"get mixed", Request{Op: OpGet, Tree: "x", Path: "/f", Off: -1, Count: 1 << 40}},
	{"put nil dir", Request{Op: OpPut, Path: "/f"}},
	{"put append", Request{Op: OpPut, Path: "/f", Dir: zx.Dir{"type": "-"}, Off: -1}},
	{"put big dir", Request{Op: OpPut, Tree: "t", Path: "/a/ünïcödé", Dir: bigDir, Off: math.MaxInt64}},
	{"put many attrs", Request{Op: OpPut, Path: "/f", Dir: manyAttrs(500), Off: math.MinInt64}},
	{"put empty values", Request{Op: OpPut, Path: "/f", Dir: zx.Dir{"a": "", "b": "", "c": ""}}},
	{"move", Request{Op: OpMove, Path: "/a", To: "/b"}},
	{"move empty", Request{Op: OpMove}},
	{"move unicode", Request{Op: OpMove, Tree: "τ", Path: "/α", To: "/β/γ"}},
	{"link", Request{Op: OpLink, Path: "/a", To: "/b/c"}},
	{"statfs", Request{Op: OpStatFS, Tree: "t", Path: "/"}},
	{"sync", Request{Op: OpSync, Tree: "t", Path: "/a/b"}},
	{"sync root", Request{Op: OpSync, Path: "/"}},
	{"allocate", Request{Op: OpAllocate, Tree: "t", Path: "/db", Off: 4096, Count: 1 << 20}},
	{"allocate punch", Request{Op: OpAllocate, Path: "/f", Mode: 0x03, Off: 0, Count: 1}},
	{"allocate zero keep caller", Request{Op: OpAllocate, Path: "/f", Mode: 0x11, Off: 1 << 40, Count: 65536, HasCaller: true, Uid: 1000, Gid: 100}},
	{"allocate extreme", Request{Op: OpAllocate, Path: "/f", Mode: math.MaxUint32, Off: math.MinInt64, Count: math.MaxInt64}},
	{"remove", Request{Op: OpRemove, Path: "/a"}},
	{"removeall", Request{Op: OpRemoveAll, Tree: "t", Path: "/a/b/c"}},
	{"wstat nil", Request{Op: OpWstat, Path: "/a"}},
	{"wstat", Request{Op: OpWstat, Path: "/a", Dir: zx.Dir{"mode": "0755", "user.tag": ""}}},
	{"wstat big", Request{Op: OpWstat, Path: "/a", Dir: bigDir}},
	{"find", Request{Op: OpFind, Path: "/", Pred: "name=*.o", Spref: "/", Dpref: "/x", Depth: 0}},
	{"find empty", Request{Op: OpFind}},
	{"find negative depth", Request{Op: OpFind, Path: "/a", Depth: -1}},
	{"find extreme depth", Request{Op: OpFind, Path: "/a", Depth: math.MinInt64}},
	{"findget", Request{Op: OpFindGet, Tree: "t", Path: "/ü", Pred: "type=- & size>0", Spref: "/ü", Dpref: "", Depth: math.MaxInt64}},
	{"watch", Request{Op: OpWatch, Path: "/w"}},
	{"delegate", Request{Op: OpDelegate, Tree: "t", Path: "/d"}},
	{"recalls", Request{Op: OpRecalls, Path: "/", Owner: "3f2a9c0d-owner"}},
	{"recalls long owner", Request{Op: OpRecalls, Path: "/", Owner: strings.Repeat("o", MaxOwner)}},
	{"return", Request{Op: OpReturn, Path: "/d/e"}},
	{"long path", Request{Op: OpStat, Path: "/" + strings.Repeat("x", 5000)}},
	{"stat caller", Request{Op: OpStat, Path: "/a", HasCaller: true, Uid: 1000, Gid: 100}},
	{"put caller root", Request{Op: OpPut, Path: "/f", Dir: zx.Dir{"type": "-"}, HasCaller: true}},
	{"find caller max", Request{Op: OpFind, Path: "/", Pred: "", HasCaller: true, Uid: math.MaxUint32, Gid: math.MaxUint32, Depth: 2}},
}

func TestRequestRoundTrip(t *testing.T) {
	seen := map[uint8]bool{}
	for _, tt := range requestTests {
		t.Run(tt.name, func(t *testing.T) {
			seen[tt.r.Op] = true
			b := AppendRequest(nil, &tt.r)
			if b[0]&^opCaller != tt.r.Op || (b[0]&opCaller != 0) != tt.r.HasCaller {
				t.Fatalf("first byte %d, want op %d", b[0], tt.r.Op)
			}
			got, err := ParseRequest(b)
			if err != nil {
				t.Fatalf("ParseRequest: %v", err)
			}
			if !reflect.DeepEqual(normRequest(got), normRequest(&tt.r)) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, tt.r)
			}
			// Encoding is deterministic (attributes sorted).
			if b2 := AppendRequest(nil, got); !bytes.Equal(b, b2) {
				t.Fatalf("re-encoding differs:\n% x\n% x", b, b2)
			}
			// Append appends.
			pre := []byte("prefix")
			b3 := AppendRequest(pre, &tt.r)
			if string(b3[:len(pre)]) != "prefix" || !bytes.Equal(b3[len(pre):], b) {
				t.Fatalf("AppendRequest does not append")
			}
		})
	}
	for op := uint8(OpAttach); op <= maxOp; op++ {
		if !seen[op] && opNames[op] != "" {
			t.Errorf("no round-trip test for op %d (%s)", op, OpName(op))
		}
	}
}

// Fields an op does not carry are not sent.
func TestRequestDropsUnusedFields(t *testing.T) {
	for op := uint8(OpAttach); op <= maxOp; op++ {
		if opNames[op] == "" {
			continue // not a request (yet)
		}
		full := Request{
			Op: op, Tree: "tree", Path: "/path", To: "/to", Off: -7, Count: 99, Mode: 0x11,
			Dir: zx.Dir{"a": "b"}, Pred: "pred", Spref: "/s", Dpref: "/d", Depth: 3, Owner: "me",
		}
		got, err := ParseRequest(AppendRequest(nil, &full))
		if err != nil {
			t.Fatalf("%s: %v", OpName(op), err)
		}
		want := carried(full)
		if !reflect.DeepEqual(normRequest(got), normRequest(&want)) {
			t.Errorf("%s:\n got %+v\nwant %+v", OpName(op), got, want)
		}
	}
}

func TestParseRequestBadOwner(t *testing.T) {
	for _, owner := range []string{"", strings.Repeat("o", MaxOwner+1)} {
		b := AppendRequest(nil, &Request{Op: OpRecalls, Path: "/", Owner: owner})
		if r, err := ParseRequest(b); !errors.Is(err, zx.ErrProtocol) || r != nil {
			t.Errorf("recalls with owner of %d bytes: %+v, %v; want ErrProtocol", len(owner), r, err)
		}
	}
}

// An allocate's mode is a 32-bit value, and its fields must all be there.
func TestParseRequestBadAllocate(t *testing.T) {
	good := AppendRequest(nil, &Request{Op: OpAllocate, Path: "/f", Mode: 1, Off: 2, Count: 3})
	if r, err := ParseRequest(good); err != nil || r.Mode != 1 || r.Off != 2 || r.Count != 3 {
		t.Fatalf("ParseRequest(% x) = %+v, %v", good, r, err)
	}
	for _, b := range [][]byte{
		append(binary.AppendUvarint([]byte{OpAllocate, 0, 2, '/', 'f'}, 1<<32), 0, 2), // mode too large
		good[:len(good)-1], // count missing
		good[:len(good)-2], // off and count missing
		good[:len(good)-3], // everything missing
		append(good, 0),    // trailing garbage
	} {
		if r, err := ParseRequest(b); !errors.Is(err, zx.ErrProtocol) || r != nil {
			t.Errorf("ParseRequest(% x) = %+v, %v; want ErrProtocol", b, r, err)
		}
	}
}

func TestParseRequestBadCaller(t *testing.T) {
	for _, b := range [][]byte{
		{OpStat | opCaller, 0, 0},       // ids missing
		{OpStat | opCaller, 0, 0, 1},    // gid missing
		{OpStat | opCaller, 0, 0, 0x80}, // truncated varint
		append(binary.AppendUvarint([]byte{OpStat | opCaller, 0, 0}, 1<<32), 0), // uid too large
	} {
		if r, err := ParseRequest(b); !errors.Is(err, zx.ErrProtocol) || r != nil {
			t.Errorf("ParseRequest(% x) = %+v, %v; want ErrProtocol", b, r, err)
		}
	}
}

func TestParseRequestUnknownOp(t *testing.T) {
	for _, op := range []uint8{0, maxOp + 1, 100, 255} {
		b := []byte{op, 0, 0}
		r, err := ParseRequest(b)
		if !errors.Is(err, zx.ErrProtocol) || r != nil {
			t.Errorf("ParseRequest(op %d) = %v, %v; want ErrProtocol", op, r, err)
		}
	}
}

func TestOpName(t *testing.T) {
	want := map[uint8]string{
		OpAttach: "attach", OpStat: "stat", OpGet: "get", OpPut: "put", OpMove: "move",
		OpRemove: "remove", OpRemoveAll: "removeall", OpWstat: "wstat", OpFind: "find",
		OpFindGet: "findget", OpWatch: "watch", OpLink: "link", OpStatFS: "statfs", OpSync: "sync", OpAllocate: "allocate", OpDelegate: "delegate", OpRecalls: "recalls", OpReturn: "return", 0: "", 19: "op19", 255: "op255",
	}
	for op, name := range want {
		if got := OpName(op); got != name {
			t.Errorf("OpName(%d) = %q, want %q", op, got, name)
		}
	}
}

func TestDirRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		d    zx.Dir
	}{
		{"nil", nil},
		{"empty", zx.Dir{}},
		{"one", zx.Dir{"path": "/"}},
		{"empty value", zx.Dir{"x": ""}},
		{"big", bigDir},
		{"many", manyAttrs(2000)},
		{"binary", zx.Dir{"\x00": "\xff\xfe", "\xff": "\x00"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := AppendDir(nil, tt.d)
			got, err := ParseDir(b)
			if err != nil {
				t.Fatalf("ParseDir: %v", err)
			}
			if got == nil {
				t.Fatalf("ParseDir returned a nil Dir without an error")
			}
			if !reflect.DeepEqual(normDir(got), normDir(tt.d)) {
				t.Fatalf("round trip: got %v, want %v", got, tt.d)
			}
			if b2 := AppendDir(nil, got); !bytes.Equal(b, b2) {
				t.Fatalf("re-encoding differs")
			}
		})
	}
}

func TestDirEncodingSorted(t *testing.T) {
	b := AppendDir(nil, zx.Dir{"b": "2", "a": "1", "c": ""})
	want := []byte{3, 1, 'a', 1, '1', 1, 'b', 1, '2', 1, 'c', 0}
	if !bytes.Equal(b, want) {
		t.Fatalf("AppendDir = % x, want % x", b, want)
	}
}

// TestDirEncodingSortedShapes checks the order on the wire for entries of
// every shape AppendDir treats differently: the twelve attributes of a
// plain entry (looked up in order), twelve others, a plain entry with one
// more, and more attributes than fit on the stack.
func TestDirEncodingSortedShapes(t *testing.T) {
	if !slices.IsSorted(plainAttrs[:]) {
		t.Fatalf("plainAttrs not sorted: %v", plainAttrs)
	}
	plain := zx.Dir{}
	for i, k := range plainAttrs {
		plain[k] = strconv.Itoa(i)
	}
	twelve := zx.Dir{}
	for i := range len(plainAttrs) {
		twelve[fmt.Sprintf("k%02d", 11-i)] = "v"
	}
	more := plain.Clone()
	more["color"] = "red"
	many := zx.Dir{}
	for i := range 100 {
		many[fmt.Sprintf("a%03d", 99-i)] = strconv.Itoa(i)
	}
	for _, d := range []zx.Dir{plain, twelve, more, many} {
		b := AppendDir(nil, d)
		// The names, in wire order.
		var names []string
		r := b[1:]
		for len(r) > 0 {
			for range 2 {
				n := int(r[0])
				names = append(names, string(r[1:1+n]))
				r = r[1+n:]
			}
			names = names[:len(names)-1]
		}
		if len(names) != len(d) || !slices.IsSorted(names) {
			t.Fatalf("AppendDir of %d attributes: names on the wire %v", len(d), names)
		}
		got, err := ParseDir(b)
		if err != nil || !reflect.DeepEqual(got, d) {
			t.Fatalf("round trip of %v: %v %v", d, got, err)
		}
	}
}

var allKinds = []zx.Kind{
	zx.ErrOther, zx.ErrNotExist, zx.ErrExist, zx.ErrNotEmpty, zx.ErrPermission,
	zx.ErrNotDir, zx.ErrIsDir, zx.ErrReadOnly, zx.ErrNoSpace, zx.ErrInvalid, zx.ErrIO,
	zx.ErrCanceled, zx.ErrTimeout, zx.ErrNameTooLong, zx.ErrCrossDev, zx.ErrNotSupp,
	zx.ErrNotPermit, zx.ErrLoop, zx.ErrTooBig, zx.ErrProtocol, zx.ErrBusy, zx.ErrAuth,
	zx.ErrLimit,
}

func TestErrorEachKind(t *testing.T) {
	for _, k := range allKinds {
		if !k.Valid() {
			t.Fatalf("kind %d is not valid", k)
		}
		for _, in := range []*zx.Error{
			{Kind: k},
			{Kind: k, Op: "stat", Path: "/a/b", Msg: "detail"},
			{Kind: k, Op: OpName(OpPut), Path: "/ünï/🙂", Msg: strings.Repeat("m", 10000)},
		} {
			got, err := ParseError(AppendError(nil, in))
			if err != nil {
				t.Fatalf("ParseError(%v): %v", in, err)
			}
			if !reflect.DeepEqual(got, in) {
				t.Fatalf("round trip: got %#v, want %#v", got, in)
			}
			if !errors.Is(got, k) {
				t.Fatalf("errors.Is(%v, %v) is false", got, k)
			}
		}
		// A bare Kind is sent as an error of that kind.
		got, err := ParseError(AppendError(nil, k))
		if err != nil {
			t.Fatal(err)
		}
		if want := (&zx.Error{Kind: k}); !reflect.DeepEqual(got, want) {
			t.Fatalf("bare kind %v: got %#v", k, got)
		}
	}
}

func TestErrorConversions(t *testing.T) {
	underlying := errors.New("disk on fire")
	tests := []struct {
		name string
		in   error
		want *zx.Error
	}{
		{"plain", errors.New("boom"), &zx.Error{Kind: zx.ErrOther, Msg: "boom"}},
		{"plain empty", errors.New(""), &zx.Error{Kind: zx.ErrOther}},
		{"fmt", fmt.Errorf("a %d", 1), &zx.Error{Kind: zx.ErrOther, Msg: "a 1"}},
		{"fs sentinel", fs.ErrNotExist, &zx.Error{Kind: zx.ErrNotExist, Msg: fs.ErrNotExist.Error()}},
		{"zx.E", zx.E(zx.ErrExist, "put", "/x", "m"), &zx.Error{Kind: zx.ErrExist, Op: "put", Path: "/x", Msg: "m"}},
		{"Err not sent, used as Msg", &zx.Error{Kind: zx.ErrIO, Op: "get", Path: "/f", Err: underlying},
			&zx.Error{Kind: zx.ErrIO, Op: "get", Path: "/f", Msg: "disk on fire"}},
		{"Msg wins over Err", &zx.Error{Kind: zx.ErrIO, Msg: "m", Err: underlying},
			&zx.Error{Kind: zx.ErrIO, Msg: "m"}},
		{"wrapped zx error", fmt.Errorf("ctx: %w", zx.E(zx.ErrNotDir, "stat", "/a", "")),
			&zx.Error{Kind: zx.ErrNotDir, Msg: "ctx: stat /a: not a directory"}},
		{"kind 0 becomes ErrOther", &zx.Error{Op: "x", Msg: "y"}, &zx.Error{Kind: zx.ErrOther, Op: "x", Msg: "y"}},
		{"unknown kind becomes ErrOther", &zx.Error{Kind: 200, Path: "/p"}, &zx.Error{Kind: zx.ErrOther, Path: "/p"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseError(AppendError(nil, tt.in))
			if err != nil {
				t.Fatalf("ParseError: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %#v, want %#v", got, tt.want)
			}
		})
	}
	// AppendError must not modify the caller's error.
	in := &zx.Error{Kind: zx.ErrIO, Err: underlying}
	AppendError(nil, in)
	if in.Msg != "" {
		t.Fatalf("AppendError modified its argument: %#v", in)
	}
}

func TestErrorUnknownKindOnWire(t *testing.T) {
	for _, k := range []uint8{0, uint8(zx.ErrLimit) + 1, 100, 255} {
		b := []byte{k, 2, 'o', 'p', 2, '/', 'a', 1, 'm'}
		got, err := ParseError(b)
		if err != nil {
			t.Fatalf("kind %d: %v", k, err)
		}
		want := &zx.Error{Kind: zx.ErrOther, Op: "op", Path: "/a", Msg: "m"}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("kind %d: got %#v, want %#v", k, got, want)
		}
	}
}

func TestHelloRoundTrip(t *testing.T) {
	tests := []Hello{
		{},
		{Version: Version},
		{Version: Version, MaxStreams: 100, Features: []string{"watch", "findget"}},
		{Version: math.MaxUint64, MaxStreams: math.MaxUint64, Features: []string{""}},
		{Version: 2, Features: []string{"", "ü", strings.Repeat("f", 300), ""}},
		{Features: []string{}},
		{Features: strings.Split(strings.Repeat("x,", 1000), ",")},
	}
	for i, h := range tests {
		b := AppendHello(nil, &h)
		if string(b[:2]) != "zx" {
			t.Fatalf("%d: no magic: % x", i, b)
		}
		got, err := ParseHello(b)
		if err != nil {
			t.Fatalf("%d: ParseHello: %v", i, err)
		}
		if !reflect.DeepEqual(normHello(got), normHello(&h)) {
			t.Fatalf("%d: got %+v, want %+v", i, got, h)
		}
	}
}

// An acknowledgement is one sequence number; one without the flag in the
// kind byte is the version 1 encoding, byte for byte.
func TestAckRoundTrip(t *testing.T) {
	for _, seq := range []uint64{1, 127, 128, 1 << 40, 1<<64 - 1} {
		got, err := ParseAck(AppendAck(nil, seq))
		if err != nil || got != seq {
			t.Errorf("ParseAck(AppendAck(%d)) = %d, %v", seq, got, err)
		}
	}
	b := AppendEvent(nil, &Event{Kind: uint8(zx.Changed), Dir: zx.Dir{"path": "/a"}})
	if b[0] != uint8(zx.Changed) {
		t.Errorf("unnumbered event starts with %#x, want the bare kind", b[0])
	}
	b = AppendEvent(nil, &Event{Kind: uint8(zx.Changed), Seq: 9, Dir: zx.Dir{"path": "/a"}})
	if b[0] != 0x80|uint8(zx.Changed) || b[1] != 9 {
		t.Errorf("numbered event starts with % x, want 82 09", b[:2])
	}
}

func TestHelloNotZx(t *testing.T) {
	for _, b := range [][]byte{nil, {}, []byte("z"), []byte("xz\x01\x00\x00"), []byte("ZX\x01\x00\x00"), []byte("HTTP/1.1 200 OK")} {
		if _, err := ParseHello(b); !errors.Is(err, zx.ErrProtocol) {
			t.Errorf("ParseHello(%q) = %v, want ErrProtocol", b, err)
		}
	}
}

func TestEventRoundTrip(t *testing.T) {
	tests := []Event{
		{},
		{Kind: uint8(zx.Ready)},
		{Kind: uint8(zx.Created), Dir: zx.Dir{"path": "/a", "type": "-"}},
		{Kind: uint8(zx.Changed), Dir: bigDir},
		{Kind: uint8(zx.Removed), Dir: zx.Dir{"path": "/ü"}},
		{Kind: uint8(zx.Moved), From: "/old/ünï", Dir: zx.Dir{"path": "/new"}},
		{Kind: uint8(zx.Overflow)},
		{Kind: 127, From: "x", Dir: manyAttrs(300)},
		{Kind: uint8(zx.Changed), Seq: 1, Dir: zx.Dir{"path": "/a", "size": "3"}},
		{Kind: uint8(zx.Moved), Seq: 1<<63 + 5, From: "/a", Dir: zx.Dir{"path": "/b"}},
		{Kind: uint8(zx.Overflow), Seq: 300},
	}
	for i, ev := range tests {
		got, err := ParseEvent(AppendEvent(nil, &ev))
		if err != nil {
			t.Fatalf("%d: ParseEvent: %v", i, err)
		}
		if !reflect.DeepEqual(normEvent(got), normEvent(&ev)) {
			t.Fatalf("%d: got %+v, want %+v", i, got, ev)
		}
	}
}

func TestGrantRoundTrip(t *testing.T) {
	for _, g := range []Grant{
		{},
		{Refused: true},
		{Held: true},
		{Revoked: true, Touched: []string{"/d/x", "/d/ünï"}},
		{Revoked: true, All: true},
	} {
		b := AppendGrant(nil, &g)
		got, err := ParseGrant(b)
		if err != nil || !reflect.DeepEqual(*got, g) {
			t.Errorf("%+v: % x -> %+v %v", g, b, got, err)
		}
	}
	for _, b := range [][]byte{{0x10, 0}, {4, 5, 1, 'x'}, {4, 1}, {4, 0, 0}} {
		if g, err := ParseGrant(b); !errors.Is(err, zx.ErrProtocol) {
			t.Errorf("ParseGrant(% x) = %+v %v, want ErrProtocol", b, g, err)
		}
	}
}
