package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zxfs/zx/wan"
)

// ctlNumber returns the number after word in the line of MNT/Ctl that
// starts with prefix (e.g. "delegations", "revoked"), or -1.
func ctlNumber(t *testing.T, mnt, prefix, word string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mnt, "Ctl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != prefix {
			continue
		}
		for i := 1; i+1 < len(f); i++ {
			if f[i] == word {
				n, err := strconv.Atoi(f[i+1])
				if err != nil {
					t.Fatalf("Ctl line %q", l)
				}
				return n
			}
		}
	}
	return -1
}

// TestDelegationHolderKilled: a mount holding a delegation, with changes
// journaled and not yet on the server (the link stalled), is killed
// (SIGKILL). Another client's look inside the delegated directory waits
// for the lease, not for ever: the server revokes the delegation and
// answers it; then the other client writes one of the files. The holder's
// next mount replays its journal: every file the other client did not
// touch is the holder's, byte for byte; the one it wrote keeps the other
// client's version, and the holder's is kept as a conflict copy, listed.
func TestDelegationHolderKilled(t *testing.T) {
	canMount(t)
	srvDir := t.TempDir()
	addr := serve(t, srvDir, "--delegation-lease", "1s")
	p, err := wan.Listen("127.0.0.1:0", addr, wan.Config{})
	must(t, err)
	defer p.Close()
	mntA, cdirA, mntB := t.TempDir(), t.TempDir(), t.TempDir()
	locA := "zx://" + p.Addr() + "/"
	zxMount(t, "--cache-dir", cdirA, locA, mntA)
	zxMount(t, "--strict", "zx://"+addr+"/", mntB)
	must(t, os.WriteFile(filepath.Join(mntA, "first"), nil, 0o644))
	must(t, os.Mkdir(filepath.Join(mntA, "D"), 0o755))
	waitFor(t, "the delegation of D", func() bool { return ctlNumber(t, mntA, "delegations", "held") == 1 })

	p.Stall(-1)
	const files = 5
	for i := range files {
		must(t, os.WriteFile(filepath.Join(mntA, fmt.Sprintf("D/f%d", i)), []byte(fmt.Sprintf("file %d, journaled", i)), 0o644))
	}
	pid := daemonPid(mntA)
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	for i := 0; i < 100 && processAlive(pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	runZX(t, "", "umount", mntA).want(t, 0, "zx umount of a dead mount")

	// B's look waits for the lease, then gets what the server has.
	if _, err := os.Stat(filepath.Join(mntB, "D/f0")); !os.IsNotExist(err) {
		t.Fatalf("B's stat of D/f0 before the holder came back: %v, want ENOENT", err)
	}
	if n := ctlNumber(t, mntB, "delegations", "revoked"); n != 1 {
		t.Fatalf("the server revoked %d delegations, want 1", n)
	}
	// Meanwhile B writes one of the files the holder had written.
	must(t, os.WriteFile(filepath.Join(mntB, "D/f1"), []byte("B's version"), 0o644))
	p.Cut()
	p.Resume()
	zxMount(t, "--cache-dir", cdirA, locA, mntA)
	for i := range files {
		want := fmt.Sprintf("file %d, journaled", i)
		if i == 1 {
			want = "B's version" // not overwritten by the replay
		}
		if b, err := os.ReadFile(filepath.Join(srvDir, fmt.Sprintf("D/f%d", i))); err != nil || string(b) != want {
			t.Errorf("D/f%d on the server after the replay: %q %v, want %q", i, b, err, want)
		}
		if b, err := os.ReadFile(filepath.Join(mntB, fmt.Sprintf("D/f%d", i))); err != nil || string(b) != want {
			t.Errorf("D/f%d through B after the replay: %q %v", i, b, err)
		}
	}
	// The holder's version of f1 is kept beside it, and listed.
	copies, _ := filepath.Glob(filepath.Join(srvDir, "D/f1.zx-conflict-*"))
	if len(copies) != 1 {
		t.Fatalf("conflict copies of D/f1: %v, want one", copies)
	}
	if b, _ := os.ReadFile(copies[0]); string(b) != "file 1, journaled" {
		t.Errorf("the conflict copy holds %q", b)
	}
	if r := runZX(t, "", "conflicts", mntA).want(t, 0, "zx conflicts"); !strings.Contains(r.stdout, "/D/f1") || strings.Contains(r.stdout, "/D/f0") {
		t.Errorf("zx conflicts says:\n%s", r.stdout)
	}
}

// waitFor waits until f is true, for at most 10 s.
func waitFor(t *testing.T, what string, f func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !f(); {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDelegationServerRestart: the server is killed (SIGKILL) and
// restarted while a mount holds a delegation with changes not yet
// acknowledged. The server forgets the delegation; the mount finds that
// out when it is back (it asks for it again and is not told it holds
// it), sends what it had, and goes on without it; nothing is lost, and
// another mount then sees everything.
func TestDelegationServerRestart(t *testing.T) {
	canMount(t)
	srvDir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	l.Close()
	srv := &zxServer{t: t, dir: srvDir, addr: addr}
	srv.start()
	t.Cleanup(srv.kill)
	mntA, cdirA, mntB := t.TempDir(), t.TempDir(), t.TempDir()
	zxMount(t, "--cache-dir", cdirA, "--timeout", "20s", "zx://"+addr+"/", mntA)
	must(t, os.WriteFile(filepath.Join(mntA, "first"), nil, 0o644))
	must(t, os.Mkdir(filepath.Join(mntA, "D"), 0o755))
	waitFor(t, "the delegation of D", func() bool { return ctlNumber(t, mntA, "delegations", "held") == 1 })
	for i := range 5 {
		must(t, os.WriteFile(filepath.Join(mntA, fmt.Sprintf("D/before%d", i)), []byte("written before the restart"), 0o644))
	}
	srv.kill()
	srv.start()
	for i := range 5 {
		must(t, os.WriteFile(filepath.Join(mntA, fmt.Sprintf("D/after%d", i)), []byte("written after the restart"), 0o644))
	}
	runZX(t, "", "sync", mntA).want(t, 0, "zx sync")
	waitFor(t, "the delegation forgotten", func() bool { return ctlNumber(t, mntA, "delegations", "held") == 0 })
	zxMount(t, "--strict", "zx://"+addr+"/", mntB)
	for _, when := range []string{"before", "after"} {
		for i := range 5 {
			name := fmt.Sprintf("D/%s%d", when, i)
			want := "written " + when + " the restart"
			if b, err := os.ReadFile(filepath.Join(srvDir, name)); err != nil || string(b) != want {
				t.Errorf("%s on the server: %q %v", name, b, err)
			}
			if b, err := os.ReadFile(filepath.Join(mntB, name)); err != nil || string(b) != want {
				t.Errorf("%s through another mount: %q %v", name, b, err)
			}
		}
	}
	if r := runZX(t, "", "conflicts", "--json", mntA).want(t, 0, "zx conflicts"); r.stdout != "" {
		t.Errorf("conflicts after a server restart:\n%s", r.stdout)
	}
}
