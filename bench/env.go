package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zxfs/zx/bench/internal/testbed"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/server"
	"github.com/zxfs/zx/sshd"

	zxmount "github.com/zxfs/zx/mount"
)

// env holds what a run set up, and undoes it: cleanup functions run in
// reverse order, each once, whether the run ends normally, fails, panics or
// is interrupted.
type env struct {
	mu       sync.Mutex
	cleanups []func()
	sshSrv   *sshd.Server // the last sshd started
}

func newEnv() *env { return &env{} }

func (e *env) onCleanup(f func()) {
	e.mu.Lock()
	e.cleanups = append(e.cleanups, f)
	e.mu.Unlock()
}

func (e *env) cleanup() {
	for {
		e.mu.Lock()
		n := len(e.cleanups)
		if n == 0 {
			e.mu.Unlock()
			return
		}
		f := e.cleanups[n-1]
		e.cleanups = e.cleanups[:n-1]
		e.mu.Unlock()
		func() {
			defer func() { recover() }()
			f()
		}()
	}
}

// procAttr starts a child in its own process group, killed if we die.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// stopCmd ends a started command: SIGTERM, then SIGKILL to it and its
// descendants, and reaps it.
func stopCmd(c *exec.Cmd, done <-chan struct{}) {
	if c.Process == nil {
		return
	}
	c.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(3 * time.Second):
	}
	sshd.KillTree(c.Process.Pid)
	select {
	case <-done:
	case <-time.After(3 * time.Second):
	}
}

// start starts a long-running command, to be stopped at cleanup; done is
// closed when it exits, and its stderr is kept in errBuf.
func (e *env) start(name string, args ...string) (c *exec.Cmd, done chan struct{}, errBuf *syncBuf, err error) {
	c = exec.Command(name, args...)
	c.SysProcAttr = procAttr()
	errBuf = &syncBuf{}
	c.Stderr = errBuf
	c.Stdout = errBuf
	if err := c.Start(); err != nil {
		return nil, nil, nil, err
	}
	done = make(chan struct{})
	go func() { c.Wait(); close(done) }()
	e.onCleanup(func() { stopCmd(c, done) })
	return c, done, errBuf, nil
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<16 {
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.TrimSpace(s.b.String())
}

// scratch makes the temporary directory and the copy of the tree:
//
//	DIR/export       the exported directory (zx tree root, sshfs DIR)
//	DIR/export/tree  the copy of the source tree
//	DIR/mnt          the sshfs mount point
//	DIR/ssh          keys and sshd config
func (e *env) scratch(cfg *Config) (dir string, err error) {
	dir, err = os.MkdirTemp("", "zxbench-")
	if err != nil {
		return "", err
	}
	e.onCleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{"export", "mnt", "ssh"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			return "", err
		}
	}
	src, err := filepath.Abs(cfg.Tree)
	if err != nil {
		return "", err
	}
	if out, err := exec.Command("cp", "-a", src, filepath.Join(dir, "export", "tree")).CombinedOutput(); err != nil {
		return "", fmt.Errorf("copying %s: %v: %s", src, err, out)
	}
	return dir, nil
}

// zxServer serves dir with lfs on loopback and returns its address, and
// whether lfs runs find and findget itself.
func (e *env) zxServer(dir string) (string, bool, error) {
	s, err := testbed.Serve(dir, lfs.Options{}, server.Config{})
	if err != nil {
		return "", false, err
	}
	e.onCleanup(func() { s.Close() })
	return s.Addr, s.Finder, nil
}

// serveChild starts cmd (`zx serve`) on a free loopback port, exporting
// dir read-only, and returns its address, its process id and a function
// that stops it.
func serveChild(ctx context.Context, cmd []string, dir string) (addr string, pid int, stop func(), err error) {
	args := append(slices.Clone(cmd[1:]), "--listen", "127.0.0.1:0", "--ro", dir)
	c := exec.Command(cmd[0], args...)
	c.Env = os.Environ()
	// It must not outlive the benchmark, even one that is killed.
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	stderr, err := c.StderrPipe()
	if err != nil {
		return "", 0, nil, err
	}
	if err := c.Start(); err != nil {
		return "", 0, nil, fmt.Errorf("starting %s: %w", strings.Join(cmd, " "), err)
	}
	stop = func() {
		c.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			c.Process.Kill()
			<-done
		}
	}
	// It says "zx: serving DIR at zx://ADDR/" once it listens.
	found := make(chan string, 1)
	var said bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			if _, u, ok := strings.Cut(line, " at zx://"); ok && strings.HasPrefix(line, "zx: serving ") {
				found <- strings.TrimSuffix(u, "/")
				break
			}
			said.WriteString(line + "\n")
		}
		close(found)
		io.Copy(io.Discard, stderr)
	}()
	select {
	case a, ok := <-found:
		if ok {
			return a, c.Process.Pid, stop, nil
		}
		// It ended without listening; said holds what it said.
		stop()
		return "", 0, nil, fmt.Errorf("%s: %s", strings.Join(cmd, " "), strings.TrimSpace(said.String()))
	case <-time.After(30 * time.Second):
	case <-ctx.Done():
	}
	stop()
	return "", 0, nil, fmt.Errorf("%s did not say where it listens within 30 s", strings.Join(cmd, " "))
}

// procCPU returns the CPU time (user + system, all threads) that process
// pid has used so far, from /proc/PID/stat, whose counts are in the
// kernel's USER_HZ ticks: 1/100 s on Linux.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// count fields after its closing parenthesis.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// utime and stime are fields 14 and 15 of the whole line, 12 and 13
	// after the name.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime or stime", pid)
	}
	return time.Duration(ut+st) * (time.Second / 100), nil
}

// checkTools fails with a clear message when what sshfs needs is missing.
func checkTools() error {
	var missing []string
	for _, t := range []string{"/usr/sbin/sshd", "sshfs", "fusermount3", "ssh-keygen", "ssh"} {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: install with 'apt-get install -y openssh-server sshfs fuse3' (or run with --no-sshfs)",
			strings.Join(missing, ", "))
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("no /dev/fuse: sshfs needs FUSE (run as root on a machine with FUSE, or with --no-sshfs)")
	}
	return nil
}

// sshd starts a private sshd on loopback (package sshd) with its keys in
// sshDir, and returns its port and the client's private key file.
func (e *env) sshd(ctx context.Context, sshDir string) (port int, key string, err error) {
	if err := checkTools(); err != nil {
		return 0, "", err
	}
	s, err := sshd.Start(ctx, sshDir)
	if err != nil {
		return 0, "", err
	}
	e.onCleanup(func() { s.Close() })
	e.mu.Lock()
	e.sshSrv = s
	e.mu.Unlock()
	return s.Port, s.ClientKey, nil
}

// sshdAlive says whether the sshd started last still runs, and if not,
// what it logged.
func (e *env) sshdAlive() (bool, string) {
	e.mu.Lock()
	s := e.sshSrv
	e.mu.Unlock()
	if s == nil {
		return false, "no sshd started"
	}
	if err := syscall.Kill(s.Pid(), 0); err != nil {
		return false, s.Log()
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.Pid()))
	if err == nil {
		if f := strings.Fields(string(b)); len(f) > 2 && f[2] == "Z" {
			return false, s.Log()
		}
	}
	return true, ""
}

// mount is an sshfs mount.
type mount struct {
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	err  *syncBuf
}

// sshfsMount mounts remote dir (on the sshd behind proxyPort) on mnt, with
// sshfs's default caching options. sshfs runs in the foreground (-f, which
// changes nothing but who waits for it) so that it stays our child.
func (e *env) sshfsMount(ctx context.Context, proxyPort int, key, dir, mnt string) (*mount, error) {
	opts := "IdentityFile=" + key + ",StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes,LogLevel=ERROR"
	c, done, errBuf, err := e.start("sshfs", "-f", "-p", strconv.Itoa(proxyPort), "-o", opts,
		"root@127.0.0.1:"+dir, mnt)
	if err != nil {
		return nil, fmt.Errorf("starting sshfs: %v", err)
	}
	m := &mount{dir: mnt, cmd: c, done: done, err: errBuf}
	e.onCleanup(func() { m.unmount() })
	deadline := time.Now().Add(60 * time.Second)
	for !isMounted(mnt) {
		select {
		case <-done:
			return nil, fmt.Errorf("sshfs exited before mounting: %s", errBuf)
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			m.unmount()
			return nil, fmt.Errorf("sshfs did not mount %s: %s", mnt, errBuf)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The first access waits for the connection's setup to complete.
	if _, err := os.Stat(filepath.Join(mnt, "tree")); err != nil {
		m.unmount()
		return nil, fmt.Errorf("sshfs mount does not work: %v: %s", err, errBuf)
	}
	return m, nil
}

// unmount unmounts lazily and stops sshfs (and its ssh). It may be called
// more than once.
func (m *mount) unmount() {
	if m == nil || m.cmd == nil {
		return
	}
	if isMounted(m.dir) {
		exec.Command("fusermount3", "-u", "-z", m.dir).Run()
	}
	select {
	case <-m.done:
	case <-time.After(5 * time.Second):
	}
	stopCmd(m.cmd, m.done)
}

func isMounted(dir string) bool {
	_, ok := zxmount.FSType(dir)
	return ok
}

// copyTree makes a fresh copy of src at dst on the server's disk (cp -a),
// outside any timing, replacing what was at dst.
func copyTree(src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("cp -a %s %s: %v: %s", src, dst, err, out)
	}
	return nil
}

// runCmd runs a command with a time cap. It reports the wall time and
// whether the cap killed it; ok lists exit codes that are not failures.
func runCmd(ctx context.Context, capd time.Duration, ok []int, name string, args ...string) (time.Duration, bool, error) {
	cctx, cancel := context.WithTimeout(ctx, capd)
	defer cancel()
	c := exec.CommandContext(cctx, name, args...)
	c.SysProcAttr = procAttr()
	c.Cancel = func() error { sshd.KillTree(c.Process.Pid); return nil }
	c.WaitDelay = 10 * time.Second
	var errBuf syncBuf
	c.Stderr = &errBuf
	t0 := time.Now()
	err := c.Run()
	el := time.Since(t0)
	if cctx.Err() == context.DeadlineExceeded && ctx.Err() == nil {
		return el, true, nil
	}
	if ctx.Err() != nil {
		return el, false, ctx.Err()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		for _, c := range ok {
			if ee.ExitCode() == c {
				return el, false, nil
			}
		}
	}
	if err != nil {
		return el, false, fmt.Errorf("%s: %v: %s", name, err, errBuf.String())
	}
	return el, false, nil
}
