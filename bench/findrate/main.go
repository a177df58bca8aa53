// Command findrate measures the server's find rate on loopback, as
// `zxbench --loopback` does (an lfs server, a fresh client connection per
// run, Find("/", "") counting entries), over many runs, and says for each
// how much CPU other processes used meanwhile. On a machine shared with
// other work, wall-clock rates say little unless the runs that others
// disturbed are told apart; this prints the distribution of the rates of
// the undisturbed runs.
//
//	go run ./bench/findrate --runs 100 [--tree $(go env GOROOT)/src] [--quiet 2]
//
// Each output line is one run: entries/s, the CPU ticks (1/100 s) other
// processes used during it, and this process's own. The summary also says
// how many bytes zstd kept off the link in all (on loopback the default
// policy compresses nothing: 0).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	zxserver "github.com/zxfs/zx/server"
)

func main() {
	runs := flag.Int("runs", 50, "number of finds")
	tree := flag.String("tree", filepath.Join(runtime.GOROOT(), "src"), "the tree to export")
	quiet := flag.Int64("quiet", 2, "a run is undisturbed when other processes used at most this many CPU ticks during it")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the runs (server and client, one process) to this file")
	server := flag.String("server", "", "measure the zx server at this address (`HOST:PORT`, e.g. a `zx serve` of the tree) instead of one in this process")
	memprofile := flag.String("memprofile", "", "write an allocation profile of the runs to this file")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("findrate: ")

	addr := *server
	if addr == "" {
		fs, err := lfs.New(*tree, lfs.Options{ReadOnly: true})
		if err != nil {
			log.Fatal(err)
		}
		defer fs.Close()
		srv, err := zxserver.New(map[string]zx.Tree{"main": fs}, "main", zxserver.Config{})
		if err != nil {
			log.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Fatal(err)
		}
		go srv.Serve(l)
		defer srv.Close()
		addr = l.Addr().String()
	}

	if *cpuprofile != "" {
		pf, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	var calm []float64
	var entries int
	var saved int64
	for range *runs {
		rate, others, own, n, sv, err := run(ctx, addr)
		saved += sv
		if err != nil {
			log.Fatal(err)
		}
		entries = n
		fmt.Printf("%.0f %d %d\n", rate, others, own)
		if others <= *quiet {
			calm = append(calm, rate)
		}
	}
	if *memprofile != "" {
		pf, err := os.Create(*memprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.Lookup("allocs").WriteTo(pf, 0); err != nil {
			log.Fatal(err)
		}
		pf.Close()
	}
	if len(calm) == 0 {
		fmt.Printf("# no run of %d was undisturbed (others used more than %d ticks in each); compression saved %d bytes\n", *runs, *quiet, saved)
		os.Exit(1)
	}
	slices.Sort(calm)
	q := func(f float64) float64 { return calm[int(f*float64(len(calm)-1)+0.5)] }
	fmt.Printf("# %d entries; %d of %d runs undisturbed: entries/s min %.0f, quartiles %.0f %.0f %.0f, max %.0f; compression saved %d bytes\n",
		entries, len(calm), *runs, calm[0], q(0.25), q(0.5), q(0.75), calm[len(calm)-1], saved)
}

// run makes one find over a fresh connection and returns its rate, the
// CPU ticks other processes and this one used during it, and the bytes
// compression saved.
func run(ctx context.Context, addr string) (rate float64, others, own int64, n int, saved int64, err error) {
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		return 0, 0, 0, 0, 0, err
	}
	defer c.Close()
	if _, err := c.Ping(ctx); err != nil {
		return 0, 0, 0, 0, 0, err
	}
	t := c.Tree("")
	all0, self0 := busyTicks(), selfTicks()
	t0 := time.Now()
	for it := range t.Find(ctx, "/", zx.FindOpts{}) {
		if it.Err != nil {
			return 0, 0, 0, 0, 0, it.Err
		}
		n++
	}
	el := time.Since(t0)
	all, self := busyTicks()-all0, selfTicks()-self0
	return float64(n) / el.Seconds(), all - self, self, n, c.Stats().SavedIn, nil
}

// busyTicks returns the CPU ticks the whole machine spent not idle.
func busyTicks() int64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		log.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	var busy int64
	for i, s := range strings.Fields(line)[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		v, _ := strconv.ParseInt(s, 10, 64)
		busy += v
	}
	return busy
}

// selfTicks returns the CPU ticks (user and system) this process used.
func selfTicks() int64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		log.Fatal(err)
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return u + k
}
