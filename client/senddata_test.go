package client_test

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/memfs"
)

// lenLiar is a reader that says it has less left than it has.
type lenLiar struct{ *bytes.Reader }

func (l lenLiar) Len() int { return min(l.Reader.Len(), 3) }

// TestPutReaderSizes: a Put sends all of its data whether the reader
// tells how much is left (bytes.Reader, io.SectionReader, from an
// offset), tells too little, or does not tell, at sizes around the
// client's 256 KiB chunk.
func TestPutReaderSizes(t *testing.T) {
	ctx := t.Context()
	fs := memfs.New()
	tr := dial(t, serve(t, fs)).Tree("")
	for _, n := range []int{0, 1, 100, 256<<10 - 1, 256 << 10, 256<<10 + 1, 600 << 10} {
		data := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
		readers := map[string]func() io.Reader{
			"bytes": func() io.Reader { return bytes.NewReader(data) },
			"section": func() io.Reader {
				return io.NewSectionReader(bytes.NewReader(append([]byte("xyz"), data...)), 3, int64(n))
			},
			"seeked": func() io.Reader {
				r := io.NewSectionReader(bytes.NewReader(append([]byte("xyz"), data...)), 0, int64(n)+3)
				r.Seek(3, io.SeekStart)
				return r
			},
			"liar":  func() io.Reader { return lenLiar{bytes.NewReader(data)} },
			"plain": func() io.Reader { return io.MultiReader(bytes.NewReader(data)) },
		}
		for name, mk := range readers {
			p := "/" + name
			d := zx.Dir{zx.AType: zx.TypeFile}
			d.SetInt(zx.ASize, int64(n))
			if rep := <-tr.Put(ctx, p, d, 0, mk()); rep.Err != nil {
				t.Fatalf("put %d bytes from %s: %v", n, name, rep.Err)
			}
			var got strings.Builder
			for b := range tr.Get(ctx, p, 0, -1) {
				if b.Err != nil {
					t.Fatalf("get %s: %v", p, b.Err)
				}
				got.Write(b.Data)
			}
			if got.String() != string(data) {
				t.Fatalf("put %d bytes from %s: got %d bytes back, not the same", n, name, got.Len())
			}
		}
	}
}
