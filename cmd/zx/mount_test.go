package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zxfs/zx/auth"
	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/wan"
)

func canMount(t *testing.T) {
	t.Helper()
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("!!! SKIPPING FUSE TESTS: /dev/fuse is missing: " + err.Error() + " !!!")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("!!! SKIPPING FUSE TESTS: fusermount3 is missing !!!")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return strings.Contains(string(b), " "+dir+" ")
}

// daemonPid returns the pid of the zx mount process serving dir, or 0.
func daemonPid(dir string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
		if len(args) > 2 && string(args[0]) == zxBin && string(args[1]) == "mount" && string(args[len(args)-1]) == dir {
			return pid
		}
	}
	return 0
}

// zxMount runs zx mount (as a daemon) and makes sure that, whatever
// happens, the mount and its process are gone when the test ends.
func zxMount(t *testing.T, args ...string) {
	t.Helper()
	dir := args[len(args)-1]
	t.Cleanup(func() {
		if mounted(dir) {
			exec.Command("fusermount3", "-u", "-z", dir).Run()
		}
		for i := 0; i < 50 && daemonPid(dir) != 0; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		if pid := daemonPid(dir); pid != 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	runZX(t, "", append([]string{"mount"}, args...)...).want(t, 0, "zx mount")
	if !mounted(dir) {
		t.Fatalf("zx mount returned but %s is not mounted", dir)
	}
}

// TestMountDaemon: zx mount returns once mounted, leaving a daemon;
// -o options work; zx sync and zx umount wait for written-back data.
func TestMountDaemon(t *testing.T) {
	canMount(t)
	srvDir := t.TempDir()
	addr := serve(t, srvDir)
	mnt, cdir := t.TempDir(), t.TempDir()
	zxMount(t, "-o", "rw,nodev,writeback,cache_dir="+cdir+",cache_size=64M,timeout=5s,coherency=1s,idmap=user,prefetch=5000,siblings=2M", "zx://"+addr+"/", mnt)
	if daemonPid(mnt) == 0 {
		t.Fatal("no mount process left running")
	}
	must(t, os.WriteFile(filepath.Join(mnt, "f"), []byte("through the daemon"), 0o644))
	synced := serverSynced(t, mnt)
	runZX(t, "", "sync", mnt).want(t, 0, "zx sync")
	if b, _ := os.ReadFile(filepath.Join(srvDir, "f")); string(b) != "through the daemon" {
		t.Fatalf("after zx sync the server has %q", b)
	}
	// And the server flushed its disk for it (lfs counts its syncs).
	if n := serverSynced(t, mnt); n != synced+1 {
		t.Errorf("zx sync: the server synced %d times, want 1", n-synced)
	}
	// A second mount cannot share the cache directory.
	mnt2 := t.TempDir()
	t.Cleanup(func() {
		if mounted(mnt2) {
			exec.Command("fusermount3", "-u", "-z", mnt2).Run()
		}
	})
	r := runZX(t, "", "mount", "-o", "writeback,cache_dir="+cdir, "zx://"+addr+"/", mnt2).want(t, 1, "second mount with the same cache")
	if !strings.Contains(r.stderr, "in use") {
		t.Errorf("second mount said %q", r.stderr)
	}
	// Bad options are usage errors, reported by the caller.
	runZX(t, "", "mount", "-o", "bogus", "zx://"+addr+"/", t.TempDir()).want(t, 2, "bad option")
	runZX(t, "", "mount", "-o", "prefetch=-1", "zx://"+addr+"/", t.TempDir()).want(t, 2, "bad prefetch option")
	runZX(t, "", "mount", "--prefetch", "-1", "zx://"+addr+"/", t.TempDir()).want(t, 2, "bad --prefetch")
	runZX(t, "", "mount", "-o", "siblings=lots", "zx://"+addr+"/", t.TempDir()).want(t, 2, "bad siblings option")
	runZX(t, "", "mount", "--siblings", "-1", "zx://"+addr+"/", t.TempDir()).want(t, 2, "bad --siblings")
	runZX(t, "", "mount", "--idmap", "file:/nonexistent", "zx://"+addr+"/", t.TempDir()).want(t, 2, "bad idmap")
	// Errors of the daemon before it is ready reach the caller.
	r = runZX(t, "", "mount", "zx://127.0.0.1:1/", t.TempDir()).want(t, 1, "unreachable server")
	if !strings.Contains(r.stderr, "cannot connect") {
		t.Errorf("mount of an unreachable server said %q", r.stderr)
	}

	pid := daemonPid(mnt)
	must(t, os.WriteFile(filepath.Join(mnt, "g"), []byte("before umount"), 0o644))
	runZX(t, "", "umount", mnt).want(t, 0, "zx umount")
	if mounted(mnt) {
		t.Fatal("still mounted after zx umount")
	}
	if b, _ := os.ReadFile(filepath.Join(srvDir, "g")); string(b) != "before umount" {
		t.Fatalf("after zx umount the server has %q", b)
	}
	for i := 0; i < 50 && processAlive(pid); i++ {
		time.Sleep(100 * time.Millisecond)
	}
	if processAlive(pid) {
		t.Fatal("the mount process is still running after zx umount")
	}
}

// serverSynced returns how many syncs the server's lfs has carried out,
// from the "synced N failed M" line of its section of the mount's Ctl.
func serverSynced(t *testing.T, mnt string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mnt, "Ctl"))
	if err != nil {
		t.Fatal(err)
	}
	_, lfsSec, ok := strings.Cut(string(b), "== lfs ")
	if !ok {
		t.Fatalf("no lfs section in the mount's Ctl:\n%s", b)
	}
	for _, l := range strings.Split(lfsSec, "\n") {
		if f := strings.Fields(l); len(f) == 4 && f[0] == "synced" && f[2] == "failed" {
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatalf("bad line %q", l)
			}
			return n
		}
	}
	t.Fatalf("no synced line in the lfs section of the mount's Ctl:\n%s", lfsSec)
	return 0
}

func processAlive(pid int) bool {
	if pid == 0 {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	return err == nil && !strings.Contains(string(b), ") Z ")
}

// TestMountCrash: the mount process is killed (SIGKILL) with written-back
// data not yet on the server; the next mount replays its journal, also
// one in the default directory with neither --writeback nor --cache-dir.
func TestMountCrash(t *testing.T) {
	canMount(t)
	for _, withDir := range []bool{true, false} {
		t.Run(fmt.Sprintf("cache-dir=%v", withDir), func(t *testing.T) { mountCrash(t, withDir) })
	}
}

func mountCrash(t *testing.T, withDir bool) {
	srvDir := t.TempDir()
	addr := serve(t, srvDir)
	p, err := wan.Listen("127.0.0.1:0", addr, wan.Config{})
	must(t, err)
	defer p.Close()
	mnt, cdir := t.TempDir(), t.TempDir()
	loc := "zx://" + p.Addr() + "/"
	first, second := []string{"--writeback", "--cache-dir", cdir, loc, mnt}, []string{"--cache-dir", cdir, loc, mnt}
	journals := filepath.Join(cdir, "*", "journal")
	if !withDir {
		t.Setenv("XDG_CACHE_HOME", cdir)
		first, second = []string{"--writeback", loc, mnt}, []string{loc, mnt}
		journals = filepath.Join(cdir, "zx", "*", "journal")
	}
	zxMount(t, first...)
	must(t, os.WriteFile(filepath.Join(mnt, "f"), []byte("old"), 0o644))
	runZX(t, "", "sync", mnt).want(t, 0, "zx sync")

	p.Stall(2 * time.Second)
	must(t, os.WriteFile(filepath.Join(mnt, "f"), []byte("written, then the client crashed"), 0o644))
	pid := daemonPid(mnt)
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	for i := 0; i < 50 && processAlive(pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if b, _ := os.ReadFile(filepath.Join(srvDir, "f")); string(b) != "old" {
		t.Fatalf("the server has %q; the stall should have kept the data from it", b)
	}
	if recs := journalPending(t, journals); len(recs) != 1 {
		t.Fatalf("journal after the crash: %v, want one record", recs)
	}
	// The dead mount's unmount works (nothing to wait for).
	runZX(t, "", "umount", mnt).want(t, 0, "zx umount of a dead mount")

	// Mounting waits out the rest of the stall.
	zxMount(t, second...)
	if b, _ := os.ReadFile(filepath.Join(srvDir, "f")); string(b) != "written, then the client crashed" {
		t.Fatalf("after the remount the server has %q", b)
	}
	if b, _ := os.ReadFile(filepath.Join(mnt, "f")); string(b) != "written, then the client crashed" {
		t.Fatalf("the mount shows %q", b)
	}
	if recs := journalPending(t, journals); len(recs) != 0 {
		t.Fatalf("journal after replay: %v", recs)
	}
}

// journalPending returns the records pending in the write-back journals
// matching the pattern glob.
func journalPending(t *testing.T, glob string) []string {
	t.Helper()
	dirs, _ := filepath.Glob(glob)
	if len(dirs) == 0 {
		t.Fatalf("no journal %s", glob)
	}
	var recs []string
	for _, d := range dirs {
		ps, err := cache.JournalPending(d)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, ps...)
	}
	return recs
}

// TestUmountPending: zx umount refuses, saying so, while written-back
// data cannot reach the server; --force unmounts and keeps it journaled.
func TestUmountPending(t *testing.T) {
	canMount(t)
	srvDir := t.TempDir()
	addr := serve(t, srvDir)
	p, err := wan.Listen("127.0.0.1:0", addr, wan.Config{})
	must(t, err)
	defer p.Close()
	mnt, cdir := t.TempDir(), t.TempDir()
	zxMount(t, "--writeback", "--timeout", "1s", "--cache-dir", cdir, "zx://"+p.Addr()+"/", mnt)
	must(t, os.WriteFile(filepath.Join(mnt, "f"), nil, 0o644))
	runZX(t, "", "sync", mnt).want(t, 0, "zx sync")
	p.Stall(time.Hour) // the server is unreachable from now on
	must(t, os.WriteFile(filepath.Join(mnt, "f"), []byte("pending"), 0o644))
	r := runZX(t, "", "umount", mnt).want(t, 1, "zx umount with data pending")
	if !strings.Contains(r.stderr, "not unmounted") || !strings.Contains(r.stderr, "1 journaled changes (7 bytes)") ||
		!strings.Contains(r.stderr, "kept in the journal") || strings.Contains(r.stderr, "memory") || !strings.Contains(r.stderr, "the journal is kept and sent at the next mount") {
		t.Errorf("zx umount said %q", r.stderr)
	}
	if !mounted(mnt) {
		t.Fatal("zx umount refused but unmounted")
	}
	runZX(t, "", "sync", mnt).want(t, 1, "zx sync with the server unreachable")
	runZX(t, "", "umount", "--force", mnt).want(t, 0, "zx umount --force")
	if mounted(mnt) {
		t.Fatal("still mounted after zx umount --force")
	}
	if recs := journalPending(t, filepath.Join(cdir, "*", "journal")); len(recs) != 1 {
		t.Fatalf("journal after a forced unmount: %v, want the pending record", recs)
	}
}

// TestMountMistakes: the mistakes a new user makes with mount points get
// exit status 1 and a message that says what to do, and change nothing:
// mounting over a directory that has entries (unless -o nonempty), on a
// zx mount again, and syncing or unmounting a directory that is not a zx
// mount (an fsync of it would succeed and sync nothing); mounting a path
// the server does not have, or a file.
func TestMountMistakes(t *testing.T) {
	canMount(t)
	srvDir := t.TempDir()
	writeFile(t, filepath.Join(srvDir, "remote"), []byte("r"))
	addr := serve(t, srvDir)
	loc := "zx://" + addr + "/"

	full := t.TempDir()
	writeFile(t, filepath.Join(full, "local"), []byte("l"))
	r := runZX(t, "", "mount", loc, full).want(t, 1, "mount on a non-empty directory")
	if !strings.Contains(r.stderr, "is not empty") || !strings.Contains(r.stderr, "-o nonempty") {
		t.Errorf("mount on a non-empty directory said %q", r.stderr)
	}
	if mounted(full) {
		exec.Command("fusermount3", "-u", "-z", full).Run()
		t.Fatal("mounted on a non-empty directory")
	}
	// A path on the server that is missing or not a directory fails at
	// once (the cache's watch retried it for 10 s before), saying so.
	empty := t.TempDir()
	for _, c := range []struct{ path, want string }{
		{"nope", "cannot mount " + loc + "nope: stat /nope: no such file or directory"},
		{"remote", "cannot mount " + loc + "remote: /remote is not a directory on the server"},
	} {
		r := runZX(t, "", "mount", loc+c.path, empty).want(t, 1, "mount of /"+c.path)
		if !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "watch failed") {
			t.Errorf("mount of /%s said %q, want %q", c.path, r.stderr, c.want)
		}
		if mounted(empty) {
			exec.Command("fusermount3", "-u", "-z", empty).Run()
			t.Fatalf("mount of /%s mounted", c.path)
		}
	}
	for _, cmd := range []string{"sync", "umount"} {
		r := runZX(t, "", cmd, full).want(t, 1, "zx "+cmd+" of a plain directory")
		if !strings.Contains(r.stderr, "zx "+cmd+": "+full+" is not a zx mount") {
			t.Errorf("zx %s of a plain directory said %q", cmd, r.stderr)
		}
	}

	// -o nonempty mounts over the entries, hiding them until unmounted.
	zxMount(t, "-o", "nonempty", loc, full)
	if _, err := os.Stat(filepath.Join(full, "remote")); err != nil {
		t.Fatalf("-o nonempty: %v", err)
	}
	r = runZX(t, "", "mount", "-o", "nonempty", loc, full).want(t, 1, "mount on a zx mount")
	if !strings.Contains(r.stderr, "is a zx mount already") {
		t.Errorf("mount on a zx mount said %q", r.stderr)
	}
	runZX(t, "", "sync", full+"/").want(t, 0, "zx sync of the mount point")
	runZX(t, "", "umount", full).want(t, 0, "zx umount")
	if b, err := os.ReadFile(filepath.Join(full, "local")); err != nil || string(b) != "l" {
		t.Errorf("after the unmount, the hidden entry: %q, %v", b, err)
	}
}

// TestMountKeyChanged: a mount whose server comes back with another key
// is refused as every command is, loudly: zx sync and zx umount print the
// warning the other commands print (not "permission denied"), zx umount
// unmounts without --force since nothing is pending, and mounting again
// fails at once with the warning.
func TestMountKeyChanged(t *testing.T) {
	canMount(t)
	srvDir := t.TempDir()
	writeFile(t, filepath.Join(srvDir, "a"), []byte("a"))
	key, pubLine := keygen(t)
	authz := filepath.Join(t.TempDir(), "authorized")
	writeFile(t, authz, []byte(pubLine+" user=u tree=*:rw\n"))
	stateA, stateB := t.TempDir(), t.TempDir()
	idA, err := auth.LoadServerIdentity(stateA)
	must(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	addr := l.Addr().String()
	l.Close()
	srv := &zxServer{t: t, dir: srvDir, addr: addr, args: []string{"--tls", "--state", stateA, "--authorized", authz}}
	srv.start()
	t.Cleanup(srv.kill)
	kh := filepath.Join(t.TempDir(), "known_hosts")
	runZX(t, "", "ls", "--tls", "--identity", key, "--known-hosts", kh, "--trust", idA.Fingerprint, "zx://"+addr+"/").want(t, 0, "ls --trust (pins the key)")
	mnt := t.TempDir()
	zxMount(t, "--timeout", "2s", "--tls", "--identity", key, "--known-hosts", kh, "zx://"+addr+"/", mnt)
	if b, err := os.ReadFile(filepath.Join(mnt, "a")); err != nil || string(b) != "a" {
		t.Fatalf("read through the mount: %q, %v", b, err)
	}

	// The server comes back with another key.
	srv.kill()
	srv.args = []string{"--tls", "--state", stateB, "--authorized", authz}
	srv.start()
	banner := "@  WARNING: THE KEY OF THE ZX SERVER AT " + addr + " HAS CHANGED!\n"
	if _, err := os.Stat(filepath.Join(mnt, "b")); err == nil {
		t.Fatal("stat through the mount succeeded with a server whose key changed")
	}
	r := runZX(t, "", "sync", mnt).want(t, 1, "zx sync with the server's key changed")
	if !strings.Contains(r.stderr, banner) || !strings.Contains(r.stderr, "nothing written through the mount is waiting to be sent") ||
		strings.Contains(r.stderr, "journal") {
		t.Errorf("zx sync said %q; want the warning, and that nothing is waiting", r.stderr)
	}
	r = runZX(t, "", "umount", mnt).want(t, 0, "zx umount with the server's key changed and nothing pending")
	if !strings.Contains(r.stderr, banner) || mounted(mnt) {
		t.Errorf("zx umount said %q (mounted: %v); want the warning, and unmounted", r.stderr, mounted(mnt))
	}
	r = runZX(t, "", "mount", "--timeout", "2s", "--tls", "--identity", key, "--known-hosts", kh, "zx://"+addr+"/", mnt).want(t, 1, "zx mount with the server's key changed")
	if !strings.Contains(r.stderr, banner) || !strings.Contains(r.stderr, "--trust ") || mounted(mnt) {
		t.Errorf("zx mount said %q (mounted: %v); want the warning, and not mounted", r.stderr, mounted(mnt))
	}
}

// TestSyncServerDown: with the server unreachable and nothing written, zx
// sync fails saying that nothing is waiting (no journal is mentioned: there
// is none), and zx umount unmounts. A write held in an open file is
// pending: zx umount refuses, saying that it is held in the mount's
// memory and that --force would lose it.
func TestSyncServerDown(t *testing.T) {
	canMount(t)
	srvDir := t.TempDir()
	addr := serve(t, srvDir)
	p, err := wan.Listen("127.0.0.1:0", addr, wan.Config{})
	must(t, err)
	defer p.Close()

	mnt := t.TempDir()
	zxMount(t, "--timeout", "1s", "zx://"+p.Addr()+"/", mnt)
	p.Stall(time.Hour) // the server is unreachable from now on
	r := runZX(t, "", "sync", mnt).want(t, 1, "zx sync with the server unreachable")
	if !strings.Contains(r.stderr, "nothing written through the mount is waiting to be sent") ||
		!strings.Contains(r.stderr, "did not answer in time") || strings.Contains(r.stderr, "journal") {
		t.Errorf("zx sync with nothing written said %q", r.stderr)
	}
	r = runZX(t, "", "umount", mnt).want(t, 0, "zx umount with nothing pending")
	if !strings.Contains(r.stderr, "nothing written through the mount was waiting") || mounted(mnt) {
		t.Errorf("zx umount with nothing pending said %q (mounted: %v)", r.stderr, mounted(mnt))
	}
	p.Resume()

	// Writes held in an open file, not yet sent, are pending.
	mnt = t.TempDir()
	zxMount(t, "--timeout", "1s", "zx://"+p.Addr()+"/", mnt)
	f, err := os.Create(filepath.Join(mnt, "open"))
	must(t, err)
	defer f.Close()
	_, err = f.Write([]byte("held"))
	must(t, err)
	p.Stall(time.Hour)
	r = runZX(t, "", "umount", mnt).want(t, 1, "zx umount with a write pending")
	if !strings.Contains(r.stderr, "not unmounted") || !strings.Contains(r.stderr, "writes to 1 open files (4 bytes)") ||
		!strings.Contains(r.stderr, "held in the memory of the mount's process") || !strings.Contains(r.stderr, "lose what the mount's process holds") ||
		strings.Contains(r.stderr, "journal") {
		t.Errorf("zx umount with a write pending said %q", r.stderr)
	}
	if !mounted(mnt) {
		t.Fatal("zx umount refused but unmounted")
	}
	p.Resume()
	must(t, f.Close())
	runZX(t, "", "umount", mnt).want(t, 0, "zx umount with the server back")
	if b, err := os.ReadFile(filepath.Join(srvDir, "open")); string(b) != "held" {
		t.Errorf("the held write is not on the server after zx umount: %q, %v", b, err)
	}
}
