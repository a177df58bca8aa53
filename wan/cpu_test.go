//go:build unix

package wan

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The CPU benchmark runs the proxy in a child process (this test binary,
// re-executed) so that getrusage counts the proxy alone, not the sender and
// the sink of the benchmark.
const childEnv = "ZX_WAN_CPU_CHILD" // "rtt,rate" of the child's proxy

// TestCPUChild is the child process of BenchmarkCPU; it does nothing when
// run as a test. As a child it serves a proxy to the target given on its
// first line of input, prints the proxy's address, then answers each line
// "cpu" with the CPU time it has used so far (user + system, nanoseconds),
// and returns at the end of its input.
func TestCPUChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		return
	}
	var rtt time.Duration
	var rate int64
	if _, err := fmt.Sscanf(spec, "%d,%d", &rtt, &rate); err != nil {
		fmt.Fprintln(os.Stderr, "bad", childEnv, spec, err)
		os.Exit(2)
	}
	in := bufio.NewScanner(os.Stdin)
	if !in.Scan() {
		os.Exit(2)
	}
	p, err := Listen("127.0.0.1:0", in.Text(), Config{RTT: rtt, Rate: rate})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(p.Addr())
	for in.Scan() {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		fmt.Println(ru.Utime.Nano() + ru.Stime.Nano())
	}
	p.Close()
}

// child is a proxy running in a child process.
type child struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
	addr string
}

func startChild(b *testing.B, target string, cfg Config) *child {
	b.Helper()
	args := []string{"-test.run=^TestCPUChild$", "-test.count=1"}
	if f := os.Getenv("ZX_WAN_CPU_PROFILE"); f != "" {
		args = append(args, "-test.cpuprofile="+f)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%d", childEnv, int64(cfg.RTT), cfg.Rate))
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &child{cmd: cmd, in: in, out: bufio.NewScanner(out)}
	b.Cleanup(func() {
		c.in.Close()
		if err := c.cmd.Wait(); err != nil {
			b.Errorf("proxy child: %v", err)
		}
	})
	fmt.Fprintln(in, target)
	if !c.out.Scan() {
		b.Fatal("proxy child did not start")
	}
	c.addr = c.out.Text()
	return c
}

// cpu returns the CPU time the child has used so far.
func (c *child) cpu(b *testing.B) time.Duration {
	b.Helper()
	fmt.Fprintln(c.in, "cpu")
	if !c.out.Scan() {
		b.Fatal("proxy child died")
	}
	n, err := strconv.ParseInt(strings.TrimSpace(c.out.Text()), 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(n)
}

// BenchmarkCPU reports the CPU the proxy uses per second of transfer
// (cpu-s/s: 1 is a whole core) and per byte it forwards (cpu-ns/B), for
// bulk transfers of 1 MiB per iteration (with "acks", the receiver also
// sends 16 bytes back for every 64 KiB it gets, as a flow-controlled
// protocol such as zx's multiplexer does) and for sparse small
// request/replies (one 32-byte ping-pong per iteration, one at a time):
//
//	go test -run '^$' -bench CPU -benchtime 128x ./wan/
//
// With ZX_WAN_CPU_PROFILE=file the child writes a CPU profile of the proxy
// there (of the last sub-benchmark run).
func BenchmarkCPU(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  Config
		ping bool
		acks bool
	}{
		{"bulk/rtt0", Config{}, false, false},
		{"bulk/rtt50ms", Config{RTT: 50 * time.Millisecond}, false, false},
		{"bulk/rtt100ms-100mbit", Config{RTT: 100 * time.Millisecond, Rate: 100e6 / 8}, false, false},
		{"bulk+acks/rtt100ms-100mbit", Config{RTT: 100 * time.Millisecond, Rate: 100e6 / 8}, false, true},
		{"ping/rtt50ms", Config{RTT: 50 * time.Millisecond}, true, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			if tc.ping {
				benchPingCPU(b, tc.cfg)
			} else {
				benchBulkCPU(b, tc.cfg, tc.acks)
			}
		})
	}
}

func benchBulkCPU(b *testing.B, cfg Config, acks bool) {
	const block = 1 << 20
	got := make(chan int64, 1)
	addr := server(b, func(c net.Conn) {
		var n int64
		buf, ack := make([]byte, 64<<10), make([]byte, 16)
		for {
			k, err := io.ReadFull(c, buf)
			n += int64(k)
			if err != nil {
				break
			}
			if acks {
				c.Write(ack)
			}
		}
		got <- n
	})
	p := startChild(b, addr, cfg)
	c := dial(b, p.addr)
	if acks {
		go io.Copy(io.Discard, c)
	}
	buf := make([]byte, block)
	b.SetBytes(block)
	cpu0, t0 := p.cpu(b), time.Now()
	for b.Loop() {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.(*net.TCPConn).CloseWrite()
	n := <-got
	el, cpu := time.Since(t0), p.cpu(b)-cpu0
	if want := int64(b.N) * block; n != want {
		b.Fatalf("sink got %d bytes, want %d", n, want)
	}
	reportCPU(b, cpu, el)
	b.ReportMetric(float64(cpu)/float64(n), "cpu-ns/B")
}

func benchPingCPU(b *testing.B, cfg Config) {
	addr := server(b, echo)
	p := startChild(b, addr, cfg)
	c := dial(b, p.addr)
	msg := make([]byte, 32)
	cpu0, t0 := p.cpu(b), time.Now()
	for b.Loop() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, msg); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, p.cpu(b)-cpu0, time.Since(t0))
}

func reportCPU(b *testing.B, cpu, el time.Duration) {
	b.ReportMetric(cpu.Seconds()/el.Seconds(), "cpu-s/s")
	b.Logf("N=%d: proxy used %v of CPU in %v", b.N, cpu, el)
}
