package main

import (
	"context"

	"github.com/zxfs/zx"
)

// findGet issues one FindGet request: entries matching pred below path,
// each regular file's entry followed by its data. If the server's tree
// cannot FindGet (zx.ErrNotSupp), it falls back to one Find and, as the
// entries stream in, a pipelined Get per file, which costs one more round
// trip rather than one per file. The caller must drain the channel or
// cancel ctx.
func findGet(ctx context.Context, t interface {
	zx.Tree
	zx.Finder
}, path, pred string) <-chan zx.Item {
	out := make(chan zx.Item)
	go func() {
		defer close(out)
		send := func(it zx.Item) bool {
			select {
			case out <- it:
				return true
			case <-ctx.Done():
				return false
			}
		}
		in := t.FindGet(ctx, path, zx.FindOpts{Pred: pred})
		first, ok := <-in
		if !ok {
			return
		}
		if first.Err != nil && first.Dir == nil && zx.KindOf(first.Err) == zx.ErrNotSupp {
			for range in {
			}
			findThenGet(ctx, t, path, pred, send)
			return
		}
		if !send(first) {
			return
		}
		for it := range in {
			if !send(it) {
				return
			}
		}
	}()
	return out
}

// findThenGet is findGet for trees without FindGet.
func findThenGet(ctx context.Context, t interface {
	zx.Tree
	zx.Finder
}, path, pred string, send func(zx.Item) bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type pending struct {
		it   zx.Item
		data <-chan zx.Item
	}
	// The bound keeps memory in check: each Get in the queue may hold
	// up to a stream window of data.
	queue := make(chan pending, 512)
	go func() {
		defer close(queue)
		for it := range t.Find(ctx, path, zx.FindOpts{Pred: pred}) {
			p := pending{it: it}
			if it.Err == nil && it.Dir.Type() == zx.TypeFile {
				p.data = t.Get(ctx, it.Dir.Path(), 0, -1)
			}
			select {
			case queue <- p:
			case <-ctx.Done():
				return
			}
		}
	}()
	for p := range queue {
		if !send(p.it) {
			return
		}
		if p.data == nil {
			continue
		}
		for it := range p.data {
			if it.Err != nil {
				it = zx.Item{Dir: zx.Dir{zx.APath: p.it.Dir.Path(), zx.AName: p.it.Dir.Name()}, Err: it.Err}
			}
			if !send(it) {
				return
			}
		}
	}
}
