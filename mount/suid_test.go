package mount_test

import (
	"context"
	"crypto/ed25519"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/auth"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/mount"
	"github.com/zxfs/zx/server"
)

// serveMultiUser serves a new directory over TLS to one key trusted to
// speak for several users (multiuser, root mapped to root), as a server
// for a shared mount is set up. It returns the address, the directory
// and the client options that present the key.
func serveMultiUser(t *testing.T) (string, string, client.Options) {
	t.Helper()
	dir := t.TempDir()
	fsys, err := lfs.New(dir, lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	key, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	id, err := auth.LoadServerIdentity(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	authz := filepath.Join(t.TempDir(), "authorized")
	line := auth.FormatPublicKey(key.Public().(ed25519.PublicKey), "") + " user=share tree=*:rw multiuser uidmap=0:0 gidmap=0:0\n"
	must(t, os.WriteFile(authz, []byte(line), 0o600))
	az, err := auth.LoadAuthorized(authz)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(map[string]zx.Tree{"main": fsys}, "main", server.Config{TLS: auth.ServerConfig(id), Authorized: az})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(l); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	addr := l.Addr().String()
	cfg, err := auth.ClientConfig(addr, auth.ClientOptions{Key: key, KnownHosts: &auth.KnownHosts{Path: filepath.Join(t.TempDir(), "known_hosts")}, Trust: id.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	return addr, dir, client.Options{TLS: cfg, DialTimeout: 5 * time.Second}
}

// as runs a shell script as uid:gid (with no other groups) from /, and
// returns its output and whether it succeeded.
func as(t *testing.T, uid, gid uint32, script string) (string, bool) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err == nil
}

func permBits(t *testing.T, p string) uint32 {
	t.Helper()
	var st syscall.Stat_t
	must(t, syscall.Stat(p, &st))
	return st.Mode & 07777
}

// TestSetIDCleared: on a mount shared by several users, a write,
// truncation or chown by a user without privilege clears the set-user-ID
// bit, and the set-group-ID bit of a group-executable file, exactly as on
// a local disk (compared with the same steps on a local directory); root
// keeps them. The server, running as root, clears them itself for a
// client that is not a mount.
func TestSetIDCleared(t *testing.T) {
	canMount(t)
	if os.Getuid() != 0 {
		t.Skip("!!! SKIPPING: the test runs helpers as other users and gives files away, which needs root !!!")
	}
	addr, disk, dial := serveMultiUser(t)
	e := mnt(t, setup{addr: addr, dial: dial, opts: mount.Options{AllowOther: true, DefaultPermissions: true}})
	local := t.TempDir()
	// Let the other users reach the mount point and the local directory.
	for _, top := range []string{e.dir, local} {
		for d := top; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
			must(t, os.Chmod(d, 0o755))
		}
	}

	const owner, group, writer, stranger = 2000, 3000, 1001, 1002
	for _, c := range []struct {
		name       string
		mode       uint32
		uid, gid   int    // the file's owner
		wuid, wgid uint32 // who acts
		script     string // F is the file
	}{
		{"append", 06775, owner, group, writer, group, "echo more >> F"},
		{"append-group-not-exec", 06765, owner, group, writer, group, "echo more >> F"},
		{"append-other", 06777, owner, group, stranger, stranger, "echo more >> F"},
		{"overwrite-middle", 06775, owner, group, writer, group, "printf X | dd of=F bs=1 seek=2 conv=notrunc 2>/dev/null"},
		{"truncate", 06775, owner, group, writer, group, "truncate -s 3 F"},
		{"open-trunc", 06775, owner, group, writer, group, ": > F"},
		{"chown-own", 06775, writer, group, writer, group, "chown 1001:3000 F"},
		{"root-append", 06775, owner, group, 0, 0, "echo more >> F"},
	} {
		// Root makes the file and gives it away, then the user acts.
		run := func(dir string) (uint32, string) {
			p := filepath.Join(dir, c.name)
			must(t, os.WriteFile(p, []byte("contents\n"), 0o600))
			must(t, os.Chown(p, c.uid, c.gid))
			must(t, syscall.Chmod(p, c.mode))
			out, ok := as(t, c.wuid, c.wgid, strings.ReplaceAll(c.script, "F", "'"+p+"'"))
			if !ok {
				t.Errorf("%s in %s: %s", c.name, dir, out)
			}
			b, err := os.ReadFile(p)
			must(t, err)
			return permBits(t, p), string(b)
		}
		want, wantData := run(local)
		got, gotData := run(e.dir)
		if got != want || gotData != wantData {
			t.Errorf("%s: through the mount mode %#o data %q, on a local disk mode %#o data %q", c.name, got, gotData, want, wantData)
		}
		if ondisk := permBits(t, filepath.Join(disk, c.name)); ondisk != want {
			t.Errorf("%s: on the server's disk mode %#o, want %#o", c.name, ondisk, want)
		}
		if c.wuid != 0 && want&syscall.S_ISUID != 0 {
			t.Errorf("%s: the local disk kept set-user-ID (%#o): the test's premise is wrong", c.name, want)
		}
	}
}

// TestSetIDClearedByServer: the server, running as root, writes with a
// privilege the user it acts for does not have, so the kernel keeps the
// set-id bits for it: the server clears them itself when it writes,
// truncates or rewrites a file for an unprivileged user (a client that is
// not a mount, whose kernel would have done it), and keeps them for root
// and when the request sets the mode itself.
func TestSetIDClearedByServer(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("!!! SKIPPING: the test gives files away to other users, which needs root !!!")
	}
	addr, disk, dial := serveMultiUser(t)
	conn, err := client.Dial(context.Background(), addr, dial)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	tr := conn.Tree("")
	user := zx.WithCaller(context.Background(), zx.Caller{Uid: 1001, Gid: 3000})
	root := zx.WithCaller(context.Background(), zx.Caller{Uid: 0, Gid: 0})
	for _, c := range []struct {
		name string
		mode uint32
		ctx  context.Context
		do   func(ctx context.Context, p string) error
		want uint32
	}{
		{"write", 06775, user, func(ctx context.Context, p string) error {
			return (<-tr.Put(ctx, p, zx.Dir{}, 2, strings.NewReader("X"))).Err
		}, 0775},
		{"append", 06765, user, func(ctx context.Context, p string) error {
			return (<-tr.Put(ctx, p, zx.Dir{}, -1, strings.NewReader("X"))).Err
		}, 02765},
		{"truncate", 06775, user, func(ctx context.Context, p string) error {
			_, err := zx.Wstat(ctx, tr, p, zx.Dir{zx.ASize: "3"})
			return err
		}, 0775},
		{"rewrite", 06775, user, func(ctx context.Context, p string) error {
			return (<-tr.Put(ctx, p, zx.Dir{zx.ASize: "0"}, 0, strings.NewReader("new"))).Err
		}, 0775},
		{"write-setting-mode", 06775, user, func(ctx context.Context, p string) error {
			return (<-tr.Put(ctx, p, zx.Dir{zx.AMode: "06775"}, 2, strings.NewReader("X"))).Err
		}, 06775},
		{"chmod", 06775, user, func(ctx context.Context, p string) error {
			_, err := zx.Wstat(ctx, tr, p, zx.Dir{zx.AMode: "06755"})
			return err
		}, 06755},
		{"root-write", 06775, root, func(ctx context.Context, p string) error {
			return (<-tr.Put(ctx, p, zx.Dir{}, 2, strings.NewReader("X"))).Err
		}, 06775},
		{"root-truncate", 06775, root, func(ctx context.Context, p string) error {
			_, err := zx.Wstat(ctx, tr, p, zx.Dir{zx.ASize: "3"})
			return err
		}, 06775},
	} {
		dp := filepath.Join(disk, c.name)
		must(t, os.WriteFile(dp, []byte("contents\n"), 0o600))
		must(t, os.Chown(dp, 2000, 3000))
		must(t, syscall.Chmod(dp, c.mode))
		if err := c.do(c.ctx, "/"+c.name); err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := permBits(t, dp); got != c.want {
			t.Errorf("%s: mode %#o, want %#o", c.name, got, c.want)
		}
		var st syscall.Stat_t
		must(t, syscall.Stat(dp, &st))
		if st.Uid != 2000 || st.Gid != 3000 {
			t.Errorf("%s: owned by %d:%d, want 2000:3000", c.name, st.Uid, st.Gid)
		}
	}
}
