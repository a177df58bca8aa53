package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/proto"
)

func TestServeLimitFlags(t *testing.T) {
	// zx serve --max-conns 1: a second client is told why it is refused.
	dir := t.TempDir()
	writeFile(t, dir+"/f", []byte("x"))
	addr := serve(t, dir, "--max-conns", "1", "--request-rate", "0", "--idle-timeout", "0")
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := zx.Stat(ctx, c.Tree(""), "/f"); err != nil {
		t.Fatal(err)
	}
	r := runZX(t, "", "stat", "zx://"+addr+"/f").want(t, 1, "stat beyond --max-conns")
	if !strings.Contains(r.stderr, "too many connections (limit 1)") {
		t.Errorf("stderr %q does not say which limit", r.stderr)
	}
	c.Close()
	// Once the server has noticed the first client left, there is room.
	for i := 0; ; i++ {
		r := runZX(t, "", "stat", "zx://"+addr+"/f")
		if r.code == 0 {
			break
		}
		if i == 50 {
			r.want(t, 0, "stat once the first client left")
		}
		time.Sleep(20 * time.Millisecond)
	}

	for _, bad := range [][]string{
		{"--max-conns", "0"},
		{"--max-memory", "lots"},
		{"--request-rate", "-1"},
		{"--keepalive", "0"},
		{"--write-timeout", "-1s"},
	} {
		r := runZX(t, "", append([]string{"serve", "--listen", "127.0.0.1:0"}, append(bad, dir)...)...).want(t, 2, "serve "+strings.Join(bad, " "))
		if r.stderr == "" {
			t.Errorf("serve %v: no message", bad)
		}
	}
}

func TestServeMemoryBound(t *testing.T) {
	// Hostile clients, on several connections, open thousands of gets of
	// a big file they never read (they take what the server sends but
	// grant no more credit) and puts whose data never ends. zx serve's
	// resident memory stays within its --max-memory budget plus its stated
	// overhead (serverOverhead: the program, the runtime, the collector's
	// room), another client is served all along, and the memory goes back
	// once they leave. (With 1,500 of each on each of 3 connections, the
	// server went from 12 MB to 1287 MB, and kept it after they left.)
	const (
		budget   = 32 << 20
		overhead = serverOverhead
		conns    = 3
		requests = 1500 // gets, and as many puts, on each connection
	)
	dir := t.TempDir()
	big := randomBytes(8<<20, 12)
	writeFile(t, dir+"/big", big)
	writeFile(t, dir+"/small", []byte("small"))
	addr, _, pid := startProc(t, serveRe, "serve", "--listen", "127.0.0.1:0",
		"--max-memory", strconv.Itoa(budget), "--max-conn-buffer", "4MiB", dir)
	ctx := context.Background()
	other, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tr := other.Tree("")
	// The other client's requests must complete, however long they
	// take; the bound is only so that a hung one fails the test.
	served := func(what string) {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if _, err := zx.Stat(rctx, tr, "/small"); err != nil {
			t.Fatalf("%s: the other client's stat: %v", what, err)
		}
		if got, err := zx.ReadFile(rctx, tr, "/small"); err != nil || string(got) != "small" {
			t.Fatalf("%s: the other client's get: %q, %v", what, got, err)
		}
	}
	served("before")
	start := vmRSS(t, pid)

	sent := make(chan error, conns)
	var ncs []net.Conn
	defer func() {
		for _, nc := range ncs {
			nc.Close()
		}
	}()
	for i := range conns {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		ncs = append(ncs, nc)
		go io.Copy(io.Discard, nc)
		go func() { sent <- hostile(nc, i, requests) }()
	}
	for range conns {
		select {
		case err := <-sent:
			if err != nil {
				t.Fatalf("hostile client: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("hostile clients could not send their requests in 20s")
		}
	}
	peak := start
	check := func() {
		t.Helper()
		r := vmRSS(t, pid)
		peak = max(peak, r)
		if r > budget+overhead {
			t.Fatalf("server RSS %d MiB (%d MiB at start), over its %d MiB budget and %d MiB overhead",
				r>>20, start>>20, budget>>20, overhead>>20)
		}
	}
	for i := range 20 {
		check()
		served(fmt.Sprintf("while hostile clients hold their requests (%d)", i))
		if i == 10 {
			rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			got, err := zx.ReadFile(rctx, tr, "/big")
			cancel()
			if err != nil || !bytes.Equal(got, big) {
				t.Fatalf("the other client's get of the big file: %d bytes, %v", len(got), err)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	check()
	t.Logf("server RSS: %d MiB at start, peak %d MiB with %d hostile connections of %d requests each (budget %d MiB + overhead %d MiB)",
		start>>20, peak>>20, conns, 2*requests, budget>>20, overhead>>20)

	// Once they leave, the memory goes back, bar what the runtime keeps
	// for itself (the heap's pages of the sizes still in use, stacks it
	// grew): about 3 MiB measured.
	for _, nc := range ncs {
		nc.Close()
	}
	var end int64
	for i := 0; ; i++ {
		end = vmRSS(t, pid)
		if end <= start+16<<20 {
			break
		}
		if i == 100 {
			t.Fatalf("server RSS %d MiB 10s after the hostile clients left (%d MiB at start)", end>>20, start>>20)
		}
		time.Sleep(100 * time.Millisecond)
	}
	served("after")
	t.Logf("server RSS after they left: %d MiB", end>>20)
}

// hostile speaks the protocol on nc as a client that means harm: n gets
// of /big, which it will never read past what the server may send at
// first, and n puts that send a little data and never end.
func hostile(nc net.Conn, conn, n int) error {
	bw := bufio.NewWriter(nc)
	bw.Write(proto.AppendFrame(nil, proto.Header{Type: proto.FHello}, proto.AppendHello(nil, &proto.Hello{Version: proto.Version})))
	id := uint32(1)
	for i := range n {
		get := proto.AppendRequest(nil, &proto.Request{Op: proto.OpGet, Path: "/big", Count: -1})
		bw.Write(proto.AppendFrame(nil, proto.Header{Type: proto.FReq, Flags: proto.FlagEnd, Stream: id}, get))
		put := proto.AppendRequest(nil, &proto.Request{Op: proto.OpPut, Path: fmt.Sprintf("/p%d.%d", conn, i), Dir: zx.Dir{zx.AType: zx.TypeFile}})
		bw.Write(proto.AppendFrame(nil, proto.Header{Type: proto.FReq, Stream: id + 1}, put))
		bw.Write(proto.AppendFrame(nil, proto.Header{Type: proto.FData, Stream: id + 1}, make([]byte, 1<<10)))
		id += 2
	}
	return bw.Flush()
}

// vmRSS returns the resident memory of process pid.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS of %d: %q: %v", pid, v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
