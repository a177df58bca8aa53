package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --compress reaches the wire: a put with --compress always sends text
// compressed (the server offers zstd by default), and --stats says how
// much it saved; with --compress off nothing is.
func TestCompressFlag(t *testing.T) {
	dir := t.TempDir()
	addr := serve(t, dir)
	text := bytes.Repeat([]byte("func main() { fmt.Println(\"hello, world\") }\n"), 20000) // 900 KB
	r := runZX(t, string(text), "put", "--compress", "always", "--stats", "--json", "zx://"+addr+"/a.go").want(t, 0, "put --compress always")
	st := statsOf(t, r)
	if st.ZstdSavedOut < int64(len(text))/2 || st.BytesOut > int64(len(text))/2 {
		t.Errorf("put --compress always of %d bytes of text: %d bytes out, zstd saved %d", len(text), st.BytesOut, st.ZstdSavedOut)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a.go")); err != nil || !bytes.Equal(b, text) {
		t.Fatalf("file put compressed: %v, %d bytes, want %d", err, len(b), len(text))
	}
	r = runZX(t, string(text), "put", "--compress", "off", "--stats", "--json", "zx://"+addr+"/b.go").want(t, 0, "put --compress off")
	if st := statsOf(t, r); st.ZstdSavedOut != 0 || st.BytesOut < int64(len(text)) {
		t.Errorf("put --compress off: %d bytes out, zstd saved %d", st.BytesOut, st.ZstdSavedOut)
	}
	r = runZX(t, string(text), "put", "--compress", "always", "--stats", "zx://"+addr+"/c.go").want(t, 0, "put --compress always --stats")
	if !strings.Contains(r.stderr, "(zstd saved 0 B in, ") {
		t.Errorf("--stats text does not show what zstd saved: %q", r.stderr)
	}
	r = runZX(t, "", "ls", "--compress", "sometimes", "zx://"+addr+"/").want(t, 2, "--compress sometimes")
	if !strings.Contains(r.stderr, "want auto, off or always") {
		t.Errorf("bad --compress: %q", r.stderr)
	}
}
