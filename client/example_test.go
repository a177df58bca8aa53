package client_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"strings"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/server"
)

// startServer serves a small source tree on loopback, as `zx serve` would.
func startServer() (addr string, stop func()) {
	fs := memfs.New()
	ctx := context.Background()
	for _, p := range []string{"/src", "/src/cmd", "/src/lib"} {
		zx.Mkdir(ctx, fs, p, 0755)
	}
	for _, p := range []string{"/src/cmd/main.go", "/src/cmd/main.o", "/src/lib/lib.go", "/src/lib/lib.o", "/src/lib/util.o"} {
		zx.WriteFile(ctx, fs, p, nil, []byte("contents of "+p+"\n"))
	}
	srv, err := server.New(map[string]zx.Tree{"main": fs}, "main", server.Config{})
	if err != nil {
		log.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go srv.Serve(l)
	return l.Addr().String(), func() { srv.Close() }
}

// The ZX paper's example: remove every object file under a tree with one
// find, issuing the removes while the entries stream in, and checking their
// errors only at the end. However large the tree, the program waits for
// about two round trips: one for the find, one for all the removes at once
// (c.Stats().RoundTrips counts them; it is not printed here because a
// reply that comes back before the next remove is issued, as it may on
// loopback, makes that remove count as one more; the mux tests check the
// counts over an emulated link).
func Example_removeObjectFiles() {
	addr, stop := startServer()
	defer stop()
	ctx := context.Background()

	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	t := c.Tree("")

	var removed []string
	var errcs []<-chan error
	for it := range t.Find(ctx, "/src", zx.FindOpts{Pred: "~*.o"}) {
		if it.Err != nil {
			log.Print(it.Err)
			continue
		}
		removed = append(removed, it.Dir.Path())
		errcs = append(errcs, t.Remove(ctx, it.Dir.Path()))
	}
	for _, ec := range errcs {
		if err := <-ec; err != nil {
			log.Print(err)
		}
	}
	fmt.Println("removed:", strings.Join(removed, " "))

	// What is left, again with one request.
	for it := range t.Find(ctx, "/src", zx.FindOpts{Pred: "type=-"}) {
		fmt.Println("left:", it.Dir.Path())
	}
	// Output:
	// removed: /src/cmd/main.o /src/lib/lib.o /src/lib/util.o
	// left: /src/cmd/main.go
	// left: /src/lib/lib.go
}

// FindGet streams the matching files' contents with their entries: one
// request reads a whole tree, as `zx grep` does.
func ExampleTree_FindGet() {
	addr, stop := startServer()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	for it := range c.Tree("").FindGet(ctx, "/src", zx.FindOpts{Pred: "~*.go"}) {
		switch {
		case it.Err != nil:
			log.Print(it.Err)
		case it.Dir != nil:
			fmt.Print(it.Dir.Path(), ": ")
		default:
			fmt.Print(string(it.Data))
		}
	}
	// Output:
	// /src/cmd/main.go: contents of /src/cmd/main.go
	// /src/lib/lib.go: contents of /src/lib/lib.go
}

// A put creates a file with its mode and contents in one request, and
// returns the final entry: no stat is needed afterwards.
func ExampleTree_Put() {
	addr, stop := startServer()
	defer stop()
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	d := zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0", zx.AMode: "0600"}
	r := <-c.Tree("").Put(ctx, "/notes.txt", d, 0, strings.NewReader("remember the milk\n"))
	if r.Err != nil {
		log.Fatal(r.Err)
	}
	fmt.Println(r.Dir.Path(), r.Dir.Size(), r.Dir[zx.AMode])
	// Output:
	// /notes.txt 18 0600
}

// Writing a file and making it durable on the server's disk, as fsync(2)
// does for a local file, in one round trip: the Sync is sent right after
// the put, without waiting for it, and the server applies it after the
// put (requests on one path are applied in the order sent). Against a
// server too old for the sync request, Sync falls back to the server's
// control file and costs a second round trip.
func Example_sync() {
	addr, stop := startServer()
	defer stop()
	ctx := context.Background()

	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	t := c.Tree("")

	pc := t.Put(ctx, "/src/notes.txt", zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, strings.NewReader("remember the milk\n"))
	sc := zx.Sync(ctx, t, "/src/notes.txt")
	r := <-pc
	if r.Err != nil {
		log.Fatal(r.Err)
	}
	if err := <-sc; err != nil {
		log.Fatal(err)
	}
	fmt.Println("durable:", r.Dir.Path(), r.Dir.Size(), "bytes")
	// Output:
	// durable: /src/notes.txt 18 bytes
}
