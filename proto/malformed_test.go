package proto

import (
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/zxfs/zx"
)

// parser is a message decoder under test, reduced to its error.
type parser struct {
	name  string
	parse func([]byte) error
}

var parsers = []parser{
	{"Request", func(b []byte) error { _, err := ParseRequest(b); return err }},
	{"Dir", func(b []byte) error { _, err := ParseDir(b); return err }},
	{"Error", func(b []byte) error { _, err := ParseError(b); return err }},
	{"Hello", func(b []byte) error { _, err := ParseHello(b); return err }},
	{"Event", func(b []byte) error { _, err := ParseEvent(b); return err }},
	{"Window", func(b []byte) error { _, err := ParseWindow(b); return err }},
	{"Ack", func(b []byte) error { _, err := ParseAck(b); return err }},
	{"Dirs", func(b []byte) error { _, err := ParseDirs(b); return err }},
}

func parserFor(name string) func([]byte) error {
	for _, p := range parsers {
		if p.name == name {
			return p.parse
		}
	}
	panic(name)
}

// validEncodings returns valid encodings of every message, by parser name.
func validEncodings() map[string][][]byte {
	m := map[string][][]byte{}
	for _, tt := range requestTests {
		m["Request"] = append(m["Request"], AppendRequest(nil, &tt.r))
	}
	for _, d := range []zx.Dir{nil, {"a": ""}, {"path": "/ü", "type": "d", "x": "yy"}, bigDir} {
		m["Dir"] = append(m["Dir"], AppendDir(nil, d))
	}
	for _, k := range allKinds {
		m["Error"] = append(m["Error"], AppendError(nil, k), AppendError(nil, zx.E(k, "get", "/a/ü", "msg")))
	}
	for _, h := range []Hello{{}, {Version: 1, MaxStreams: 1 << 40, Features: []string{"", "a", "bc"}}} {
		m["Hello"] = append(m["Hello"], AppendHello(nil, &h))
	}
	for _, ev := range []Event{{}, {Kind: 4, From: "/a", Dir: zx.Dir{"path": "/b", "q": ""}}, {Kind: 2, Seq: 1 << 40, Dir: zx.Dir{"path": "/c"}}} {
		m["Event"] = append(m["Event"], AppendEvent(nil, &ev))
	}
	m["Window"] = [][]byte{AppendWindow(nil, 1), AppendWindow(nil, math.MaxUint32)}
	m["Ack"] = [][]byte{AppendAck(nil, 1), AppendAck(nil, math.MaxUint64)}
	m["Dirs"] = [][]byte{AppendDirs(nil, []zx.Dir{nil}), AppendDirs(nil, []zx.Dir{{"a": ""}, nil, bigDir}),
		AppendDirs(nil, []zx.Dir{{"path": "/ü", "type": "d", "x": "yy"}, {"path": "/b"}})}
	return m
}

// Every strict prefix of a valid encoding is an error, never a panic: the
// encodings are prefix-free.
func TestTruncatedMessages(t *testing.T) {
	for name, encs := range validEncodings() {
		parse := parserFor(name)
		for _, b := range encs {
			if err := parse(b); err != nil {
				t.Fatalf("%s: valid encoding % x rejected: %v", name, b, err)
			}
			for n := 0; n < len(b); n++ {
				// A copy with no spare capacity, so reads past the end fault.
				p := append([]byte(nil), b[:n]...)
				err := parse(p[:n:n])
				if err == nil {
					t.Fatalf("%s: prefix of %d of %d bytes accepted: % x", name, n, len(b), p)
				}
				if !errors.Is(err, zx.ErrProtocol) {
					t.Fatalf("%s: prefix of %d bytes: %v, want ErrProtocol", name, n, err)
				}
			}
		}
	}
}

func TestTrailingGarbage(t *testing.T) {
	for name, encs := range validEncodings() {
		parse := parserFor(name)
		for _, b := range encs {
			for _, junk := range [][]byte{{0}, {0xff}, []byte("garbage"), b} {
				p := append(append([]byte(nil), b...), junk...)
				if err := parse(p); !errors.Is(err, zx.ErrProtocol) {
					t.Fatalf("%s: % x plus % x trailing: %v, want ErrProtocol", name, b, junk, err)
				}
			}
		}
	}
}

func uv(v uint64) []byte { return binary.AppendUvarint(nil, v) }

func cat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

func TestMalformed(t *testing.T) {
	s := func(x string) []byte { return cat(uv(uint64(len(x))), []byte(x)) }
	overlong := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01} // 11 bytes
	overflow := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}       // > 2^64
	tests := []struct {
		name   string
		parser string
		b      []byte
	}{
		{"empty request", "Request", nil},
		{"string longer than message", "Request", cat([]byte{OpStat}, s(""), uv(5), []byte("abcd"))},
		{"string length 2^63", "Request", cat([]byte{OpStat}, uv(1<<63), []byte("abc"))},
		{"string length max", "Request", cat([]byte{OpStat}, uv(math.MaxUint64))},
		{"string length overflows", "Request", cat([]byte{OpStat}, overflow)},
		{"string length overlong", "Request", cat([]byte{OpStat}, overlong)},
		{"get bad varint", "Request", cat([]byte{OpGet}, s(""), s("/f"), overflow, uv(0))},
		{"get missing count", "Request", cat([]byte{OpGet}, s(""), s("/f"), uv(0))},
		{"move missing to", "Request", cat([]byte{OpMove}, s(""), s("/a"))},
		{"link missing to", "Request", cat([]byte{OpLink}, s(""), s("/a"))},
		{"put missing off", "Request", cat([]byte{OpPut}, s(""), s("/a"), AppendDir(nil, zx.Dir{"a": "b"}))},
		{"put duplicate attribute", "Request", cat([]byte{OpPut}, s(""), s("/a"), uv(2), s("k"), s("1"), s("k"), s("2"), uv(0))},
		{"wstat empty attribute name", "Request", cat([]byte{OpWstat}, s(""), s("/a"), uv(1), s(""), s("v"))},
		{"wstat huge count", "Request", cat([]byte{OpWstat}, s(""), s("/a"), uv(math.MaxUint64), s("k"), s("v"))},
		{"find missing depth", "Request", cat([]byte{OpFind}, s(""), s("/"), s("p"), s("/"), s("/"))},
		{"stat with extra field", "Request", cat([]byte{OpStat}, s(""), s("/a"), uv(0))},

		{"dir empty", "Dir", nil},
		{"dir duplicate", "Dir", cat(uv(2), s("a"), s("x"), s("a"), s("y"))},
		{"dir duplicate non-adjacent", "Dir", cat(uv(3), s("a"), s(""), s("b"), s(""), s("a"), s(""))},
		{"dir empty name", "Dir", cat(uv(1), s(""), s("v"))},
		{"dir count too large", "Dir", cat(uv(3), s("a"), s("x"), s("b"), s("y"))},
		{"dir count 2^62", "Dir", cat(uv(1<<62), s("a"), s("x"))},
		{"dir count max", "Dir", cat(uv(math.MaxUint64), s("a"), s("x"))},
		{"dir value too long", "Dir", cat(uv(1), s("a"), uv(100), []byte("short"))},
		{"dir key too long", "Dir", cat(uv(1), uv(100), []byte("short"))},
		{"dir count overflows", "Dir", overflow},
		{"dir count overlong", "Dir", overlong},

		{"error empty", "Error", nil},
		{"error kind only", "Error", []byte{1}},
		{"error string too long", "Error", cat([]byte{1}, s("op"), s("/p"), uv(10), []byte("m"))},
		{"error huge string", "Error", cat([]byte{1}, uv(math.MaxUint64))},

		{"hello magic only", "Hello", []byte("zx")},
		{"hello feature count too large", "Hello", cat([]byte("zx"), uv(1), uv(0), uv(2), s("a"))},
		{"hello feature count max", "Hello", cat([]byte("zx"), uv(1), uv(0), uv(math.MaxUint64), s("a"))},
		{"hello feature too long", "Hello", cat([]byte("zx"), uv(1), uv(0), uv(1), uv(9), []byte("a"))},
		{"hello version overflows", "Hello", cat([]byte("zx"), overflow, uv(0), uv(0))},

		{"event empty", "Event", nil},
		{"event no dir", "Event", cat([]byte{1}, s("/a"))},
		{"event duplicate", "Event", cat([]byte{1}, s(""), uv(2), s("p"), s(""), s("p"), s(""))},
		{"event huge count", "Event", cat([]byte{1}, s(""), uv(1<<40))},
		{"event sequence 0", "Event", cat([]byte{0x82}, uv(0), s(""), uv(0))},
		{"event sequence missing", "Event", []byte{0x82}},
		{"event sequence overflows", "Event", cat([]byte{0x82}, overflow, s(""), uv(0))},
		{"ack empty", "Ack", nil},
		{"ack 0", "Ack", uv(0)},
		{"ack trailing", "Ack", cat(uv(3), uv(0))},
		{"ack overflows", "Ack", overflow},

		{"dirs empty", "Dirs", nil},
		{"dirs count zero", "Dirs", uv(0)},
		{"dirs count zero with entry", "Dirs", cat(uv(0), AppendDir(nil, zx.Dir{"a": "b"}))},
		{"dirs count too large", "Dirs", cat(uv(3), AppendDir(nil, zx.Dir{"a": "b"}), AppendDir(nil, zx.Dir{"c": "d"}))},
		{"dirs count too small", "Dirs", cat(uv(1), AppendDir(nil, zx.Dir{"a": "b"}), AppendDir(nil, zx.Dir{"c": "d"}))},
		{"dirs count max", "Dirs", cat(uv(math.MaxUint64), AppendDir(nil, zx.Dir{"a": "b"}))},
		{"dirs count overflows", "Dirs", overflow},
		{"dirs truncated entry", "Dirs", cat(uv(2), AppendDir(nil, zx.Dir{"a": "b"}), uv(1), s("a"))},
		{"dirs bad entry", "Dirs", cat(uv(2), AppendDir(nil, zx.Dir{"a": "b"}), uv(2), s("a"), s("x"), s("a"), s("y"))},
		{"dirs oversize", "Dirs", cat(uv(1), AppendDir(nil, zx.Dir{"a": strings.Repeat("x", MaxPayload)}))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := parserFor(tt.parser)(tt.b)
			if err == nil {
				t.Fatalf("Parse%s(% x) succeeded", tt.parser, tt.b)
			}
			if !errors.Is(err, zx.ErrProtocol) {
				t.Fatalf("Parse%s(% x) = %v, want ErrProtocol", tt.parser, tt.b, err)
			}
		})
	}
}

// Failed parses return a nil message, so callers cannot use half of one.
func TestParseFailureReturnsNil(t *testing.T) {
	bad := []byte{0xff}
	if r, err := ParseRequest(bad); r != nil || err == nil {
		t.Errorf("ParseRequest: %v, %v", r, err)
	}
	if d, err := ParseDir(bad); d != nil || err == nil {
		t.Errorf("ParseDir: %v, %v", d, err)
	}
	if e, err := ParseError(bad); e != nil || err == nil {
		t.Errorf("ParseError: %v, %v", e, err)
	}
	if h, err := ParseHello(bad); h != nil || err == nil {
		t.Errorf("ParseHello: %v, %v", h, err)
	}
	if ev, err := ParseEvent(bad); ev != nil || err == nil {
		t.Errorf("ParseEvent: %v, %v", ev, err)
	}
	if ds, err := ParseDirs(cat(uv(2), AppendDir(nil, zx.Dir{"a": "b"}), bad)); ds != nil || err == nil {
		t.Errorf("ParseDirs: %v, %v", ds, err)
	}
}

// bytesAllocated returns the bytes f allocates, averaged over runs.
func bytesAllocated(runs int, f func()) uint64 {
	f() // warm up
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for range runs {
		f()
	}
	runtime.ReadMemStats(&m1)
	return (m1.TotalAlloc - m0.TotalAlloc) / uint64(runs)
}

// Counts on the wire are bounded by the bytes that remain before anything is
// allocated for them: a tiny message claiming a huge count allocates little.
func TestHugeCountsDoNotAllocate(t *testing.T) {
	tests := []struct {
		name  string
		parse func([]byte) error
		b     []byte
	}{
		{"dir", parserFor("Dir"), cat(uv(1<<62), []byte("\x01a\x01b"))},
		{"dir max", parserFor("Dir"), cat(uv(math.MaxUint64), []byte("\x01a\x01b"))},
		{"dir just too many", parserFor("Dir"), cat(uv(3), []byte("\x01a\x01b\x00"))},
		{"put", parserFor("Request"), cat([]byte{OpPut, 0, 1, '/'}, uv(1<<40), []byte{0})},
		{"wstat", parserFor("Request"), cat([]byte{OpWstat, 0, 1, '/'}, uv(1<<50), []byte{0})},
		{"event", parserFor("Event"), cat([]byte{1, 0}, uv(1<<60), []byte{0})},
		{"hello", parserFor("Hello"), cat([]byte("zx\x01\x00"), uv(1<<60), []byte{0})},
		{"string", parserFor("Request"), cat([]byte{OpStat, 0}, uv(1<<60), []byte("abc"))},
		{"error string", parserFor("Error"), cat([]byte{1}, uv(1<<60), []byte("abc"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.parse(tt.b); err == nil {
				t.Fatalf("parse succeeded")
			}
			if n := bytesAllocated(100, func() { tt.parse(tt.b) }); n > 4096 {
				t.Errorf("rejecting a %d-byte message allocated %d bytes", len(tt.b), n)
			}
		})
	}
}

// A maximal frame of attributes allocates memory proportional to its size,
// whether or not the count it claims is honest.
func TestDirAllocationBoundedByPayload(t *testing.T) {
	// The largest count that passes the up-front check, followed by
	// attributes with empty names: rejected at the first one, but after the
	// map is sized.
	n := (MaxPayload - 3) / 2
	lie := cat(uv(uint64(n)), make([]byte, MaxPayload-3))
	if err := parserFor("Dir")(lie); err == nil {
		t.Fatal("parse succeeded")
	}
	got := bytesAllocated(5, func() { ParseDir(lie) })
	t.Logf("rejecting a %d-byte Dir claiming %d attributes allocated %d bytes", len(lie), n, got)
	if limit := uint64(MaxPayload); got > limit {
		t.Errorf("rejecting a %d-byte Dir allocated %d bytes, more than %d", len(lie), got, limit)
	}

	// An honest Dir filling a frame costs memory proportional to its
	// attributes.
	d := zx.Dir{}
	for size, i := 3, 1; ; i++ { // 3: the count's varint
		k := string(binary.AppendUvarint(nil, uint64(i)))
		size += 1 + len(k) + 1
		if size > MaxPayload {
			break
		}
		d[k] = ""
	}
	honest := AppendDir(nil, d)
	if len(honest) > MaxPayload {
		t.Fatalf("honest Dir is %d bytes", len(honest))
	}
	if _, err := ParseDir(honest); err != nil {
		t.Fatal(err)
	}
	got = bytesAllocated(5, func() { ParseDir(honest) })
	t.Logf("parsing a %d-byte Dir of %d attributes allocated %d bytes", len(honest), len(d), got)
	if limit := uint64(64 * MaxPayload); got > limit {
		t.Errorf("parsing a %d-byte Dir allocated %d bytes, more than %d", len(honest), got, limit)
	}
}
