// Command dirbytes measures the bytes that directory entries move on the
// link: a find of a whole tree (Find("/"), every entry, as the mount's
// find and prefetch ask) and a listing of every directory (a get of each,
// as ls -R through the mount asks), through the WAN emulator (package
// wan), with compression off, automatic and always on. It prints one line
// per measurement: the bytes the client received on its socket (frame
// headers included), the bytes zstd kept off it, the entries, and the
// time.
//
//	go run ./bench/dirbytes [--tree $(go env GOROOT)/src] [--link 100mbit@50ms]
//
// The bytes are deterministic up to the batching of entries (which
// depends on how fast the tree hands them over) and, with the automatic
// policy, up to which batches left before the round-trip time was known.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"strconv"
	"strings"
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
	tree := flag.String("tree", "", "the tree to export (default: $(go env GOROOT)/src)")
	link := flag.String("link", "100mbit@50ms", "the emulated link, RATE@RTT (RATE: Nmbit, or 0 for unlimited)")
	modes := flag.String("modes", "off,auto,always", "compression modes to measure, comma-separated")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("dirbytes: ")
	if *tree == "" {
		var err error
		if *tree, err = testbed.GoSource(); err != nil {
			log.Fatal(err)
		}
	}
	r, d, _ := strings.Cut(*link, "@")
	rate, err := parseRate(r)
	if err != nil {
		log.Fatal(err)
	}
	rtt, err := time.ParseDuration(d)
	if err != nil {
		log.Fatalf("bad --link %q: want RATE@RTT: %v", *link, err)
	}
	fmt.Printf("# tree %s, link %s\n", *tree, *link)
	for _, name := range strings.Split(*modes, ",") {
		var mode mux.Compression
		switch name {
		case "off":
			mode = mux.CompressOff
		case "auto":
			mode = mux.CompressAuto
		case "always":
			mode = mux.CompressAlways
		default:
			log.Fatalf("bad mode %q: want off, auto or always", name)
		}
		for _, w := range []string{"find", "list"} {
			m, err := measure(*tree, w, wan.Config{RTT: rtt, Rate: rate}, mode)
			if err != nil {
				log.Fatal(err)
			}
			fmt.Printf("%-6s %-4s bytes in %9d saved %9d entries %6d requests %4d %v\n",
				name, w, m.in, m.saved, m.entries, m.reqs, m.wall.Round(time.Millisecond))
		}
	}
}

type result struct {
	in, saved     int64
	entries, reqs int
	wall          time.Duration
}

// measure runs workload w (find, or list: a get of every directory that a
// find of the tree names) over a fresh server and connection and returns
// the bytes of the workload alone (the find that lists the directories
// for list is on a connection of its own).
func measure(dir, w string, link wan.Config, mode mux.Compression) (result, error) {
	var r result
	srv, err := testbed.Serve(dir, lfs.Options{ReadOnly: true}, server.Config{Mux: mux.Config{Compression: mode}})
	if err != nil {
		return r, err
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var dirs []string
	if w == "list" {
		c, err := client.Dial(ctx, srv.Addr, client.Options{})
		if err != nil {
			return r, err
		}
		for it := range c.Tree("").Find(ctx, "/", zx.FindOpts{Pred: "type=d"}) {
			if it.Err != nil {
				c.Close()
				return r, it.Err
			}
			dirs = append(dirs, it.Dir.Path())
		}
		c.Close()
	}
	p, err := wan.Listen("127.0.0.1:0", srv.Addr, link)
	if err != nil {
		return r, err
	}
	defer p.Close()
	c, err := client.Dial(ctx, p.Addr(), client.Options{Mux: mux.Config{Compression: mode}})
	if err != nil {
		return r, err
	}
	defer c.Close()
	if _, err := c.Ping(ctx); err != nil {
		return r, err
	}
	t := c.Tree("")
	st0 := c.Stats()
	t0 := time.Now()
	if w == "find" {
		r.reqs = 1
		for it := range t.Find(ctx, "/", zx.FindOpts{}) {
			if it.Err != nil {
				return r, it.Err
			}
			r.entries++
		}
	} else {
		// All at once, as a pipelining client would.
		var cs []<-chan zx.Item
		for _, d := range dirs {
			cs = append(cs, t.Get(ctx, d, 0, -1))
		}
		r.reqs = len(cs)
		for _, ch := range cs {
			for it := range ch {
				if it.Err != nil {
					return r, it.Err
				}
				r.entries++
			}
		}
	}
	r.wall = time.Since(t0)
	st := c.Stats()
	r.in = st.BytesIn - st0.BytesIn
	r.saved = st.SavedIn - st0.SavedIn
	return r, nil
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
