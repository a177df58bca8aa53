package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
)

// Fault test parameters.
const (
	faultFiles  = 6
	faultRounds = 12 // about 4 s on an idle machine
	faultBlock  = 4 << 10
)

// versionData is version v of file f: blocks of faultBlock bytes, each
// stamped with the file, the version and its index and filled from them,
// so that a file holding anything but exactly one version is detected.
func versionData(f, v int) []byte {
	rng := rand.New(rand.NewPCG(uint64(f), uint64(v)))
	nblocks := 4 + rng.IntN(150) // 16 KiB to 600 KiB
	b := make([]byte, 0, nblocks*faultBlock)
	for i := range nblocks {
		blk := fmt.Appendf(nil, "f%d v%d b%d\n", f, v, i)
		for len(blk) < faultBlock {
			blk = append(blk, byte('a'+(f+v+i+len(blk))%26))
		}
		b = append(b, blk...)
	}
	return b
}

// whichVersion returns the version file f holds, or an error if b is not
// exactly one version.
func whichVersion(f int, b []byte) (int, error) {
	var ff, v, i int
	if _, err := fmt.Sscanf(string(b[:min(len(b), 64)]), "f%d v%d b%d\n", &ff, &v, &i); err != nil || ff != f || i != 0 {
		return 0, fmt.Errorf("no version header (%d bytes)", len(b))
	}
	if !bytes.Equal(b, versionData(f, v)) {
		return 0, fmt.Errorf("not exactly version %d (%d bytes): a mix or a torn write", v, len(b))
	}
	return v, nil
}

// zxServer is a zx serve child process that the test kills and restarts.
type zxServer struct {
	t    *testing.T
	dir  string
	addr string
	args []string // more flags of zx serve
	cmd  *exec.Cmd
	done chan struct{}
}

func (s *zxServer) start() {
	s.t.Helper()
	cmd := exec.Command(zxBin, append(append([]string{"serve", "--listen", s.addr}, s.args...), s.dir)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	ready := make(chan struct{})
	done := make(chan struct{})
	var logb strings.Builder
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if serveRe.MatchString(sc.Text()) {
				close(ready)
				break
			}
			logb.WriteString(sc.Text() + "\n")
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(done)
	}()
	select {
	case <-ready:
	case <-done:
		s.t.Fatalf("zx serve exited before it was ready: %s", logb.String())
	case <-time.After(10 * time.Second):
		s.t.Fatal("zx serve not ready after 10s")
	}
	s.cmd, s.done = cmd, done
}

// kill kills the server with SIGKILL: no chance to finish anything.
func (s *zxServer) kill() {
	if s.cmd == nil {
		return
	}
	syscall.Kill(s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

func TestFaults(t *testing.T) {
	// A real zx serve process behind zx lag --cut-random: connections are
	// cut at random points during puts and gets, and the server is killed
	// with SIGKILL and restarted on the same port, mid-write, over and
	// over. A client with reconnection writes whole files (versions whose
	// every block is stamped) and reads them. Afterwards, and after every
	// round, every file holds exactly one version, at least the last one
	// whose put was acknowledged. The rounds are a fixed number, not as
	// many as fit in some time: a loaded machine runs them all, slower.
	ctx := context.Background()
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	srv := &zxServer{t: t, dir: dir, addr: addr}
	srv.start()
	t.Cleanup(srv.kill)
	lagAddr := start(t, lagRe, "lag", "--listen", "127.0.0.1:0", "--to", addr, "--cut-random", "4MiB", "--seed", "7")

	c, err := client.Dial(ctx, lagAddr, client.Options{Reconnect: true, ReconnectWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tr := c.Tree("")

	var mu sync.Mutex
	acked := make([]int, faultFiles)     // last version acknowledged
	attempted := make([]int, faultFiles) // last version attempted
	var nput, nok, nunknown, nget, ngetok int
	check := func(when string) {
		t.Helper()
		for f := range faultFiles {
			b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("f%d", f)))
			mu.Lock()
			a, at := acked[f], attempted[f]
			mu.Unlock()
			if errors.Is(err, os.ErrNotExist) && a == 0 {
				continue
			}
			if err != nil {
				t.Fatalf("%s: f%d: %v (version %d was acknowledged)", when, f, err, a)
			}
			v, err := whichVersion(f, b)
			if err != nil {
				t.Fatalf("%s: f%d: %v", when, f, err)
			}
			if v < a || v > at {
				t.Fatalf("%s: f%d holds version %d; acknowledged %d, attempted up to %d", when, f, v, a, at)
			}
		}
	}

	rng := rand.New(rand.NewPCG(1, 2))
	var slowest time.Duration
	for iter := range faultRounds {
		r0 := time.Now()
		var wg sync.WaitGroup
		for f := range faultFiles {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 3 {
					mu.Lock()
					attempted[f]++
					v := attempted[f]
					nput++
					mu.Unlock()
					data := versionData(f, v)
					var r io.Reader = bytes.NewReader(data)
					if v%5 == 0 {
						// Now and then a reader that cannot seek back: a
						// put cut short is then reported, not repeated.
						r = io.MultiReader(r)
					}
					rep := <-tr.Put(ctx, fmt.Sprintf("/f%d", f), zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, r)
					mu.Lock()
					if rep.Err == nil {
						acked[f] = v
						nok++
					} else {
						nunknown++
						if nunknown <= 5 {
							t.Logf("put f%d v%d: %v", f, v, rep.Err)
						}
					}
					mu.Unlock()
				}
			}()
		}
		wg.Add(1)
		go func() {
			// Reads meanwhile: whatever comes back is one whole version.
			defer wg.Done()
			for i := range 6 {
				f := (iter + i) % faultFiles
				b, err := zx.ReadFile(ctx, tr, fmt.Sprintf("/f%d", f))
				mu.Lock()
				nget++
				mu.Unlock()
				if err != nil {
					continue // not there yet, or changed under a resumed get
				}
				if _, err := whichVersion(f, b); err != nil {
					t.Errorf("get f%d: %v", f, err)
				}
				mu.Lock()
				ngetok++
				mu.Unlock()
			}
		}()
		// Kill the server in the middle of the writes, and restart it.
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		srv.kill()
		check(fmt.Sprintf("round %d, server down", iter))
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		srv.start()
		wg.Wait()
		slowest = max(slowest, time.Since(r0))
		check(fmt.Sprintf("round %d", iter))
	}
	// Temporaries of puts cut by SIGKILL may remain; they are hidden and
	// never a file's content.
	var temps int
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), lfs.TempPrefix) {
			temps++
		}
	}
	t.Logf("%d rounds (the slowest %v), each with a SIGKILL and restart of zx serve and connections cut at random: %d puts (%d acknowledged, %d failed or of unknown outcome), %d gets (%d whole), %d reconnections, %d temporaries left by kills",
		faultRounds, slowest.Round(time.Millisecond), nput, nok, nunknown, nget, ngetok, c.Reconnects(), temps)
	if nok == 0 || ngetok == 0 {
		t.Errorf("nothing got through: %d puts and %d gets acknowledged", nok, ngetok)
	}
	if c.Reconnects() < faultRounds {
		t.Errorf("%d reconnections for %d server restarts", c.Reconnects(), faultRounds)
	}
}

func TestSSHReconnect(t *testing.T) {
	// An ssh:// connection with reconnection runs ssh again when the remote
	// server dies. The "ssh" here is a script that runs the remote command
	// on this host and notes the server's pid, so the test can kill it.
	ctx := context.Background()
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "export")
	if err := os.Mkdir(dir, 0755); err != nil {
		t.Fatal(err)
	}
	pids := filepath.Join(tmp, "pids")
	script := filepath.Join(tmp, "fake-ssh")
	body := "#!/bin/sh\n# fake ssh: run the remote command (the last argument) here\nfor last; do :; done\necho $$ >> " + pids + "\nexec sh -c \"exec $last\"\n"
	if err := os.WriteFile(script, []byte(body), 0755); err != nil {
		t.Fatal(err)
	}
	loc, err := client.ParseLocation("ssh://localhost" + dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.DialSSH(ctx, loc.SSH, client.SSHOptions{Command: []string{script}, RemoteZX: zxBin},
		client.Options{Reconnect: true, ReconnectWait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tr := c.Tree("")
	if _, err := zx.WriteFile(ctx, tr, "/f", nil, []byte("over ssh")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	if pid <= 0 {
		t.Fatalf("no server pid in %q", b)
	}
	syscall.Kill(pid, syscall.SIGKILL)
	got, err := zx.ReadFile(ctx, tr, "/f")
	if err != nil || string(got) != "over ssh" {
		t.Fatalf("after the remote server died: %q, %v", got, err)
	}
	if n := c.Reconnects(); n != 1 {
		t.Errorf("%d reconnections, want 1", n)
	}
}
