package client_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/server"
)

// TestAllocatePipelined: a put and an allocate issued right after it,
// without waiting, cost one round trip together and apply in order on
// the server's disk.
func TestAllocatePipelined(t *testing.T) {
	c, _, dir := serveSyncing(t, 100*time.Millisecond, server.Config{})
	tr := c.Tree("")
	ctx := context.Background()
	if _, err := zx.Stat(ctx, tr, "/"); err != nil { // the hello is in
		t.Fatal(err)
	}
	before := c.Stats().RoundTrips
	pc := tr.Put(ctx, "/f", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, bytes.NewReader([]byte("0123456789")))
	ac := zx.Allocate(ctx, tr, "/f", zx.AllocPunchHole|zx.AllocKeepSize, 2, 5)
	if r := <-pc; r.Err != nil {
		t.Fatal(r.Err)
	}
	r := <-ac
	if r.Err != nil || r.Dir.Size() != 10 {
		t.Fatalf("allocate: %v, %v; want size 10", r.Dir, r.Err)
	}
	if rt := c.Stats().RoundTrips - before; rt != 1 {
		t.Errorf("put + allocate took %d round trips, want 1", rt)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "01\x00\x00\x00\x00\x00789" {
		t.Errorf("on the disk: %q, %v", b, err)
	}
}

// TestAllocateOldServer: a server that does not offer the allocate
// request is never sent one: Allocate fails with ErrNotSupp (EOPNOTSUPP
// through a mount) without a round trip, and the file is untouched.
func TestAllocateOldServer(t *testing.T) {
	c, _, dir := serveSyncing(t, 0, server.Config{NoAlloc: true})
	tr := c.Tree("")
	ctx := context.Background()
	if _, err := zx.WriteFile(ctx, tr, "/f", nil, []byte("data")); err != nil {
		t.Fatal(err)
	}
	before := c.Stats()
	r := <-zx.Allocate(ctx, tr, "/f", zx.AllocZeroRange, 0, 100)
	if !errors.Is(r.Err, zx.ErrNotSupp) {
		t.Fatalf("allocate to an old server: %v, want ErrNotSupp", r.Err)
	}
	if after := c.Stats(); after.RoundTrips != before.RoundTrips || after.Streams != before.Streams {
		t.Errorf("allocate to an old server sent a request: %+v, then %+v", before, after)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "f")); err != nil || string(b) != "data" {
		t.Errorf("on the disk: %q, %v", b, err)
	}
}
