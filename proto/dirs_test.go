package proto

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/zxfs/zx"
)

func TestDirBatchRoundTrip(t *testing.T) {
	for _, n := range []int{1, 2, 127, 128, 1000} {
		var b DirBatch
		var want []zx.Dir
		for i := range n {
			d := zx.Dir{"path": fmt.Sprintf("/d/f%d", i), "name": fmt.Sprintf("f%d", i), "type": "-", "x": strings.Repeat("v", i%7)}
			if !b.Add(d) {
				t.Fatalf("entry %d did not fit", i)
			}
			want = append(want, d)
		}
		if b.Len() != n {
			t.Fatalf("Len %d, want %d", b.Len(), n)
		}
		p := b.Payload()
		if b.Len() != 0 {
			t.Fatalf("batch not empty after Payload")
		}
		if enc := AppendDirs(nil, want); string(enc) != string(p) {
			t.Fatalf("DirBatch and AppendDirs differ for %d entries", n)
		}
		if c := DirsCount(p); c != int64(n) {
			t.Fatalf("DirsCount %d, want %d", c, n)
		}
		for _, parse := range []func([]byte) ([]zx.Dir, error){ParseDirs, ParseDirsOwned} {
			got, err := parse(append([]byte(nil), p...))
			if err != nil {
				t.Fatalf("%d entries: %v", n, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%d entries: round trip differs", n)
			}
		}
	}
}

// A batch fills up to its limit and no further; an entry that does not fit
// leaves it as it was.
func TestDirBatchLimit(t *testing.T) {
	for _, max := range []int{0, 100, 1000, MaxPayload} {
		b := DirBatch{Max: max}
		limit := max
		if limit == 0 {
			limit = MaxPayload
		}
		d := zx.Dir{"path": "/some/path/of/a/file", "size": "12345"}
		n := 0
		for b.Add(d) {
			n++
		}
		p := b.Payload()
		if len(p) > limit {
			t.Fatalf("max %d: payload of %d bytes", max, len(p))
		}
		if len(p)+len(AppendDir(nil, d)) <= limit {
			t.Fatalf("max %d: %d bytes, and another entry would have fit", max, len(p))
		}
		ds, err := ParseDirs(p)
		if err != nil || len(ds) != n {
			t.Fatalf("max %d: %d entries, %v; want %d", max, len(ds), err, n)
		}
	}
	var b DirBatch
	if b.Add(zx.Dir{"a": strings.Repeat("x", MaxPayload)}) || b.Len() != 0 {
		t.Fatalf("an entry larger than a frame was taken")
	}
	if !b.Add(zx.Dir{"a": "b"}) || b.Len() != 1 {
		t.Fatalf("a refused entry spoiled the batch")
	}
	if ds, err := ParseDirs(b.Payload()); err != nil || len(ds) != 1 || ds[0]["a"] != "b" {
		t.Fatalf("after a refused entry: %v, %v", ds, err)
	}
}

// Malformed batches are refused whole, with an error that says what is
// wrong with them.
func TestMalformedDirsSayWhy(t *testing.T) {
	e := func(d zx.Dir) []byte { return AppendDir(nil, d) }
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"count lies high", cat(uv(3), e(zx.Dir{"a": "b"}), e(zx.Dir{"c": "d"})), "says 3 entries but holds 2"},
		{"count lies low", cat(uv(1), e(zx.Dir{"a": "b"}), e(zx.Dir{"c": "d"})), "bytes more than its 1 entries"},
		{"count beyond message", cat(uv(1000), e(zx.Dir{"a": "b"})), "says 1000 entries but has only"},
		{"empty", uv(0), "empty entry batch"},
		{"truncated entry", cat(uv(2), e(zx.Dir{"a": "b"}), uv(1), uv(1), []byte("a")), "entry 2 of 2"},
		{"oversize", cat(uv(1), e(zx.Dir{"a": strings.Repeat("x", MaxPayload)})), "exceeds a frame"},
	}
	for _, tt := range tests {
		ds, err := ParseDirs(tt.b)
		if ds != nil || !errors.Is(err, zx.ErrProtocol) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %d entries, %v; want ErrProtocol saying %q", tt.name, len(ds), err, tt.want)
		}
	}
}
