package server_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/auth"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/server"
)

// A tlsServer is a real server on loopback speaking TLS, with three trees
// on disk: main, src and secret.
type tlsServer struct {
	addr  string
	id    *auth.ServerIdentity
	dirs  map[string]string
	srv   *server.Server
	authz string // the authorized file
	az    *auth.Authorized
}

func newKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	k, err := auth.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// startTLS starts a server with the given authorized file contents, on
// addr ("" for any loopback port), with the identity kept in state.
func startTLS(t *testing.T, addr, state, authorized string) *tlsServer {
	t.Helper()
	s := &tlsServer{dirs: map[string]string{}}
	trees := map[string]zx.Tree{}
	for _, name := range []string{"main", "src", "secret"} {
		dir := t.TempDir()
		os.MkdirAll(filepath.Join(dir, "d/sub"), 0o755)
		os.WriteFile(filepath.Join(dir, "d/f"), []byte("contents of "+name), 0o644)
		os.WriteFile(filepath.Join(dir, "d/sub/g"), []byte("more"), 0o600)
		fsys, err := lfs.New(dir, lfs.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { fsys.Close() })
		trees[name] = fsys
		s.dirs[name] = dir
	}
	var err error
	if s.id, err = auth.LoadServerIdentity(state); err != nil {
		t.Fatal(err)
	}
	s.authz = filepath.Join(t.TempDir(), "authorized")
	if err := os.WriteFile(s.authz, []byte(authorized), 0o600); err != nil {
		t.Fatal(err)
	}
	az, err := auth.LoadAuthorized(s.authz)
	if err != nil {
		t.Fatal(err)
	}
	s.az = az
	s.srv, err = server.New(trees, "main", server.Config{TLS: auth.ServerConfig(s.id), Authorized: az})
	if err != nil {
		t.Fatal(err)
	}
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	go s.srv.Serve(l)
	t.Cleanup(func() { s.srv.Close() })
	s.addr = l.Addr().String()
	return s
}

// grantLine returns an authorized file line for k.
func grantLine(k ed25519.PrivateKey, opts string) string {
	return auth.FormatPublicKey(pub(k), "") + " " + opts + "\n"
}

// dialTLS dials s with key k, trusting s's key.
func dialTLS(t *testing.T, s *tlsServer, k ed25519.PrivateKey) *client.Conn {
	t.Helper()
	c, err := dialWith(s.addr, auth.ClientOptions{Key: k, KnownHosts: &auth.KnownHosts{Path: filepath.Join(t.TempDir(), "known_hosts")}, Trust: s.id.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func dialWith(addr string, o auth.ClientOptions) (*client.Conn, error) {
	cfg, err := auth.ClientConfig(addr, o)
	if err != nil {
		return nil, err
	}
	return client.Dial(context.Background(), addr, client.Options{TLS: cfg, DialTimeout: 5 * time.Second})
}

// refusedWith checks that the first request on c fails with an
// authorization error saying want.
func refusedWith(t *testing.T, c *client.Conn, want string) {
	t.Helper()
	_, err := zx.Stat(context.Background(), c.Tree(""), "/d/f")
	if !errors.Is(err, zx.ErrAuth) || !strings.Contains(err.Error(), want) {
		t.Fatalf("stat on a refused connection: %v; want a %q error saying %q", err, zx.ErrAuth, want)
	}
}

func TestAuthorizedKey(t *testing.T) {
	alice := newKey(t)
	s := startTLS(t, "", t.TempDir(), grantLine(alice, "user=alice tree=*:rw"))
	c := dialTLS(t, s, alice)
	ctx := context.Background()
	b, err := zx.ReadFile(ctx, c.Tree(""), "/d/f")
	if err != nil || string(b) != "contents of main" {
		t.Fatalf("get over TLS: %q, %v", b, err)
	}
	if _, err := zx.WriteFile(ctx, c.Tree("src"), "/new", nil, []byte("x")); err != nil {
		t.Fatalf("put over TLS: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(s.dirs["src"], "new")); string(b) != "x" {
		t.Fatalf("put did not reach the disk: %q", b)
	}
	// The control file names the connection's user.
	if b, err := zx.ReadFile(ctx, c.Tree(""), "/Ctl"); err != nil || !strings.Contains(string(b), "user alice ") {
		t.Fatalf("/Ctl: %v\n%s", err, b)
	}
}

func TestUnknownClientKey(t *testing.T) {
	alice, mallory := newKey(t), newKey(t)
	s := startTLS(t, "", t.TempDir(), grantLine(alice, "user=alice tree=*:rw"))
	c := dialTLS(t, s, mallory)
	refusedWith(t, c, "key "+auth.Fingerprint(pub(mallory))+" is not authorized")
}

func TestNoClientKey(t *testing.T) {
	alice := newKey(t)
	s := startTLS(t, "", t.TempDir(), grantLine(alice, "user=alice tree=*:rw"))
	c := dialTLS(t, s, nil)
	refusedWith(t, c, "no client key")
}

// A client presenting a certificate whose key is not an ed25519 one (a
// CA-issued ECDSA certificate, say) is refused: zx keys are ed25519.
func TestWrongClientKeyType(t *testing.T) {
	alice := newKey(t)
	s := startTLS(t, "", t.TempDir(), grantLine(alice, "user=alice tree=*:rw"))
	ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "x"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ek.PublicKey, ek)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := auth.ClientConfig(s.addr, auth.ClientOptions{KnownHosts: &auth.KnownHosts{Path: filepath.Join(t.TempDir(), "kh")}, Trust: s.id.Fingerprint})
	cfg.Certificates = []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: ek}}
	c, err := client.Dial(context.Background(), s.addr, client.Options{TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	refusedWith(t, c, "zx keys are ed25519")
}

// A key that signs with another key than the one it was granted as (a
// stolen public key without its private key) cannot even finish the
// handshake: TLS checks that the client holds the key of its certificate.
func TestStolenPublicKey(t *testing.T) {
	alice, mallory := newKey(t), newKey(t)
	s := startTLS(t, "", t.TempDir(), grantLine(alice, "user=alice tree=*:rw"))
	cert, err := auth.SelfSigned(alice, "zx client")
	if err != nil {
		t.Fatal(err)
	}
	cert.PrivateKey = mallory // alice's certificate, mallory's key
	cfg, _ := auth.ClientConfig(s.addr, auth.ClientOptions{KnownHosts: &auth.KnownHosts{Path: filepath.Join(t.TempDir(), "kh")}, Trust: s.id.Fingerprint})
	cfg.Certificates = []tls.Certificate{cert}
	c, err := client.Dial(context.Background(), s.addr, client.Options{TLS: cfg})
	if err == nil {
		defer c.Close()
		_, err = zx.Stat(context.Background(), c.Tree(""), "/d/f")
	}
	if err == nil {
		t.Fatal("a client holding another key than its certificate's was served")
	}
}

func TestExpiredClientKey(t *testing.T) {
	alice, bob := newKey(t), newKey(t)
	s := startTLS(t, "", t.TempDir(),
		grantLine(alice, "user=alice tree=*:rw expires=2020-01-01")+
			grantLine(bob, "user=bob tree=*:rw expires="+time.Now().Add(time.Hour).UTC().Format(time.RFC3339)))
	refusedWith(t, dialTLS(t, s, alice), "key "+auth.Fingerprint(pub(alice))+" of user alice expired on 2020-01-01")
	if _, err := zx.Stat(context.Background(), dialTLS(t, s, bob).Tree(""), "/d/f"); err != nil {
		t.Fatalf("a key expiring in an hour was refused: %v", err)
	}
}

// Keys are added and revoked by editing the file, without a restart.
func TestAuthorizedFileReload(t *testing.T) {
	alice, bob := newKey(t), newKey(t)
	s := startTLS(t, "", t.TempDir(), grantLine(alice, "user=alice tree=*:rw"))
	refusedWith(t, dialTLS(t, s, bob), "not authorized")
	// A different size makes the change visible whatever the clock.
	if err := os.WriteFile(s.authz, []byte("# bob only\n"+grantLine(bob, "user=bob tree=main:ro")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := zx.Stat(context.Background(), dialTLS(t, s, bob).Tree(""), "/d/f"); err != nil {
		t.Fatalf("bob after being added: %v", err)
	}
	refusedWith(t, dialTLS(t, s, alice), "not authorized")
}

// A line of the authorized file that does not parse grants nothing, and
// says so: the server logs which line and why, a key on that line is told
// its line is broken, and every other key keeps working.
func TestAuthorizedFileBadLine(t *testing.T) {
	alice, bob, carol := newKey(t), newKey(t), newKey(t)
	s := startTLS(t, "", t.TempDir(), grantLine(alice, "user=alice tree=*:rw")+grantLine(bob, "user=bob tree=*:rw"))
	var out lockedBuffer
	s.az.SetLogger(slog.New(slog.NewTextHandler(&out, nil)))
	ctx := context.Background()
	if _, err := zx.Stat(ctx, dialTLS(t, s, bob).Tree(""), "/d/f"); err != nil {
		t.Fatalf("bob before the edit: %v", err)
	}
	// An edit leaves garbage on line 2, a typo in bob's line (4), bad
	// base64 on line 5 and carol on two lines (6 and 7).
	file := grantLine(alice, "user=alice tree=*:rw") +
		"this is not a key\n" +
		"# bob\n" +
		grantLine(bob, "user=bob tree=*:rx") +
		auth.KeyType + " AAAA%%%% user=x tree=*:ro\n" +
		grantLine(carol, "user=carol tree=main:ro") + grantLine(carol, "user=carol tree=*:rw")
	if err := os.WriteFile(s.authz, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := zx.ReadFile(ctx, dialTLS(t, s, alice).Tree(""), "/d/f")
	if err != nil || string(b) != "contents of main" {
		t.Fatalf("alice, whose line is good, after a bad edit elsewhere: %q, %v", b, err)
	}
	refusedWith(t, dialTLS(t, s, bob), "key "+auth.Fingerprint(pub(bob))+" is on line 4 of the server's authorized keys file, which grants nothing")
	refusedWith(t, dialTLS(t, s, bob), `tree "*:rx": want NAME:ro or NAME:rw`)
	refusedWith(t, dialTLS(t, s, carol), "also on line 6")
	log := out.String()
	for _, want := range []string{
		`line=2 why="\"this\" is neither a key`,
		`line=4 why="tree \"*:rx\": want NAME:ro or NAME:rw"`,
		`line=5 why="bad zx-ed25519 key \"AAAA%%%%\": not base64`,
		`line=7 why="key ` + auth.Fingerprint(pub(carol)) + ` is also on line 6`,
	} {
		if !strings.Contains(log, want) || !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "file="+s.authz) {
			t.Errorf("the server's log does not say %s at level error with the file's name:\n%s", want, log)
		}
	}
	// Each bad line is reported once per change of the file, not per client.
	if n := strings.Count(log, "line=4 "); n != 1 {
		t.Errorf("line 4 reported %d times:\n%s", n, log)
	}
}

func TestPlainClientToTLSServer(t *testing.T) {
	alice := newKey(t)
	s := startTLS(t, "", t.TempDir(), grantLine(alice, "user=alice tree=*:rw"))
	c, err := client.Dial(context.Background(), s.addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	refusedWith(t, c, "this server speaks only TLS")
}

func TestTLSClientToPlainServer(t *testing.T) {
	srv, err := server.New(map[string]zx.Tree{"main": mustLFS(t)}, "main", server.Config{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	_, err = dialWith(l.Addr().String(), auth.ClientOptions{Key: newKey(t), KnownHosts: &auth.KnownHosts{Path: filepath.Join(t.TempDir(), "kh")}, AcceptNew: true})
	if !errors.Is(err, zx.ErrAuth) || !strings.Contains(err.Error(), "does not speak TLS") {
		t.Fatalf("TLS dial of a plain server: %v", err)
	}
}

func mustLFS(t *testing.T) zx.Tree {
	fsys, err := lfs.New(t.TempDir(), lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fsys.Close() })
	return fsys
}

func TestTrustOnFirstUse(t *testing.T) {
	alice := newKey(t)
	s := startTLS(t, "", t.TempDir(), grantLine(alice, "user=alice tree=*:rw"))
	kh := &auth.KnownHosts{Path: filepath.Join(t.TempDir(), "zx", "known_hosts")}
	ctx := context.Background()
	try := func(o auth.ClientOptions) error {
		o.Key, o.KnownHosts = alice, kh
		c, err := dialWith(s.addr, o)
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = zx.Stat(ctx, c.Tree(""), "/d/f")
		return err
	}
	// Unknown, non-interactive: refused, saying what to do.
	err := try(auth.ClientOptions{})
	var hke *auth.HostKeyError
	if !errors.As(err, &hke) || hke.Changed || !strings.Contains(err.Error(), "--trust "+s.id.Fingerprint) {
		t.Fatalf("unknown server without --trust: %v", err)
	}
	// Another fingerprint given: refused.
	other := auth.Fingerprint(pub(newKey(t)))
	if err := try(auth.ClientOptions{Trust: other}); !errors.As(err, &hke) || !strings.Contains(err.Error(), "not the "+other) {
		t.Fatalf("--trust of another key: %v", err)
	}
	// A prompt that says no: refused, nothing pinned.
	asked := ""
	no := func(addr, fp string) (bool, error) { asked = fp; return false, nil }
	if err := try(auth.ClientOptions{Prompt: no}); err == nil || asked != s.id.Fingerprint {
		t.Fatalf("prompt saying no: %v (asked about %q)", err, asked)
	}
	if _, err := os.Stat(kh.Path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("something was pinned: %v", err)
	}
	// The right fingerprint: accepted and pinned with mode 0600.
	if err := try(auth.ClientOptions{Trust: s.id.Fingerprint}); err != nil {
		t.Fatalf("--trust of the server's key: %v", err)
	}
	st, err := os.Stat(kh.Path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("known hosts file: %v %v", st, err)
	}
	if fp, _, _ := kh.Lookup(s.addr); fp != s.id.Fingerprint {
		t.Fatalf("pinned %q, want %q", fp, s.id.Fingerprint)
	}
	// From now on, no --trust needed.
	if err := try(auth.ClientOptions{}); err != nil {
		t.Fatalf("pinned server: %v", err)
	}
}

func TestAcceptNewAndPrompt(t *testing.T) {
	alice := newKey(t)
	for _, o := range []auth.ClientOptions{
		{AcceptNew: true},
		{Prompt: func(string, string) (bool, error) { return true, nil }},
	} {
		s := startTLS(t, "", t.TempDir(), grantLine(alice, "user=alice tree=*:rw"))
		o.Key, o.KnownHosts = alice, &auth.KnownHosts{Path: filepath.Join(t.TempDir(), "known_hosts")}
		c, err := dialWith(s.addr, o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := zx.Stat(context.Background(), c.Tree(""), "/"); err != nil {
			t.Fatal(err)
		}
		c.Close()
		if fp, _, _ := o.KnownHosts.Lookup(s.addr); fp != s.id.Fingerprint {
			t.Fatalf("pinned %q, want %q", fp, s.id.Fingerprint)
		}
	}
}

func TestServerKeyChanged(t *testing.T) {
	alice := newKey(t)
	line := grantLine(alice, "user=alice tree=*:rw")
	s1 := startTLS(t, "", t.TempDir(), line)
	kh := &auth.KnownHosts{Path: filepath.Join(t.TempDir(), "known_hosts")}
	c, err := dialWith(s1.addr, auth.ClientOptions{Key: alice, KnownHosts: kh, Trust: s1.id.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	s1.srv.Close()
	// Another server, with another key, at the same address.
	s2 := startTLS(t, s1.addr, t.TempDir(), line)
	_, err = dialWith(s2.addr, auth.ClientOptions{Key: alice, KnownHosts: kh})
	var hke *auth.HostKeyError
	if !errors.As(err, &hke) || !hke.Changed {
		t.Fatalf("changed server key: %v", err)
	}
	for _, want := range []string{"HAS CHANGED", s2.id.Fingerprint, s1.id.Fingerprint, kh.Path, "remove line 1", "--trust " + s2.id.Fingerprint} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal does not say %q:\n%v", want, err)
		}
	}
	if !errors.Is(err, zx.ErrAuth) {
		t.Errorf("refusal is not of kind %q: %v", zx.ErrAuth, err)
	}
	// AcceptNew and a prompt do not override a changed key.
	if _, err := dialWith(s2.addr, auth.ClientOptions{Key: alice, KnownHosts: kh, AcceptNew: true,
		Prompt: func(string, string) (bool, error) { return true, nil }}); !errors.As(err, &hke) || !hke.Changed {
		t.Fatalf("changed key with AcceptNew: %v", err)
	}
	if fp, _, _ := kh.Lookup(s2.addr); fp != s1.id.Fingerprint {
		t.Fatalf("the pinned key was replaced: %q", fp)
	}
	// The user, told the new fingerprint, trusts it: replaced.
	c, err = dialWith(s2.addr, auth.ClientOptions{Key: alice, KnownHosts: kh, Trust: s2.id.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if fp, _, _ := kh.Lookup(s2.addr); fp != s2.id.Fingerprint {
		t.Fatalf("pinned %q after --trust, want %q", fp, s2.id.Fingerprint)
	}
}

// The server keeps its key in its state directory: a restart presents the
// same key, so pinned clients go on working.
func TestServerKeyPersists(t *testing.T) {
	state := filepath.Join(t.TempDir(), "server")
	id1, err := auth.LoadServerIdentity(state)
	if err != nil || !id1.Created {
		t.Fatal(err)
	}
	id2, err := auth.LoadServerIdentity(state)
	if err != nil || id2.Created || id2.Fingerprint != id1.Fingerprint {
		t.Fatalf("second load: %v, %+v", err, id2)
	}
	for _, f := range []string{auth.ServerKeyFile, auth.ServerCertFile} {
		st, err := os.Stat(filepath.Join(state, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, %v", f, st, err)
		}
	}
	if st, _ := os.Stat(state); st.Mode().Perm() != 0o700 {
		t.Errorf("state directory mode %v", st.Mode().Perm())
	}
}

// makeCA returns a CA certificate and key.
func makeCA(t *testing.T) (*x509.Certificate, ed25519.PrivateKey) {
	k := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub(k), k)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c, k
}

func TestCAVerification(t *testing.T) {
	ca, caKey := makeCA(t)
	otherCA, _ := makeCA(t)
	alice := newKey(t)
	authz := filepath.Join(t.TempDir(), "authorized")
	os.WriteFile(authz, []byte(grantLine(alice, "user=alice tree=*:ro")), 0o600)
	az, err := auth.LoadAuthorized(authz)
	if err != nil {
		t.Fatal(err)
	}
	// Servers with certificates the CA signed, for 127.0.0.1 and for
	// another name.
	start := func(ips []net.IP, names []string) string {
		sk := newKey(t)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "zx server"},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			IPAddresses: ips, DNSNames: names, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub(sk), caKey)
		if err != nil {
			t.Fatal(err)
		}
		id := &auth.ServerIdentity{Cert: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: sk}}
		srv, err := server.New(map[string]zx.Tree{"main": mustLFS(t)}, "main", server.Config{TLS: auth.ServerConfig(id), Authorized: az})
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(l)
		t.Cleanup(func() { srv.Close() })
		return l.Addr().String()
	}
	good := start([]net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	misnamed := start(nil, []string{"elsewhere.example"})
	pool := func(c *x509.Certificate) *x509.CertPool { p := x509.NewCertPool(); p.AddCert(c); return p }

	c, err := dialWith(good, auth.ClientOptions{Key: alice, CA: pool(ca)})
	if err != nil {
		t.Fatalf("server signed by the CA: %v", err)
	}
	if _, err := zx.Stat(context.Background(), c.Tree(""), "/"); err != nil {
		t.Fatalf("stat through a CA-verified connection: %v", err)
	}
	c.Close()
	if _, err := dialWith(good, auth.ClientOptions{Key: alice, CA: pool(otherCA)}); !errors.Is(err, zx.ErrAuth) || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("server signed by another CA: %v", err)
	}
	if _, err := dialWith(misnamed, auth.ClientOptions{Key: alice, CA: pool(ca)}); !errors.Is(err, zx.ErrAuth) || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("server certificate for another name: %v", err)
	}
}

// snapshot returns a description of everything under dir: paths, types,
// modes, owners, sizes, times and contents.
func snapshot(t *testing.T, dir string) string {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		fmt.Fprintf(&b, "%s %v %d:%d %d %d", p, fi.Mode(), st.Uid, st.Gid, fi.Size(), fi.ModTime().UnixNano())
		if fi.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestReadOnlyKeyWritesNothing(t *testing.T) {
	reader := newKey(t)
	s := startTLS(t, "", t.TempDir(), grantLine(reader, "user=rita tree=main:ro,src:rw"))
	c := dialTLS(t, s, reader)
	tr := c.Tree("")
	ctx := context.Background()
	before := snapshot(t, s.dirs["main"])

	// Reads work.
	if _, err := zx.ReadFile(ctx, tr, "/d/f"); err != nil {
		t.Fatalf("read-only key reading: %v", err)
	}
	n := 0
	for it := range tr.Find(ctx, "/", zx.FindOpts{}) {
		if it.Err != nil {
			t.Fatalf("find: %v", it.Err)
		}
		n++
	}
	if n != 5 {
		t.Fatalf("find returned %d entries, want 5", n)
	}

	reply := func(rc <-chan zx.Reply) error { return (<-rc).Err }
	for _, w := range []struct {
		name string
		err  error
	}{
		{"put create", reply(tr.Put(ctx, "/new", zx.Dir{zx.AType: zx.TypeFile}, 0, strings.NewReader("data")))},
		{"put mkdir", reply(tr.Put(ctx, "/newdir", zx.Dir{zx.AType: zx.TypeDir}, 0, nil))},
		{"put symlink", reply(tr.Put(ctx, "/link", zx.Dir{zx.AType: zx.TypeLink, zx.ATarget: "d/f"}, 0, nil))},
		{"put truncate", reply(tr.Put(ctx, "/d/f", zx.Dir{zx.ASize: "0"}, 0, nil))},
		{"put write in place", reply(tr.Put(ctx, "/d/f", nil, 3, strings.NewReader("XX")))},
		{"put append", reply(tr.Put(ctx, "/d/f", nil, -1, bytes.NewReader(make([]byte, 1<<20))))},
		{"put attributes only", reply(tr.Put(ctx, "/d/f", zx.Dir{zx.AMode: "0777"}, 0, nil))},
		{"wstat mode", reply(tr.Wstat(ctx, "/d/f", zx.Dir{zx.AMode: "0600"}))},
		{"wstat mtime", reply(tr.Wstat(ctx, "/d/f", zx.Dir{zx.AMtime: "0"}))},
		{"wstat size", reply(tr.Wstat(ctx, "/d/f", zx.Dir{zx.ASize: "1"}))},
		{"wstat owner", reply(tr.Wstat(ctx, "/d/f", zx.Dir{zx.AUid: "0"}))},
		{"wstat user attribute", reply(tr.Wstat(ctx, "/d/f", zx.Dir{"tag": "x"}))},
		{"wstat nothing", reply(tr.Wstat(ctx, "/d/f", zx.Dir{}))},
		{"link", reply(zx.Link(ctx, tr, "/d/f", "/d/hard"))},
		{"allocate", reply(zx.Allocate(ctx, tr, "/d/f", 0, 0, 1<<20))},
		{"punch a hole", reply(zx.Allocate(ctx, tr, "/d/f", zx.AllocPunchHole|zx.AllocKeepSize, 0, 2))},
		{"move", <-tr.Move(ctx, "/d/f", "/d/moved")},
		{"move onto", <-tr.Move(ctx, "/d/sub/g", "/d/f")},
		{"remove", <-tr.Remove(ctx, "/d/f")},
		{"remove missing", <-tr.Remove(ctx, "/nothing")},
		{"removeall", <-tr.RemoveAll(ctx, "/d")},
		{"removeall root", <-tr.RemoveAll(ctx, "/")},
		{"mkdir helper", func() error { _, err := zx.Mkdir(ctx, tr, "/m", 0o755); return err }()},
		{"writefile helper", func() error { _, err := zx.WriteFile(ctx, tr, "/w", nil, []byte("x")); return err }()},
	} {
		if !errors.Is(w.err, zx.ErrReadOnly) || !strings.Contains(w.err.Error(), "user rita has read-only access to tree main") {
			t.Errorf("%s with a read-only key: %v; want a read-only error saying why", w.name, w.err)
		}
	}
	if after := snapshot(t, s.dirs["main"]); after != before {
		t.Fatalf("the read-only tree changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if d, err := zx.Stat(ctx, tr, "/d/f"); err != nil || d["nlink"] != "1" {
		t.Fatalf("after a refused link: %v %v", d, err)
	}
	if r := <-zx.StatFS(ctx, tr, "/"); r.Err != nil || r.Dir["bsize"] == "" {
		t.Fatalf("statfs with a read-only key: %v %v", r.Dir, r.Err)
	}
	// The same key writes the tree it may write, links included.
	if _, err := zx.WriteFile(ctx, c.Tree("src"), "/d/f", nil, []byte("new")); err != nil {
		t.Fatalf("write to the rw tree: %v", err)
	}
	if r := <-zx.Link(ctx, c.Tree("src"), "/d/f", "/d/hard"); r.Err != nil {
		t.Fatalf("link in the rw tree: %v", r.Err)
	}
}

func TestUngrantedTreeHidden(t *testing.T) {
	k := newKey(t)
	s := startTLS(t, "", t.TempDir(), grantLine(k, "user=uma tree=src:rw"))
	c := dialTLS(t, s, k)
	ctx := context.Background()
	before := snapshot(t, s.dirs["secret"])
	if _, err := c.Attach(ctx, "src"); err != nil {
		t.Fatalf("attach of a granted tree: %v", err)
	}
	msg := func(tree string) string { return "no tree named " + tree + " that user uma may use" }
	for _, tree := range []string{"secret", "main", ""} {
		name := tree
		if name == "" {
			name = "main" // the default tree, not granted either
		}
		_, err := c.Attach(ctx, tree)
		if !errors.Is(err, zx.ErrNotExist) || !strings.Contains(err.Error(), msg(name)) {
			t.Errorf("attach %q: %v", tree, err)
		}
		tr := c.Tree(tree)
		errs := map[string]error{
			"stat":   func() error { _, err := zx.Stat(ctx, tr, "/d/f"); return err }(),
			"get":    func() error { _, err := zx.ReadFile(ctx, tr, "/d/f"); return err }(),
			"put":    func() error { _, err := zx.WriteFile(ctx, tr, "/x", nil, []byte("x")); return err }(),
			"remove": <-tr.RemoveAll(ctx, "/d"),
			"find": func() error {
				for it := range tr.Find(ctx, "/", zx.FindOpts{}) {
					if it.Err != nil {
						return it.Err
					}
					t.Errorf("find in tree %q returned %v", tree, it.Dir)
				}
				return nil
			}(),
		}
		for op, err := range errs {
			if !errors.Is(err, zx.ErrNotExist) || !strings.Contains(err.Error(), msg(name)) {
				t.Errorf("%s in ungranted tree %q: %v", op, tree, err)
			}
		}
	}
	// A tree that is not there at all is refused in the same words: a
	// client cannot tell a hidden tree from a missing one.
	_, errHidden := c.Attach(ctx, "secret")
	_, errMissing := c.Attach(ctx, "nosuch")
	if strings.ReplaceAll(errHidden.Error(), "secret", "T") != strings.ReplaceAll(errMissing.Error(), "nosuch", "T") {
		t.Errorf("hidden and missing trees are told apart:\n%v\n%v", errHidden, errMissing)
	}
	if after := snapshot(t, s.dirs["secret"]); after != before {
		t.Fatalf("the ungranted tree changed")
	}
}

// A client that connects and never speaks TLS does not hold up a
// shutdown until its handshake times out.
func TestShutdownDuringHandshake(t *testing.T) {
	alice := newKey(t)
	s := startTLS(t, "", t.TempDir(), grantLine(alice, "user=alice tree=*:rw"))
	nc, err := net.Dial("tcp", s.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	time.Sleep(50 * time.Millisecond) // let the server start the handshake
	done := make(chan struct{})
	go func() { s.srv.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a silent client's handshake")
	}
}

// Handshakes under way are bounded: connections that never finish one
// cannot pile up beyond MaxConns, and once they are gone others are served.
func TestHandshakeFlood(t *testing.T) {
	alice := newKey(t)
	authz := filepath.Join(t.TempDir(), "authorized")
	os.WriteFile(authz, []byte(grantLine(alice, "user=alice tree=*:rw")), 0o600)
	az, err := auth.LoadAuthorized(authz)
	if err != nil {
		t.Fatal(err)
	}
	id, err := auth.LoadServerIdentity(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(map[string]zx.Tree{"main": mustLFS(t)}, "main",
		server.Config{TLS: auth.ServerConfig(id), Authorized: az, MaxConns: 3})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(l)
	defer srv.Close()
	addr := l.Addr().String()
	// Three silent connections fill the handshake slots; a fourth is
	// dropped at once (the server closes it: a read sees EOF).
	var silent []net.Conn
	for range 3 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		silent = append(silent, nc)
	}
	// The server takes connections in order, so once the fourth is
	// dropped the three before it hold their slots.
	var dropped bool
	for range 20 {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		_, err = nc.Read(make([]byte, 1))
		nc.Close()
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			dropped = true
			break
		}
	}
	if !dropped {
		t.Fatal("a connection beyond the handshake limit was not dropped")
	}
	for _, nc := range silent {
		nc.Close()
	}
	// The slots free up: a real client is served again.
	var lastErr error
	for range 100 {
		time.Sleep(20 * time.Millisecond) // until the server sees them gone
		c, err := dialWith(addr, auth.ClientOptions{Key: alice, KnownHosts: &auth.KnownHosts{Path: filepath.Join(t.TempDir(), "kh")}, Trust: id.Fingerprint})
		if err == nil {
			_, err = zx.Stat(context.Background(), c.Tree(""), "/")
			c.Close()
		}
		if lastErr = err; err == nil {
			return
		}
	}
	t.Fatalf("no client served after the silent ones left: %v", lastErr)
}
