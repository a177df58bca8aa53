package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// zxBin is the zx binary under test, built once by TestMain.
var zxBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "zx-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	zxBin = filepath.Join(dir, "zx")
	// Keys, pinned servers and server state go to a directory of the
	// test's own, never the user's.
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	build := exec.Command("go", "build", "-o", zxBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building zx:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	// So do mounts' default cache directories and journals: one left
	// in the user's would be replayed into a later mount whose address
	// reuses the port. Go's build cache stays where it was, for the go
	// commands the tests run.
	if os.Getenv("GOCACHE") == "" {
		if ucd, err := os.UserCacheDir(); err == nil {
			os.Setenv("GOCACHE", filepath.Join(ucd, "go-build"))
		}
	}
	os.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is the outcome of one zx run.
type result struct {
	stdout, stderr string
	code           int
}

// runZX runs the binary with args and stdin, and waits for it.
func runZX(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, zxBin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok || ctx.Err() != nil {
			t.Fatalf("zx %s: %v (stderr: %s)", strings.Join(args, " "), err, errb.String())
		}
		code = ee.ExitCode()
	}
	return result{out.String(), errb.String(), code}
}

// want checks a run's exit code.
func (r result) want(t *testing.T, code int, what string) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", what, r.code, code, r.stdout, r.stderr)
	}
	return r
}

// start runs a long-lived zx process (serve, lag) and returns the address
// in the first stderr line that matches re. The process is stopped when
// the test ends, whatever happens.
func start(t *testing.T, re *regexp.Regexp, args ...string) string {
	t.Helper()
	addr, _ := startLog(t, re, args...)
	return addr
}

// startLog is start, and also returns a function that returns what the
// process has printed on stderr so far.
func startLog(t *testing.T, re *regexp.Regexp, args ...string) (string, func() string) {
	t.Helper()
	addr, log, _ := startProc(t, re, args...)
	return addr, log
}

// startProc is startLog, and also returns the process's id.
func startProc(t *testing.T, re *regexp.Regexp, args ...string) (string, func() string, int) {
	t.Helper()
	cmd := exec.Command(zxBin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	addr := make(chan string, 1)
	var mu sync.Mutex
	var logb strings.Builder
	log := func() string {
		mu.Lock()
		defer mu.Unlock()
		return logb.String()
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		found := false
		for sc.Scan() {
			mu.Lock()
			if logb.Len() < 1<<20 {
				logb.WriteString(sc.Text() + "\n")
			}
			mu.Unlock()
			if m := re.FindStringSubmatch(sc.Text()); m != nil && !found {
				found = true
				addr <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
		cmd.Wait()
		close(exited)
	}()
	select {
	case a := <-addr:
		return a, log, cmd.Process.Pid
	case <-exited:
		t.Fatalf("zx %s exited before it was ready: %s", strings.Join(args, " "), log())
	case <-time.After(10 * time.Second):
		t.Fatalf("zx %s: not ready after 10s", strings.Join(args, " "))
	}
	return "", log, 0
}

var (
	serveRe = regexp.MustCompile(`^zx: serving .* at zx://(\S+)/$`)
	lagRe   = regexp.MustCompile(`^zx lag: (\S+) -> `)
)

// serve starts zx serve over dir and returns its address.
func serve(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return start(t, serveRe, append(append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), dir)...)
}

// lag starts zx lag with rtt in front of target and returns its address.
func lag(t *testing.T, target string, rtt time.Duration) string {
	t.Helper()
	return start(t, lagRe, "lag", "--listen", "127.0.0.1:0", "--to", target, "--rtt", rtt.String())
}

// statsOf returns the --stats --json figures printed on stderr.
func statsOf(t *testing.T, r result) connStats {
	t.Helper()
	for _, line := range strings.Split(r.stderr, "\n") {
		if strings.HasPrefix(line, `{"stats":`) {
			var v struct{ Stats connStats }
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("bad stats line %q: %v", line, err)
			}
			return v.Stats
		}
	}
	t.Fatalf("no stats in stderr: %s", r.stderr)
	return connStats{}
}

func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// sameTree fails unless the trees at a and b hold the same directories,
// files (bytes and permissions) and symbolic links.
func sameTree(t *testing.T, a, b string) {
	t.Helper()
	snap := func(root string) map[string]string {
		m := map[string]string{}
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := filepath.Rel(root, p)
			fi, _ := d.Info()
			switch {
			case d.Type()&fs.ModeSymlink != 0:
				target, _ := os.Readlink(p)
				m[rel] = "link " + target
			case d.IsDir():
				m[rel] = "dir"
			default:
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				m[rel] = fmt.Sprintf("file %v %q", fi.Mode().Perm(), data)
			}
			return nil
		})
		return m
	}
	ma, mb := snap(a), snap(b)
	for k, v := range ma {
		if mb[k] != v {
			t.Errorf("%s: %.60s in %s, %.60s in %s", k, v, a, mb[k], b)
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			t.Errorf("%s: only in %s", k, b)
		}
	}
}
