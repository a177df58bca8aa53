package memfs_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/memfs"
)

// Remove every object file below /src, the ZX way: one Find streams the
// entries while a Remove is issued for each, without waiting; errors are
// collected only at the end, by when most replies have already arrived.
func Example() {
	ctx := context.Background()
	fs := memfs.New()

	// Build the tree with pipelined requests: the tree applies them in
	// order, so the directories exist before the files are put in them.
	var puts []<-chan zx.Reply
	for _, p := range []string{"/src", "/src/cmd", "/src/junk.o", "/src/junk.o/keep"} {
		puts = append(puts, fs.Put(ctx, p, zx.Dir{zx.AType: zx.TypeDir}, 0, nil))
	}
	for _, p := range []string{"/src/a.c", "/src/a.o", "/src/cmd/main.c", "/src/cmd/main.o", "/src/cmd/util.o"} {
		puts = append(puts, fs.Put(ctx, p, zx.Dir{zx.AType: zx.TypeFile}, 0, strings.NewReader("data")))
	}
	for _, c := range puts {
		if r := <-c; r.Err != nil {
			fmt.Println(r.Err)
		}
	}

	var errcs []<-chan error
	for it := range fs.Find(ctx, "/src", zx.FindOpts{Pred: "~*.o"}) {
		if it.Err != nil {
			fmt.Println("find:", it.Err)
			continue
		}
		errcs = append(errcs, fs.Remove(ctx, it.Dir.Path()))
	}
	for _, c := range errcs {
		if err := <-c; err != nil {
			fmt.Println(err)
		}
	}

	for it := range fs.Find(ctx, "/src", zx.FindOpts{Pred: "type=-"}) {
		fmt.Println(it.Dir.Path())
	}
	// Output:
	// remove /src/junk.o: directory not empty
	// /src/a.c
	// /src/cmd/main.c
}
