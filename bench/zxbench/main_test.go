package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bin is the command under test, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "zxbench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	bin = filepath.Join(dir, "zxbench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building zxbench: %v: %s", err, out)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// zxbench runs the command with args, returning its exit status, stdout
// and stderr.
func zxbench(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, bin, args...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	err := c.Run()
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok || ctx.Err() != nil {
			t.Fatalf("zxbench %s: %v (stderr: %s)", strings.Join(args, " "), err, stderr.String())
		}
		code = ee.ExitCode()
	}
	return code, stdout.String(), stderr.String()
}

// TestLoopback runs `zxbench --loopback` on a small tree: the rates come
// from a `zx serve` process of their own, built by zxbench from this
// source tree, one find rate per run.
func TestLoopback(t *testing.T) {
	tree := t.TempDir()
	for i := range 20 {
		d := filepath.Join(tree, fmt.Sprintf("d%02d", i))
		if err := os.Mkdir(d, 0755); err != nil {
			t.Fatal(err)
		}
		for j := range 10 {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.go", j)), []byte("package p\n"), 0644); err != nil {
				t.Fatal(err)
			}
		}
	}
	code, stdout, stderr := zxbench(t, "--loopback", "-q", "--tree", tree)
	if code != 0 {
		t.Fatalf("zxbench --loopback: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "server: `zx serve`, a process of its own") {
		t.Fatalf("the rates did not come from a zx serve process:\n%s", stdout)
	}
	m := regexp.MustCompile(`(?m)^find: ([0-9, ]+) entries/s \(median ([0-9]+), best ([0-9]+)\)$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("no find rates in:\n%s", stdout)
	}
	rates := strings.Split(m[1], ", ")
	if len(rates) != 11 {
		t.Fatalf("%d find rates, want 11: %s", len(rates), m[1])
	}
	for _, s := range append(rates, m[2], m[3]) {
		if v, err := strconv.ParseFloat(s, 64); err != nil || v <= 0 {
			t.Fatalf("find rate %q in:\n%s", s, stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^findget \(FindGet\): [0-9]+, [0-9]+, [0-9]+ MB/s`).MatchString(stdout) {
		t.Fatalf("no findget rates in:\n%s", stdout)
	}
}

// TestUsage checks the command's help and its answers to bad usage.
func TestUsage(t *testing.T) {
	code, stdout, _ := zxbench(t, "--help")
	if code != 0 || !strings.HasPrefix(stdout, "usage: go run ./bench/zxbench [--fuse] [flags]") ||
		!strings.Contains(stdout, "\nExit status: ") || !strings.Contains(stdout, "  --zx PATH\n") {
		t.Errorf("zxbench --help: exit %d, printed:\n%s", code, stdout)
	}
	for _, args := range [][]string{
		{"--bogus"},
		{"extra"},
		{"--rtts", "soon"},
		{"--fuse", "--workloads", "frobnicate"},
		{"--zx", "/nonexistent/zx", "--loopback"},
	} {
		code, _, stderr := zxbench(t, args...)
		if code != 2 || !strings.HasPrefix(stderr, "zxbench: ") && !strings.Contains(stderr, "not defined") {
			t.Errorf("zxbench %s: exit %d, want 2; stderr %q", strings.Join(args, " "), code, stderr)
		}
	}
}
