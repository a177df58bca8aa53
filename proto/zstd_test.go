package proto

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/zxfs/zx"
)

func TestCodecRoundTrip(t *testing.T) {
	var c Codec
	defer c.Close()
	for _, in := range [][]byte{
		[]byte("a"),
		bytes.Repeat([]byte("package main\n"), 5000),
		bytes.Repeat([]byte{0}, MaxPayload),
	} {
		z, err := c.Compress(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Decompress(z)
		if err != nil || !bytes.Equal(out, in) {
			t.Fatalf("round trip of %d bytes (%d compressed): %v, %d bytes back", len(in), len(z), err, len(out))
		}
	}
}

func TestCodecLimits(t *testing.T) {
	var c Codec
	defer c.Close()
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	for name, p := range map[string][]byte{
		"over by one":         enc.EncodeAll(make([]byte, MaxPayload+1), nil),
		"16 MiB bomb":         enc.EncodeAll(make([]byte, 16<<20), nil),
		"two frames too many": enc.EncodeAll(make([]byte, MaxPayload), enc.EncodeAll([]byte("x"), nil)),
	} {
		out, err := c.Decompress(p)
		if err == nil || !errors.Is(err, zx.ErrProtocol) || !strings.Contains(err.Error(), "exceeds the limit") {
			t.Errorf("%s: %d bytes, %v; want a protocol error about the limit", name, len(out), err)
		}
	}
	if _, err := c.Decompress([]byte("not zstd")); !errors.Is(err, zx.ErrProtocol) {
		t.Errorf("garbage: %v, want a protocol error", err)
	}
}

// FuzzDecompress: no input makes the decoder return more than MaxPayload
// bytes, fail other than with a protocol error, or panic; whatever the
// encoder makes of a payload decodes back to it.
func FuzzDecompress(f *testing.F) {
	var seed Codec
	z, _ := seed.Compress(nil, bytes.Repeat([]byte("func main() {}\n"), 100))
	f.Add(z)
	f.Add([]byte{})
	f.Add([]byte("\x28\xb5\x2f\xfd garbage"))
	enc, _ := zstd.NewWriter(nil)
	f.Add(enc.EncodeAll(make([]byte, 1<<20), nil))
	enc.Close()
	var c Codec
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := c.Decompress(data)
		if err != nil {
			if out != nil || zx.KindOf(err) != zx.ErrProtocol {
				t.Fatalf("Decompress: %d bytes and %v", len(out), err)
			}
		} else if len(out) > MaxPayload {
			t.Fatalf("Decompress returned %d bytes", len(out))
		}
		in := data[:min(len(data), MaxPayload)]
		if len(in) == 0 {
			return
		}
		z, err := c.Compress(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		back, err := c.Decompress(z)
		if err != nil || !bytes.Equal(back, in) {
			t.Fatalf("round trip of %d bytes: %v", len(in), err)
		}
	})
}
