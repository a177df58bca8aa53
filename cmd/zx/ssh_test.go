package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/sshd"
)

// startSSHD starts a private sshd for the test and points ssh:// locations
// at it (ZX_SSH with its ssh_config, ZX_REMOTE_ZX at the zx under test).
func startSSHD(t *testing.T) *sshd.Server {
	t.Helper()
	if err := sshd.Available(); err != nil {
		t.Skipf("SKIPPING the ssh transport tests: no private sshd possible: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, err := sshd.Start(ctx, t.TempDir())
	if err != nil {
		t.Fatalf("starting sshd: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	t.Setenv("ZX_SSH", "ssh -F "+srv.Config)
	t.Setenv("ZX_REMOTE_ZX", zxBin)
	return srv
}

func TestSSH(t *testing.T) {
	srv := startSSHD(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "src/main.go"), []byte("package main\n\nfunc main() {}\n"))
	writeFile(t, filepath.Join(dir, "src/util.go"), []byte("package main\n"))
	writeFile(t, filepath.Join(dir, "src/a.o"), []byte("obj"))
	data := randomBytes(1<<20+3, 7)
	writeFile(t, filepath.Join(dir, "big.dat"), data)
	// The host from ssh_config; the same with user and port spelled out.
	base := "ssh://127.0.0.1" + dir
	full := "ssh://" + srv.User + "@127.0.0.1:" + strconv.Itoa(srv.Port) + dir

	r := runZX(t, "", "ls", base+"//src").want(t, 0, "ls over ssh")
	if r.stdout != "a.o\nmain.go\nutil.go\n" {
		t.Errorf("ls over ssh: %q", r.stdout)
	}
	r = runZX(t, "", "ls", full+"/src").want(t, 0, "ls over ssh, user and port given")
	if r.stdout != "a.o\nmain.go\nutil.go\n" {
		t.Errorf("ls of %s/src: %q", full, r.stdout)
	}
	r = runZX(t, "", "get", base+"//big.dat").want(t, 0, "get over ssh")
	if !bytes.Equal([]byte(r.stdout), data) {
		t.Errorf("get over ssh: %d bytes, want %d", len(r.stdout), len(data))
	}
	up := randomBytes(300<<10, 8)
	runZX(t, string(up), "put", base+"//src/up.dat").want(t, 0, "put over ssh")
	if b, err := os.ReadFile(filepath.Join(dir, "src/up.dat")); err != nil || !bytes.Equal(b, up) {
		t.Errorf("put over ssh: %v, %d bytes, want %d", err, len(b), len(up))
	}
	r = runZX(t, "", "find", "--stats", "--json", base, "~*.go").want(t, 0, "find over ssh")
	if n := strings.Count(r.stdout, "\n"); n != 2 || !strings.Contains(r.stdout, `"/src/main.go"`) {
		t.Errorf("find over ssh: %q", r.stdout)
	}
	if st := statsOf(t, r); st.RoundTrips != 1 {
		t.Errorf("find over ssh waited for %d round trips, want 1", st.RoundTrips)
	}
	runZX(t, "", "rm", base+"//src/a.o").want(t, 0, "rm over ssh")
	if _, err := os.Stat(filepath.Join(dir, "src/a.o")); !os.IsNotExist(err) {
		t.Errorf("rm over ssh: a.o still there (%v)", err)
	}

	t.Run("refused", func(t *testing.T) {
		r := runZX(t, "", "ls", "ssh://nosuchuserzx@127.0.0.1"+dir).want(t, 1, "ls as a user sshd refuses")
		if !strings.Contains(r.stderr, "Permission denied") || !strings.Contains(r.stderr, "ssh exit status 255") {
			t.Errorf("refused login: stderr %q does not quote ssh", r.stderr)
		}
	})
	t.Run("no-remote-zx", func(t *testing.T) {
		r := runZX(t, "", "ls", "--remote-zx", "/nonexistent/zx", base).want(t, 1, "ls with a missing remote zx")
		if !strings.Contains(r.stderr, "is zx installed on the remote host") {
			t.Errorf("missing remote zx: stderr %q", r.stderr)
		}
	})
	t.Run("no-ssh", func(t *testing.T) {
		r := runZX(t, "", "ls", "--ssh-command", "/nonexistent/ssh", base).want(t, 1, "ls with a missing ssh")
		if !strings.Contains(r.stderr, "cannot run /nonexistent/ssh") {
			t.Errorf("missing ssh: stderr %q", r.stderr)
		}
	})
	t.Run("missing-dir", func(t *testing.T) {
		r := runZX(t, "", "ls", base+"/nonexistent").want(t, 1, "ls of a directory that does not exist")
		if !strings.Contains(r.stderr, "cannot export") {
			t.Errorf("missing dir: stderr %q", r.stderr)
		}
	})

	// The library: closing the connection ends ssh and the remote server.
	t.Run("reaped", func(t *testing.T) {
		ctx := context.Background()
		loc, err := client.ParseLocation(base)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.DialSSH(ctx, loc.SSH, client.SSHOptions{
			Command: []string{"ssh", "-F", srv.Config}, RemoteZX: zxBin, Batch: true,
		}, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := zx.ReadFile(ctx, c.Tree(""), "/src/main.go")
		if err != nil || string(got) != "package main\n\nfunc main() {}\n" {
			t.Fatalf("read over ssh: %v %q", err, got)
		}
		if n := len(descendants(srv)); n == 0 {
			t.Fatal("no session under sshd while connected")
		}
		c.Close()
		// The remote zx sees the end of its input and exits, and sshd
		// ends the session: poll for it, up to a bound.
		deadline := time.Now().Add(10 * time.Second)
		for len(descendants(srv)) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("processes left under sshd after Close: %v", descendants(srv))
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// descendants returns the command lines of the processes under sshd,
// from the kernel's lists of children (sshd.Children): ps would read
// every process on the machine, and hang behind any stuck on a FUSE mount
// (another test's).
func descendants(srv *sshd.Server) []string {
	var got []string
	queue := []int{srv.Pid()}
	for len(queue) > 0 {
		for _, c := range sshd.Children(queue[0]) {
			args, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c), "cmdline"))
			got = append(got, strings.TrimSpace(strings.ReplaceAll(string(args), "\x00", " ")))
			queue = append(queue, c)
		}
		queue = queue[1:]
	}
	return got
}

func TestSSHMount(t *testing.T) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		t.Skip("SKIPPING the ssh mount test: no /dev/fuse (run as root on a machine with FUSE)")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Skip("SKIPPING the ssh mount test: no fusermount3 (apt-get install fuse3)")
	}
	startSSHD(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "src/main.go"), []byte("package main\n"))
	mnt := t.TempDir()
	zxMount(t, "ssh://127.0.0.1"+dir, mnt)
	b, err := os.ReadFile(filepath.Join(mnt, "src/main.go"))
	if err != nil || string(b) != "package main\n" {
		t.Fatalf("read through the ssh mount: %v %q", err, b)
	}
	if err := os.WriteFile(filepath.Join(mnt, "src/new.txt"), []byte("written through ssh\n"), 0o644); err != nil {
		t.Fatalf("write through the ssh mount: %v", err)
	}
	// The server's disk, read directly (not through zx), has what a
	// close under a delegation returned for once it is synced.
	runZX(t, "", "sync", mnt).want(t, 0, "zx sync")
	if b, err := os.ReadFile(filepath.Join(dir, "src/new.txt")); err != nil || string(b) != "written through ssh\n" {
		t.Fatalf("file written through the mount, on the server: %v %q", err, b)
	}
	ents, err := os.ReadDir(filepath.Join(mnt, "src"))
	if err != nil || len(ents) != 2 {
		t.Fatalf("readdir through the ssh mount: %v %v", err, ents)
	}
	runZX(t, "", "umount", mnt).want(t, 0, "umount")
}
