// Command zstdbench measures zx's compression (negotiated zstd on DATA
// frames, see docs/design.md) through the WAN emulator (package wan) at
// several rates: a findget of a source tree (Go's runtime package by
// default) and a get of a file of random data, each with compression off
// and with the default (automatic) policy. It prints a Markdown table (see
// docs/bench/compression.md).
//
//	go run ./bench/zstdbench --links 10mbit@20ms,100mbit@20ms,0@20ms,0@0
//
// Each measurement uses a fresh server and connection in this process, so
// the CPU time reported (user + system, getrusage) is the client's, the
// server's and the emulator's together.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/bench/internal/testbed"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/server"
	"github.com/zxfs/zx/wan"
)

func main() {
	src := flag.String("src", "", "source tree to findget (default: $(go env GOROOT)/src/runtime)")
	links := flag.String("links", "10mbit@20ms,100mbit@20ms,0@20ms,0@0", "comma-separated emulated links, RATE@RTT (RATE: Nmbit, or 0 for unlimited)")
	randMiB := flag.String("random", "8,64,256,256", "MiB of random data to get on each link, in the order of --links")
	always := flag.Bool("always", false, "compare with compression tried on every frame (mux.CompressAlways) instead of the default policy")
	flag.Parse()
	log.SetFlags(0)
	var err error
	if *src == "" {
		if *src, err = testbed.GoSource("runtime"); err != nil {
			log.Fatal(err)
		}
	}
	tmp, err := os.MkdirTemp("", "zstdbench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	on := mux.CompressAuto
	if *always {
		on = mux.CompressAlways
	}
	sizes := strings.Split(*randMiB, ",")
	var rs []int64
	var rtts []time.Duration
	for _, l := range strings.Split(*links, ",") {
		r, d, _ := strings.Cut(l, "@")
		v, err := parseRate(r)
		if err != nil {
			log.Fatal(err)
		}
		rtt, err := time.ParseDuration(d)
		if err != nil {
			log.Fatalf("bad link %q: want RATE@RTT: %v", l, err)
		}
		rs = append(rs, v)
		rtts = append(rtts, rtt)
	}
	if len(sizes) != len(rs) {
		log.Fatalf("--random gives %d sizes for %d links", len(sizes), len(rs))
	}
	// Warm the page cache, so that the first measurement does not pay
	// for the disk.
	if _, err := measure(*src, "/", true, 0, 0, mux.CompressOff); err != nil {
		log.Fatal(err)
	}

	fmt.Printf("source: findget of %s; random: get of a file of random bytes\n\n", *src)
	fmt.Println("| rate | RTT | data | MiB | compression | time | MiB/s | on the wire | CPU |")
	fmt.Println("|---|---:|---|---:|---|---:|---:|---:|---:|")
	for i, rate := range rs {
		mib, _ := strconv.Atoi(sizes[i])
		rnd := filepath.Join(tmp, "random")
		if err := randomFile(rnd, int64(mib)<<20); err != nil {
			log.Fatal(err)
		}
		for _, w := range []struct {
			name, dir, path string
			find            bool
		}{
			{"source", *src, "/", true},
			{"random", tmp, "/random", false},
		} {
			for _, mode := range []mux.Compression{mux.CompressOff, on} {
				m, err := measure(w.dir, w.path, w.find, rate, rtts[i], mode)
				if err != nil {
					log.Fatalf("%s at %s: %v", w.name, rateName(rate), err)
				}
				fmt.Printf("| %s | %v | %s | %.1f | %s | %.2f s | %.1f | %.1f MiB (%.0f%%) | %.2f s |\n",
					rateName(rate), rtts[i], w.name, mib64(m.bytes), modeName(mode), m.wall.Seconds(),
					mib64(m.bytes)/m.wall.Seconds(), mib64(m.wire), 100*float64(m.wire)/float64(m.bytes), m.cpu.Seconds())
			}
		}
	}
}

type result struct {
	bytes, wire int64
	wall, cpu   time.Duration
}

// measure serves dir, connects through a link of rate and rtt with
// compression mode on both sides, and reads path: a findget of the tree
// or a get of a file.
func measure(dir, path string, find bool, rate int64, rtt time.Duration, mode mux.Compression) (result, error) {
	var r result
	srv, err := testbed.Serve(dir, lfs.Options{ReadOnly: true}, server.Config{Mux: mux.Config{Compression: mode}})
	if err != nil {
		return r, err
	}
	defer srv.Close()
	p, err := wan.Listen("127.0.0.1:0", srv.Addr, wan.Config{RTT: rtt, Rate: rate})
	if err != nil {
		return r, err
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cpu0 := cpuTime()
	t0 := time.Now()
	c, err := client.Dial(ctx, p.Addr(), client.Options{Mux: mux.Config{Compression: mode}})
	if err != nil {
		return r, err
	}
	defer c.Close()
	t := c.Tree("")
	if find {
		for it := range t.FindGet(ctx, path, zx.FindOpts{Pred: "type=-"}) {
			if it.Err != nil {
				return r, it.Err
			}
			r.bytes += int64(len(it.Data))
		}
	} else {
		for it := range t.Get(ctx, path, 0, -1) {
			if it.Err != nil {
				return r, it.Err
			}
			r.bytes += int64(len(it.Data))
		}
	}
	r.wall = time.Since(t0)
	r.cpu = cpuTime() - cpu0
	r.wire = c.Stats().BytesIn
	return r, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func randomFile(name string, n int64) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for n > 0 {
		m := min(n, int64(len(buf)))
		rand.Read(buf[:m])
		if _, err := f.Write(buf[:m]); err != nil {
			f.Close()
			return err
		}
		n -= m
	}
	return f.Close()
}

func parseRate(s string) (int64, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "0" || s == "" {
		return 0, nil
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "mbit"), 64)
	if err != nil || !strings.HasSuffix(s, "mbit") {
		return 0, fmt.Errorf("bad rate %q: want Nmbit or 0", s)
	}
	return int64(v * 1e6 / 8), nil
}

func rateName(r int64) string {
	if r == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%g Mbit/s", float64(r)*8/1e6)
}

func modeName(m mux.Compression) string {
	switch m {
	case mux.CompressOff:
		return "off"
	case mux.CompressAlways:
		return "always"
	}
	return "auto"
}

func mib64(n int64) float64 { return float64(n) / (1 << 20) }
