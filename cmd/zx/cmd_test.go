package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestUsage(t *testing.T) {
	r := runZX(t, "").want(t, 2, "zx with no arguments")
	for _, c := range commands() {
		if !strings.Contains(r.stderr, c.name) {
			t.Errorf("usage does not list %s", c.name)
		}
	}
	runZX(t, "", "frobnicate").want(t, 2, "unknown command")
	// The benchmarks left zx: old notes that say zx bench learn where
	// they went, and the harness is not linked in (TestNoBenchInZX).
	for _, args := range [][]string{{"bench", "--fuse"}, {"help", "bench"}} {
		r := runZX(t, "", args...).want(t, 2, "zx "+strings.Join(args, " "))
		if !strings.Contains(r.stderr, "go run ./bench/zxbench") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("zx %s said %q, want one line naming go run ./bench/zxbench", strings.Join(args, " "), r.stderr)
		}
	}
	if strings.Contains(r.stderr, "bench") {
		t.Errorf("the list of commands names bench:\n%s", r.stderr)
	}
	// A long flag is named as the help writes it, with two dashes.
	if r := runZX(t, "", "ls", "-bogus", "zx://127.0.0.1/").want(t, 2, "unknown flag"); !strings.Contains(r.stderr, "not defined: --bogus") {
		t.Errorf("zx ls -bogus said %q", r.stderr)
	}
	// A flag value that does not parse says what form it wants.
	if r := runZX(t, "", "ls", "--timeout", "soon", "zx://127.0.0.1/").want(t, 2, "bad duration"); !strings.Contains(r.stderr, `invalid value "soon" for flag --timeout: parse error (want a duration such as`) {
		t.Errorf("zx ls --timeout soon said %q", r.stderr)
	}
	runZX(t, "", "help").want(t, 0, "zx help")
	for _, c := range commands() {
		for _, h := range []string{"--help", "-h"} {
			r := runZX(t, "", c.name, h).want(t, 0, "zx "+c.name+" "+h)
			if !strings.HasPrefix(r.stdout, "usage: zx "+c.name) || !strings.Contains(r.stdout, "Example:") || !strings.Contains(r.stdout, "\nExit status: ") {
				t.Errorf("zx %s %s printed:\n%s", c.name, h, r.stdout)
			}
		}
		if r := runZX(t, "", "help", c.name).want(t, 0, "zx help "+c.name); !strings.HasPrefix(r.stdout, "usage: zx "+c.name) {
			t.Errorf("zx help %s printed:\n%s", c.name, r.stdout)
		}
	}
	for _, args := range [][]string{
		{"ls", "--bogus", "zx://127.0.0.1/"},
		{"ls"},
		{"ls", "/not/a/location"},
		{"find", "zx://127.0.0.1/", "(unbalanced"},
		{"mv", "zx://127.0.0.1/a"},
		{"wstat", "zx://127.0.0.1/a", "novalue"},
		{"wstat", "zx://127.0.0.1/a", "mode=rw"},
		{"wstat", "zx://127.0.0.1/a", "mtime=yesterday"},
		{"wstat", "zx://127.0.0.1/a", "size=-1"},
		{"put", "--mode", "999", "zx://127.0.0.1/a"},
		{"lag", "--listen", "127.0.0.1:0"},
		{"ping", "-c", "0", "zx://127.0.0.1"},
		{"grep", "x"},
		{"serve", "--log-level", "loud"},
	} {
		r := runZX(t, "", args...).want(t, 2, "zx "+strings.Join(args, " "))
		if !strings.HasPrefix(r.stderr, "zx "+args[0]+": ") {
			t.Errorf("zx %s: stderr %q does not start with \"zx %s: \"", strings.Join(args, " "), r.stderr, args[0])
		}
	}
	if r := runZX(t, "", "version").want(t, 0, "zx version"); !strings.HasPrefix(r.stdout, "zx ") {
		t.Errorf("zx version printed %q", r.stdout)
	}
}

func TestServeRefusesNonLoopback(t *testing.T) {
	// No authorized keys file (the test's configuration directory is
	// empty): a server beyond loopback must not start.
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		r := runZX(t, "", "serve", "--listen", addr, t.TempDir()).want(t, 1, "serve --listen "+addr)
		for _, want := range []string{"refusing to listen on " + addr + " without an authorized keys file", "zx keygen", "--authorized FILE", "docs/security.md"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("serve --listen %s does not say %q: %s", addr, want, r.stderr)
			}
		}
	}
	r := runZX(t, "", "serve", "--listen", "0.0.0.0:0", "--authorized", filepath.Join(t.TempDir(), "nothing"), t.TempDir()).want(t, 1, "serve with a missing --authorized")
	if !strings.Contains(r.stderr, "without an authorized keys file") {
		t.Errorf("serve with a missing --authorized: %s", r.stderr)
	}
	r = runZX(t, "", "lag", "--listen", "0.0.0.0:0", "--to", "127.0.0.1:1").want(t, 1, "lag on 0.0.0.0")
	if !strings.Contains(r.stderr, "loopback only") {
		t.Errorf("lag --listen 0.0.0.0:0: %s", r.stderr)
	}
}

func TestConnectionRefused(t *testing.T) {
	r := runZX(t, "", "ls", "zx://127.0.0.1:1/").want(t, 1, "ls of a server that is not running")
	if !strings.Contains(r.stderr, "is `zx serve` running at 127.0.0.1:1?") {
		t.Errorf("stderr: %s", r.stderr)
	}
}

func TestCommands(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "src/main.go"), []byte("package main\n\nfunc main() {\n\tprintln(\"Hello\")\n}\n"))
	writeFile(t, filepath.Join(dir, "src/util.go"), []byte("package main\n// nothing to see\n"))
	writeFile(t, filepath.Join(dir, "src/blob.bin"), append([]byte("func main\x00"), randomBytes(100, 1)...))
	writeFile(t, filepath.Join(dir, "src/a.o"), []byte("obj"))
	writeFile(t, filepath.Join(dir, "src/sub/b.o"), []byte("obj"))
	writeFile(t, filepath.Join(dir, "src/sub/b.c"), []byte("int main;"))
	if err := os.Symlink("main.go", filepath.Join(dir, "src/link")); err != nil {
		t.Fatal(err)
	}
	addr := serve(t, dir)
	loc := func(p string) string { return "zx://" + addr + p }
	local := t.TempDir()

	t.Run("put-get-file", func(t *testing.T) {
		data := randomBytes(3<<20+17, 2)
		runZX(t, string(data), "put", "--mode", "0640", loc("/big.dat")).want(t, 0, "put from stdin")
		got := runZX(t, "", "get", loc("/big.dat")).want(t, 0, "get to stdout")
		if !bytes.Equal([]byte(got.stdout), data) {
			t.Fatalf("get returned %d bytes, want the %d put", len(got.stdout), len(data))
		}
		// -o: mode and mtime kept.
		mt := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
		runZX(t, "", "wstat", loc("/big.dat"), "mtime="+mt.Format(time.RFC3339)).want(t, 0, "wstat mtime")
		out := filepath.Join(local, "big.dat")
		runZX(t, "", "get", "-o", out, loc("/big.dat")).want(t, 0, "get -o")
		missing := filepath.Join(local, "missing", "big.dat")
		if r := runZX(t, "", "get", "-o", missing, loc("/big.dat")).want(t, 1, "get -o into a missing directory"); !strings.Contains(r.stderr, "cannot write "+missing+": ") || strings.Contains(r.stderr, ".zx-get") {
			t.Errorf("get -o into a missing directory said %q", r.stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("get -o: %v, %d bytes", err, len(b))
		}
		fi, _ := os.Stat(out)
		if fi.Mode().Perm() != 0o640 || !fi.ModTime().Equal(mt) {
			t.Errorf("get -o: mode %v mtime %v, want 0640 %v", fi.Mode().Perm(), fi.ModTime(), mt)
		}
		// A local file, with its mode and mtime, into a directory.
		src := filepath.Join(local, "note.txt")
		writeFile(t, src, []byte("a note\n"))
		os.Chmod(src, 0o600)
		os.Chtimes(src, mt, mt)
		runZX(t, "", "put", src, loc("/src/")).want(t, 0, "put FILE into a directory")
		var d map[string]string
		r := runZX(t, "", "stat", "--json", loc("/src/note.txt")).want(t, 0, "stat --json")
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil {
			t.Fatalf("stat --json: %v: %q", err, r.stdout)
		}
		if d["mode"] != "0600" || d["size"] != "7" || d["mtime"] != fmt.Sprint(mt.UnixNano()) || d["type"] != "-" {
			t.Errorf("stat after put: %v", d)
		}
		runZX(t, "", "get", loc("/src")).want(t, 1, "get of a directory without -r")
		runZX(t, "", "get", loc("/nope")).want(t, 1, "get of a missing file")
	})

	t.Run("put-get-tree", func(t *testing.T) {
		tree := filepath.Join(local, "tree")
		for i := range 20 {
			writeFile(t, filepath.Join(tree, fmt.Sprintf("d%d/f%d.txt", i%4, i)), randomBytes(i*997, uint64(i)))
		}
		writeFile(t, filepath.Join(tree, "top.sh"), []byte("#!/bin/sh\n"))
		os.Chmod(filepath.Join(tree, "top.sh"), 0o755)
		os.MkdirAll(filepath.Join(tree, "empty"), 0o755)
		os.Symlink("d0/f0.txt", filepath.Join(tree, "ln"))
		runZX(t, "", "put", "-r", tree, loc("/tree")).want(t, 0, "put -r")
		sameTree(t, tree, filepath.Join(dir, "tree"))
		back := filepath.Join(local, "back")
		runZX(t, "", "get", "-r", "-o", back, loc("/tree")).want(t, 0, "get -r")
		sameTree(t, tree, back)
		runZX(t, "", "put", "-r", filepath.Join(tree, "top.sh"), loc("/x")).want(t, 2, "put -r of a file")
	})

	t.Run("ls", func(t *testing.T) {
		r := runZX(t, "", "ls", loc("/src")).want(t, 0, "ls")
		want := "a.o\nblob.bin\nlink\nmain.go\nnote.txt\nsub\nutil.go\n"
		if r.stdout != want {
			t.Errorf("ls: %q, want %q", r.stdout, want)
		}
		r = runZX(t, "", "ls", "-l", loc("/src")).want(t, 0, "ls -l")
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		if len(lines) != 7 || !strings.HasPrefix(lines[2], "lrwxrwxrwx ") || !strings.HasSuffix(lines[2], " link -> main.go") ||
			!strings.HasPrefix(lines[5], "drwx") || !strings.HasPrefix(lines[4], "-rw-------") {
			t.Errorf("ls -l:\n%s", r.stdout)
		}
		r = runZX(t, "", "ls", "-d", loc("/src")).want(t, 0, "ls -d")
		if r.stdout != "/src\n" {
			t.Errorf("ls -d: %q", r.stdout)
		}
		r = runZX(t, "", "ls", "--json", loc("/src/sub")).want(t, 0, "ls --json")
		var names []string
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			var d map[string]string
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				t.Fatalf("ls --json line %q: %v", line, err)
			}
			names = append(names, d["name"])
		}
		if !slices.Equal(names, []string{"b.c", "b.o"}) {
			t.Errorf("ls --json names: %v", names)
		}
		runZX(t, "", "ls", loc("/nope")).want(t, 1, "ls of a missing path")
	})

	t.Run("find", func(t *testing.T) {
		r := runZX(t, "", "find", loc("/src"), "- & ~*.o").want(t, 0, "find")
		if r.stdout != "/src/a.o\n/src/sub/b.o\n" {
			t.Errorf("find: %q", r.stdout)
		}
		// Flags after operands; NDJSON.
		r = runZX(t, "", "find", loc("/src"), "d", "--json").want(t, 0, "find --json")
		if n := strings.Count(r.stdout, `"type":"d"`); n != 2 {
			t.Errorf("find d --json: %d directories in %s", n, r.stdout)
		}
		runZX(t, "", "find", loc("/nope")).want(t, 1, "find of a missing path")
	})

	t.Run("grep", func(t *testing.T) {
		r := runZX(t, "", "grep", "-n", "func main", loc("/src")).want(t, 0, "grep")
		if r.stdout != "/src/main.go:3:func main() {\n" {
			t.Errorf("grep -n: %q (the binary file must be skipped)", r.stdout)
		}
		r = runZX(t, "", "grep", "-i", "-l", "HELLO|nothing", loc("/"), "~*.go").want(t, 0, "grep -il")
		if r.stdout != "/src/main.go\n/src/util.go\n" {
			t.Errorf("grep -il: %q", r.stdout)
		}
		r = runZX(t, "", "grep", "-c", "main", loc("/src/sub")).want(t, 0, "grep -c")
		if r.stdout != "/src/sub/b.c:1\n/src/sub/b.o:0\n" {
			t.Errorf("grep -c: %q", r.stdout)
		}
		runZX(t, "", "grep", "no such text anywhere", loc("/")).want(t, 1, "grep without a match")
		r = runZX(t, "", "grep", "(", loc("/")).want(t, 2, "grep with a bad regexp")
		if !strings.Contains(r.stderr, "bad regular expression") {
			t.Errorf("grep (: %s", r.stderr)
		}
		runZX(t, "", "grep", "x", loc("/nope")).want(t, 2, "grep of a missing path")
	})

	t.Run("wstat", func(t *testing.T) {
		r := runZX(t, "", "wstat", loc("/src/util.go"), "mode=0600", "colour=blue").want(t, 0, "wstat")
		if !strings.Contains(r.stdout, "mode=0600") || !strings.Contains(r.stdout, "colour=blue") {
			t.Errorf("wstat printed %q", r.stdout)
		}
		r = runZX(t, "", "wstat", "--json", loc("/src/util.go"), "colour=").want(t, 0, "wstat deleting an attribute")
		var d map[string]string
		if err := json.Unmarshal([]byte(r.stdout), &d); err != nil || d["colour"] != "" || d["mode"] != "0600" {
			t.Errorf("wstat --json: %v %v", d, err)
		}
	})

	t.Run("mv", func(t *testing.T) {
		runZX(t, "", "mv", loc("/src/util.go"), "helpers.go").want(t, 0, "mv relative")
		runZX(t, "", "mv", loc("/src/helpers.go"), loc("/src/sub/helpers.go")).want(t, 0, "mv to a location")
		if _, err := os.Stat(filepath.Join(dir, "src/sub/helpers.go")); err != nil {
			t.Errorf("after mv: %v", err)
		}
		runZX(t, "", "mv", loc("/src/nope"), "x").want(t, 1, "mv of a missing file")
		runZX(t, "", "mv", loc("/src/a.o"), "zx://127.0.0.2:1/x").want(t, 2, "mv across servers")
	})

	t.Run("rm", func(t *testing.T) {
		r := runZX(t, "", "rm", "--find", "~*.o", loc("/src")).want(t, 0, "rm --find")
		if _, err := os.Stat(filepath.Join(dir, "src/a.o")); !os.IsNotExist(err) {
			t.Errorf("a.o still there: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "src/sub/b.o")); !os.IsNotExist(err) {
			t.Errorf("b.o still there: %v", err)
		}
		for _, f := range []string{"src/main.go", "src/sub/b.c", "src/blob.bin"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("rm --find removed %s: %v (stderr %s)", f, err, r.stderr)
			}
		}
		runZX(t, "", "rm", loc("/big.dat"), loc("/src/blob.bin")).want(t, 0, "rm two files")
		runZX(t, "", "rm", loc("/big.dat")).want(t, 1, "rm of a missing file")
		runZX(t, "", "rm", "-f", loc("/big.dat")).want(t, 0, "rm -f of a missing file")
		r = runZX(t, "", "rm", loc("/src/sub")).want(t, 1, "rm of a non-empty directory")
		if !strings.Contains(r.stderr, "directory not empty (zx rm -r removes") {
			t.Errorf("rm of a non-empty directory said %q", r.stderr)
		}
		runZX(t, "", "rm", "-r", loc("/src/sub")).want(t, 0, "rm -r")
		if _, err := os.Stat(filepath.Join(dir, "src/sub")); !os.IsNotExist(err) {
			t.Errorf("rm -r left src/sub: %v", err)
		}
		runZX(t, "", "rm", "-r", loc("/")).want(t, 2, "rm -r of the root")
	})

	t.Run("ping", func(t *testing.T) {
		r := runZX(t, "", "ping", "-c", "2", loc("")).want(t, 0, "ping")
		if strings.Count(r.stdout, "seq=") != 2 || !strings.Contains(r.stdout, "min/avg/max") {
			t.Errorf("ping: %q", r.stdout)
		}
	})

	t.Run("read-only", func(t *testing.T) {
		ro := serve(t, dir, "--ro", "--tree", "other="+local)
		runZX(t, "x", "put", "zx://"+ro+"/x").want(t, 1, "put to a read-only tree")
		r := runZX(t, "", "ls", "zx://"+ro+"/@other/tree").want(t, 0, "ls of a named tree")
		if !strings.Contains(r.stdout, "top.sh") {
			t.Errorf("ls of @other/tree: %q", r.stdout)
		}
	})
}

// TestRoundTrips checks, through 50 ms of emulated latency, that the
// commands built on one request wait for a constant number of round
// trips, however many files they touch.
func TestRoundTrips(t *testing.T) {
	dir := t.TempDir()
	for d := range 100 {
		for f := range 30 {
			name := fmt.Sprintf("f%02d.txt", f)
			if f%3 == 0 {
				name = fmt.Sprintf("f%02d.o", f)
			}
			writeFile(t, filepath.Join(dir, fmt.Sprintf("tree/d%02d", d), name), []byte(name))
		}
	}
	addr := lag(t, serve(t, dir), 50*time.Millisecond)

	t0 := time.Now()
	r := runZX(t, "", "find", "zx://"+addr+"/tree", "--stats", "--json").want(t, 0, "find")
	lines := strings.Count(r.stdout, "\n")
	st := statsOf(t, r)
	t.Logf("find of %d entries: %d round trips, %s in, %v", lines, st.RoundTrips, fmtBytes(st.BytesIn), time.Since(t0))
	if lines != 1+100+3000 {
		t.Errorf("find printed %d entries, want 3101", lines)
	}
	if st.RoundTrips > 2 {
		t.Errorf("find: %d round trips, want at most 2", st.RoundTrips)
	}

	t0 = time.Now()
	r = runZX(t, "", "rm", "--find", "~*.o", "zx://"+addr+"/tree", "--stats", "--json").want(t, 0, "rm --find")
	st = statsOf(t, r)
	t.Logf("rm --find of 1000 files: %d round trips, %v", st.RoundTrips, time.Since(t0))
	if st.RoundTrips > 3 {
		t.Errorf("rm --find: %d round trips, want at most 3", st.RoundTrips)
	}
	if n := strings.Count(r.stdout, `"removed":true`); n != 1000 {
		t.Errorf("rm --find removed %d entries, want 1000", n)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "tree/*/*"))
	if len(left) != 2000 {
		t.Errorf("%d files left, want 2000", len(left))
	}

	src := t.TempDir()
	for i := range 500 {
		writeFile(t, filepath.Join(src, fmt.Sprintf("p%d/f%03d", i%10, i)), randomBytes(100+i, uint64(i)))
	}
	t0 = time.Now()
	r = runZX(t, "", "put", "-r", "--stats", "--json", src, "zx://"+addr+"/put").want(t, 0, "put -r")
	st = statsOf(t, r)
	t.Logf("put -r of 500 files: %d round trips, %s out, %v", st.RoundTrips, fmtBytes(st.BytesOut), time.Since(t0))
	if st.RoundTrips > 3 {
		t.Errorf("put -r: %d round trips, want at most 3", st.RoundTrips)
	}
	sameTree(t, src, filepath.Join(dir, "put"))

	t0 = time.Now()
	back := filepath.Join(t.TempDir(), "back")
	r = runZX(t, "", "get", "-r", "--stats", "--json", "-o", back, "zx://"+addr+"/put").want(t, 0, "get -r")
	st = statsOf(t, r)
	t.Logf("get -r of 500 files: %d round trips, %s in, %v", st.RoundTrips, fmtBytes(st.BytesIn), time.Since(t0))
	// One FindGet (three if the server's tree could not FindGet and get
	// fell back to Find plus pipelined Gets).
	if st.RoundTrips > 2 {
		t.Errorf("get -r: %d round trips, want at most 2", st.RoundTrips)
	}
	sameTree(t, src, back)

	t0 = time.Now()
	r = runZX(t, "", "grep", "--stats", "--json", "absent text", "zx://"+addr+"/").want(t, 1, "grep without a match")
	st = statsOf(t, r)
	t.Logf("grep of 2500 files: %d round trips, %v", st.RoundTrips, time.Since(t0))
	if st.RoundTrips > 2 {
		t.Errorf("grep: %d round trips, want at most 2", st.RoundTrips)
	}

	r = runZX(t, "", "ls", "--stats", "--json", "zx://"+addr+"/tree").want(t, 0, "ls")
	if st := statsOf(t, r); st.RoundTrips != 1 {
		t.Errorf("ls: %d round trips, want 1", st.RoundTrips)
	}
}

func TestDemo(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a/x.go"), []byte("package a\n"))
	writeFile(t, filepath.Join(dir, "b.go"), []byte("package b\n"))
	writeFile(t, filepath.Join(dir, "README"), []byte("hi\n"))
	r := runZX(t, "", "demo", "--once", "--rtt", "20ms", dir).want(t, 0, "demo --once")
	for _, want := range []string{"2 Go files", "no match in 2 files", "README", "rtt "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	t.Logf("demo:\n%s", r.stdout)
}

// TestNoBenchInZX checks that the zx binary users install does not carry
// the benchmark harness or its plotting library (bench/zxbench runs them).
func TestNoBenchInZX(t *testing.T) {
	out, err := exec.Command("go", "version", "-m", zxBin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	if !strings.Contains(string(out), "github.com/hanwen/go-fuse/v2") {
		t.Fatalf("go version -m lists no dependencies:\n%s", out)
	}
	if strings.Contains(string(out), "gonum.org/v1/plot") {
		t.Errorf("zx links gonum.org/v1/plot:\n%s", out)
	}
	deps, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(deps)) {
		if p == "github.com/zxfs/zx/bench" || strings.HasPrefix(p, "github.com/zxfs/zx/bench/") {
			t.Errorf("zx imports %s", p)
		}
	}
}
