package server_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/auth"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/server"
)

// BenchmarkGet64M reads a 64 MiB file over loopback, in plain zx and
// through TLS with a read-only key (the guard in the path): what
// encryption costs where the link is not the bottleneck.
func BenchmarkGet64M(b *testing.B) {
	dir := b.TempDir()
	data := make([]byte, 64<<20)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(filepath.Join(dir, "big"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	fsys, err := lfs.New(dir, lfs.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer fsys.Close()
	key, _ := auth.GenerateKey()
	authz := filepath.Join(b.TempDir(), "authorized")
	os.WriteFile(authz, []byte(auth.FormatPublicKey(pub(key), "")+" user=bench tree=*:ro\n"), 0o600)
	az, err := auth.LoadAuthorized(authz)
	if err != nil {
		b.Fatal(err)
	}
	id, err := auth.LoadServerIdentity(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"plain", "tls"} {
		b.Run(mode, func(b *testing.B) {
			cfg := server.Config{}
			if mode == "tls" {
				cfg = server.Config{TLS: auth.ServerConfig(id), Authorized: az}
			}
			srv, err := server.New(map[string]zx.Tree{"main": fsys}, "main", cfg)
			if err != nil {
				b.Fatal(err)
			}
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go srv.Serve(l)
			defer srv.Close()
			addr := l.Addr().String()
			var c *client.Conn
			if mode == "plain" {
				c, err = client.Dial(context.Background(), addr, client.Options{})
			} else {
				c, err = dialWith(addr, auth.ClientOptions{Key: key, KnownHosts: &auth.KnownHosts{Path: filepath.Join(b.TempDir(), "kh")}, Trust: id.Fingerprint})
			}
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for range b.N {
				got, err := zx.ReadFile(context.Background(), c.Tree(""), "/big")
				if err != nil || len(got) != len(data) {
					b.Fatalf("read %d bytes: %v", len(got), err)
				}
			}
		})
	}
}
