package testbed

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/server"
)

// TestServe serves a directory and reads it back over a real connection;
// after Close, the port takes no more connections.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Serve(dir, lfs.Options{ReadOnly: true}, server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, s.Addr, client.Options{})
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	r := <-c.Tree("").Stat(ctx, "/f")
	c.Close()
	if r.Err != nil || r.Dir.Size() != 5 {
		t.Errorf("stat /f = %v, %v; want 5 bytes", r.Dir, r.Err)
	}
	if !s.Finder {
		t.Errorf("lfs does not say it is a zx.Finder")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := client.Dial(ctx, s.Addr, client.Options{}); err == nil {
		c.Close()
		t.Fatal("the server still answers after Close")
	}
}

func TestGoSource(t *testing.T) {
	dir, err := GoSource("io")
	if err != nil {
		t.Skipf("SKIPPED: no go command: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "io.go")); err != nil {
		t.Fatalf("GoSource(\"io\") = %s, which has no io.go: %v", dir, err)
	}
}
