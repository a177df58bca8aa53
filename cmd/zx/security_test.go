package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx/auth"
)

// keygen makes a key in a directory of its own and returns its file and
// public key line.
func keygen(t *testing.T) (string, string) {
	t.Helper()
	key := filepath.Join(t.TempDir(), "id_ed25519")
	r := runZX(t, "", "keygen", "-f", key, "-C", "test@host").want(t, 0, "keygen")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "zx-ed25519 ") || !strings.HasSuffix(lines[0], " test@host") || !auth.ValidFingerprint(lines[1]) {
		t.Fatalf("keygen printed %q", r.stdout)
	}
	st, err := os.Stat(key)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil || strings.TrimSpace(string(pub)) != lines[0] {
		t.Fatalf("%s.pub: %q %v", key, pub, err)
	}
	return key, lines[0]
}

func TestKeygen(t *testing.T) {
	key, pub := keygen(t)
	// Never overwrites.
	before, _ := os.ReadFile(key)
	r := runZX(t, "", "keygen", "-f", key).want(t, 1, "keygen over an existing key")
	if !strings.Contains(r.stderr, "exists") || !strings.Contains(r.stderr, "--print") {
		t.Errorf("keygen over a key: %s", r.stderr)
	}
	if after, _ := os.ReadFile(key); string(after) != string(before) {
		t.Fatal("keygen replaced a key")
	}
	var v map[string]string
	r = runZX(t, "", "keygen", "-f", key, "--print", "--json", "-C", "test@host").want(t, 0, "keygen --print --json")
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v["publicKey"] != pub || !auth.ValidFingerprint(v["fingerprint"]) || v["file"] != key {
		t.Fatalf("keygen --print --json: %q %v", r.stdout, err)
	}
	// Without -C, --print prints the line keygen wrote, with its comment.
	r = runZX(t, "", "keygen", "-f", key, "--print").want(t, 0, "keygen --print")
	if lines := strings.Split(r.stdout, "\n"); lines[0] != pub {
		t.Errorf("keygen --print printed %q, want %q first", r.stdout, pub)
	}
	// A key others can read is refused, as ssh does.
	os.Chmod(key, 0o644)
	r = runZX(t, "", "keygen", "-f", key, "--print").want(t, 1, "keygen --print of a readable key")
	if !strings.Contains(r.stderr, "chmod 600") {
		t.Errorf("readable key: %s", r.stderr)
	}
}

// The whole path through the command: keys, an authorized file, a TLS
// server on loopback, pinning, rights.
func TestTLSCommands(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), []byte("hello\n"))
	other := t.TempDir()
	writeFile(t, filepath.Join(other, "hidden.txt"), []byte("secret\n"))
	rwKey, rwPub := keygen(t)
	roKey, roPub := keygen(t)
	state := filepath.Join(t.TempDir(), "state")
	id, err := auth.LoadServerIdentity(state)
	if err != nil {
		t.Fatal(err)
	}
	authz := filepath.Join(t.TempDir(), "authorized")
	writeFile(t, authz, []byte("# test keys\n"+rwPub+" user=wendy tree=main:rw\n"+roPub+" user=rita tree=main:ro\n"))
	addr := serve(t, dir, "--tls", "--state", state, "--authorized", authz, "--tree", "other="+other)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	loc := "zx://" + addr + "/"

	// Unknown server, no terminal: refused, saying what to do.
	r := runZX(t, "", "ls", "--tls", "--identity", rwKey, "--known-hosts", kh, loc).want(t, 1, "ls of an unknown server")
	if !strings.Contains(r.stderr, "is not known") || !strings.Contains(r.stderr, "--trust "+id.Fingerprint) {
		t.Errorf("ls of an unknown server: %s", r.stderr)
	}
	// Plain to a TLS server: refused, saying what to do.
	r = runZX(t, "", "ls", loc).want(t, 1, "plain ls of a TLS server")
	if !strings.Contains(r.stderr, "speaks only TLS") {
		t.Errorf("plain ls of a TLS server: %s", r.stderr)
	}
	// Trusted: works and pins.
	r = runZX(t, "", "ls", "--tls", "--identity", rwKey, "--known-hosts", kh, "--trust", id.Fingerprint, loc).want(t, 0, "ls --trust")
	if !strings.Contains(r.stdout, "a.txt") {
		t.Errorf("ls --trust printed %q", r.stdout)
	}
	r = runZX(t, "", "get", "--tls", "--identity", rwKey, "--known-hosts", kh, loc+"a.txt").want(t, 0, "get after pinning")
	if r.stdout != "hello\n" {
		t.Errorf("get printed %q", r.stdout)
	}
	runZX(t, "new\n", "put", "--tls", "--identity", rwKey, "--known-hosts", kh, loc+"b.txt").want(t, 0, "put with a rw key")
	// The tree not granted is not there.
	r = runZX(t, "", "ls", "--tls", "--identity", rwKey, "--known-hosts", kh, "zx://"+addr+"/@other/").want(t, 1, "ls of an ungranted tree")
	if !strings.Contains(r.stderr, "no tree named other that user wendy may use") {
		t.Errorf("ls of an ungranted tree: %s", r.stderr)
	}
	for _, args := range [][]string{{}, {"sync"}} {
		r = runZX(t, "", append([]string{"ctl", "--tls", "--identity", rwKey, "--known-hosts", kh, "zx://" + addr + "/@other/"}, args...)...).want(t, 1, fmt.Sprintf("ctl %v of an ungranted tree", args))
		if !strings.Contains(r.stderr, "no tree named other that user wendy may use") || r.stdout != "" {
			t.Errorf("ctl %v of an ungranted tree: %q %q", args, r.stdout, r.stderr)
		}
	}
	// A read-only key reads but does not write.
	runZX(t, "", "get", "--tls", "--identity", roKey, "--known-hosts", kh, loc+"b.txt").want(t, 0, "get with a ro key")
	for _, args := range [][]string{
		{"put", loc + "c.txt"},
		{"rm", loc + "b.txt"},
		{"mv", loc + "b.txt", loc + "d.txt"},
		{"wstat", loc + "b.txt", "mode=0600"},
	} {
		r := runZX(t, "x\n", append(args, "--tls", "--identity", roKey, "--known-hosts", kh)...).want(t, 1, args[0]+" with a ro key")
		if !strings.Contains(r.stderr, "user rita has read-only access to tree main") {
			t.Errorf("%s with a ro key: %s", args[0], r.stderr)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "b.txt")); string(b) != "new\n" {
		t.Errorf("b.txt holds %q after the ro key's attempts", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "c.txt")); err == nil {
		t.Error("a ro key created c.txt")
	}
	// A key the server does not know.
	strangerKey, _ := keygen(t)
	r = runZX(t, "", "ls", "--tls", "--identity", strangerKey, "--known-hosts", kh, loc).want(t, 1, "ls with an unknown key")
	if !strings.Contains(r.stderr, "is not authorized on this server") {
		t.Errorf("ls with an unknown key: %s", r.stderr)
	}
	// No key at all: told to make one, before dialling.
	r = runZX(t, "", "ls", "--tls", "--identity", filepath.Join(t.TempDir(), "none"), "--known-hosts", kh, loc).want(t, 1, "ls without a key")
	if !strings.Contains(r.stderr, "zx keygen") {
		t.Errorf("ls without a key: %s", r.stderr)
	}
}

// zx serve starts with an authorized file that has a bad line: it says on
// stderr which line and why, and serves the keys of the other lines.
func TestServeAuthorizedBadLine(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), []byte("hello\n"))
	goodKey, goodPub := keygen(t)
	badKey, badPub := keygen(t)
	state := filepath.Join(t.TempDir(), "state")
	id, err := auth.LoadServerIdentity(state)
	if err != nil {
		t.Fatal(err)
	}
	authz := filepath.Join(t.TempDir(), "authorized")
	writeFile(t, authz, []byte(goodPub+" user=good tree=main:rw\n"+badPub+" user=bad tree=main:rw expires=soon\n"))
	addr, log := startLog(t, serveRe, "serve", "--listen", "127.0.0.1:0", "--tls", "--state", state, "--authorized", authz, dir)
	want := "file=" + authz + " line=2 why=\"bad expires \\\"soon\\\""
	if l := log(); !strings.Contains(l, want) || !strings.Contains(l, "level=ERROR") {
		t.Errorf("zx serve's stderr does not report line 2 (%s):\n%s", want, l)
	}
	kh := filepath.Join(t.TempDir(), "known_hosts")
	r := runZX(t, "", "get", "--tls", "--identity", goodKey, "--known-hosts", kh, "--trust", id.Fingerprint, "zx://"+addr+"/a.txt").want(t, 0, "get with the good key")
	if r.stdout != "hello\n" {
		t.Errorf("get printed %q", r.stdout)
	}
	r = runZX(t, "", "get", "--tls", "--identity", badKey, "--known-hosts", kh, "zx://"+addr+"/a.txt").want(t, 1, "get with the key on the bad line")
	if !strings.Contains(r.stderr, "is on line 2 of the server's authorized keys file, which grants nothing until it is fixed (bad expires") {
		t.Errorf("get with the key on the bad line: %s", r.stderr)
	}
}

// openPTY opens a pseudo-terminal and returns its master and the name of
// its slave.
func openPTY(t *testing.T) (*os.File, string) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("SKIPPED: no pseudo-terminals here (%v): the interactive prompt is not tested", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	return m, fmt.Sprintf("/dev/pts/%d", n)
}

// On a terminal, an unknown server's key is shown and the user is asked.
func TestTrustPrompt(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), []byte("hello\n"))
	key, pub := keygen(t)
	state := filepath.Join(t.TempDir(), "state")
	id, err := auth.LoadServerIdentity(state)
	if err != nil {
		t.Fatal(err)
	}
	authz := filepath.Join(t.TempDir(), "authorized")
	writeFile(t, authz, []byte(pub+" user=pat tree=main:ro\n"))
	addr := serve(t, dir, "--tls", "--state", state, "--authorized", authz)
	kh := filepath.Join(t.TempDir(), "known_hosts")

	for _, answer := range []string{"no", "yes"} {
		m, slave := openPTY(t)
		s, err := os.OpenFile(slave, os.O_RDWR|syscall.O_NOCTTY, 0)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, zxBin, "ls", "--tls", "--identity", key, "--known-hosts", kh, "zx://"+addr+"/")
		var out bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = s, &out, s
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		s.Close()
		// Read the terminal until the question, then answer.
		var screen bytes.Buffer
		buf := make([]byte, 4096)
		for !strings.Contains(screen.String(), "(yes/no)? ") {
			m.SetReadDeadline(time.Now().Add(10 * time.Second))
			n, err := m.Read(buf)
			screen.Write(buf[:n])
			if err != nil {
				cancel()
				cmd.Wait()
				t.Fatalf("no question on the terminal (%v):\n%s", err, screen.String())
			}
		}
		if !strings.Contains(screen.String(), "is not known") || !strings.Contains(screen.String(), id.Fingerprint) {
			t.Errorf("the question does not show the fingerprint:\n%s", screen.String())
		}
		m.Write([]byte(answer + "\n"))
		err = cmd.Wait()
		cancel()
		fp, _, _ := (&auth.KnownHosts{Path: kh}).Lookup(addr)
		if answer == "no" {
			if err == nil || fp != "" {
				t.Errorf("answered no: exit %v, pinned %q", err, fp)
			}
			continue
		}
		if err != nil || !strings.Contains(out.String(), "a.txt") || fp != id.Fingerprint {
			t.Errorf("answered yes: exit %v, output %q, pinned %q", err, out.String(), fp)
		}
	}
}

// A server whose certificate a CA signed, and clients that verify it
// against that CA instead of pinning.
func TestCACommands(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), []byte("hello\n"))
	key, pub := keygen(t)
	tmp := t.TempDir()
	writePEM := func(name, typ string, der []byte) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := auth.GenerateKey()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvDER, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2),
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		ca, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srvKeyDER, _ := x509.MarshalPKCS8PrivateKey(srvKey)
	caFile := writePEM("ca.pem", "CERTIFICATE", caDER)
	certFile := writePEM("cert.pem", "CERTIFICATE", srvDER)
	keyFile := writePEM("key.pem", "PRIVATE KEY", srvKeyDER)
	authz := filepath.Join(tmp, "authorized")
	writeFile(t, authz, []byte(pub+" user=cara tree=main:ro\n"))
	addr := serve(t, dir, "--tls", "--cert", certFile, "--key", keyFile, "--authorized", authz)
	kh := filepath.Join(t.TempDir(), "known_hosts")

	r := runZX(t, "", "get", "--tls", "--identity", key, "--known-hosts", kh, "--ca", caFile, "zx://"+addr+"/a.txt").want(t, 0, "get --ca")
	if r.stdout != "hello\n" {
		t.Errorf("get --ca printed %q", r.stdout)
	}
	if _, err := os.Stat(kh); err == nil {
		t.Error("a CA-verified connection pinned a key")
	}
	// Without the CA, its key is not ed25519: nothing to pin.
	r = runZX(t, "", "ls", "--tls", "--identity", key, "--known-hosts", kh, "--accept-new", "zx://"+addr+"/").want(t, 1, "ls of a CA server without --ca")
	if !strings.Contains(r.stderr, "--ca") {
		t.Errorf("ls of a CA server without --ca: %s", r.stderr)
	}
	badCA := filepath.Join(tmp, "bad.pem")
	os.WriteFile(badCA, []byte("not a certificate"), 0o600)
	r = runZX(t, "", "ls", "--tls", "--identity", key, "--ca", badCA, "zx://"+addr+"/").want(t, 1, "ls with a bad --ca file")
	if !strings.Contains(r.stderr, "--ca") || !strings.Contains(r.stderr, "no PEM certificate") {
		t.Errorf("ls with a bad --ca: %s", r.stderr)
	}
}

// zx mount through TLS: a key with ids owns what the mount creates on the
// server and the mounting user sees it as its own; a read-only key's
// mount refuses writes with EROFS.
func TestTLSMount(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("SKIPPING the TLS mount test: no /dev/fuse (run as root on a machine with FUSE)")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("SKIPPING the TLS mount test: no fusermount3 (apt-get install fuse3)")
	}
	if os.Getuid() != 0 {
		t.Skip("SKIPPING the TLS mount test: giving files to the key's user needs root (CI runs as root)")
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.txt"), []byte("hello\n"))
	rwKey, rwPub := keygen(t)
	roKey, roPub := keygen(t)
	state := filepath.Join(t.TempDir(), "state")
	id, err := auth.LoadServerIdentity(state)
	if err != nil {
		t.Fatal(err)
	}
	authz := filepath.Join(t.TempDir(), "authorized")
	writeFile(t, authz, []byte(rwPub+" user=wendy tree=main:rw uid=2001 gid=2002\n"+roPub+" user=rita tree=main:ro\n"))
	addr := serve(t, dir, "--tls", "--state", state, "--authorized", authz)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	mount := func(key string) string {
		mnt := t.TempDir()
		zxMount(t, "--tls", "--identity", key, "--known-hosts", kh, "--trust", id.Fingerprint, "zx://"+addr+"/", mnt)
		return mnt
	}

	rw := mount(rwKey)
	if b, err := os.ReadFile(filepath.Join(rw, "a.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("read through the TLS mount: %v %q", err, b)
	}
	if err := os.WriteFile(filepath.Join(rw, "new.txt"), []byte("through TLS\n"), 0o644); err != nil {
		t.Fatalf("write through the TLS mount: %v", err)
	}
	fi, err := os.Stat(filepath.Join(dir, "new.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 2001 || st.Gid != 2002 {
		t.Errorf("the file the mount created is owned by %d:%d on the server, want the key's 2001:2002", st.Uid, st.Gid)
	}
	fi, err = os.Stat(filepath.Join(rw, "new.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != uint32(os.Getuid()) {
		t.Errorf("the mount shows the file as uid %d, want the mounting user's %d", st.Uid, os.Getuid())
	}

	ro := mount(roKey)
	err = os.WriteFile(filepath.Join(ro, "ro.txt"), []byte("x"), 0o644)
	if !errors.Is(err, syscall.EROFS) {
		t.Errorf("write through a read-only key's mount: %v, want EROFS", err)
	}
	if err := os.Remove(filepath.Join(ro, "a.txt")); !errors.Is(err, syscall.EROFS) {
		t.Errorf("remove through a read-only key's mount: %v, want EROFS", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "a.txt")); err != nil {
		t.Errorf("a.txt after the read-only mount's remove: %v", err)
	}
	// Commands to the control file are writes, refused as such.
	if err := os.WriteFile(filepath.Join(ro, "Ctl"), []byte("sync\n"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("echo sync > Ctl through a read-only key's mount: %v, want EROFS", err)
	}
	// As a shell says it. (dash's echo reports every write error as
	// "I/O error": the write's errno is EROFS all the same.)
	if out, err := exec.Command("bash", "-c", "echo sync > "+filepath.Join(ro, "Ctl")).CombinedOutput(); err == nil || !strings.Contains(string(out), "Read-only file system") {
		t.Errorf("bash: echo sync > Ctl through a read-only key's mount: %v %s", err, out)
	}
	runZX(t, "", "umount", rw).want(t, 0, "umount")
	runZX(t, "", "umount", ro).want(t, 0, "umount")
}

// A shared mount with a multi-user key: what each local user creates
// belongs on the server to the user its uid maps to, and root is squashed.
func TestMultiUserMount(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("SKIPPING the multi-user mount test: no /dev/fuse (run as root on a machine with FUSE)")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("SKIPPING the multi-user mount test: no fusermount3 (apt-get install fuse3)")
	}
	if os.Getuid() != 0 {
		t.Skip("SKIPPING the multi-user mount test: acting as other users needs root (CI runs as root)")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	key, pub := keygen(t)
	state := filepath.Join(t.TempDir(), "state")
	id, err := auth.LoadServerIdentity(state)
	if err != nil {
		t.Fatal(err)
	}
	authz := filepath.Join(t.TempDir(), "authorized")
	writeFile(t, authz, []byte(pub+" user=ws tree=main:rw multiuser uidmap=1000:3000 gidmap=1000:3000\n"))
	addr := serve(t, dir, "--tls", "--state", state, "--authorized", authz)
	mnt := t.TempDir()
	// Let the other user reach the mount point.
	for p := mnt; p != "/" && p != os.TempDir(); p = filepath.Dir(p) {
		os.Chmod(p, 0o755)
	}
	zxMount(t, "-o", "allow_other", "--tls", "--identity", key, "--known-hosts", filepath.Join(t.TempDir(), "kh"),
		"--trust", id.Fingerprint, "zx://"+addr+"/", mnt)

	as := func(uid uint32, name string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", "echo hi > "+filepath.Join(mnt, name))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("uid %d writing %s through the mount: %v %s", uid, name, err, out)
		}
	}
	owner := func(p string) (uint32, uint32) {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return st.Uid, st.Gid
	}
	as(1000, "mapped")
	as(1234, "unmapped")
	as(0, "root")
	for _, tc := range []struct {
		name       string
		uid, gid   uint32 // on the server
		muid, mgid uint32 // through the mount
	}{
		{"mapped", 3000, 3000, 1000, 1000},
		{"unmapped", 1234, 1234, 1234, 1234},
		{"root", 65534, 65534, 65534, 65534},
	} {
		if u, g := owner(filepath.Join(dir, tc.name)); u != tc.uid || g != tc.gid {
			t.Errorf("%s is owned by %d:%d on the server, want %d:%d", tc.name, u, g, tc.uid, tc.gid)
		}
		if u, g := owner(filepath.Join(mnt, tc.name)); u != tc.muid || g != tc.mgid {
			t.Errorf("%s shows as %d:%d through the mount, want %d:%d", tc.name, u, g, tc.muid, tc.mgid)
		}
	}
	runZX(t, "", "umount", mnt).want(t, 0, "umount")
}
