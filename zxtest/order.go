package zxtest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/zxfs/zx"
)

var orderTests = []subtest{
	{"Pipeline", func(e *env) {
		// All issued before any reply is read.
		tr, ctx := e.tr, e.ctx
		var rs []<-chan zx.Reply
		var errs []<-chan error
		rs = append(rs, tr.Put(ctx, "/p", zx.Dir{zx.AType: zx.TypeDir}, 0, nil))
		rs = append(rs, tr.Put(ctx, "/p/x", zx.Dir{zx.AType: zx.TypeFile}, 0, nil))
		rs = append(rs, tr.Put(ctx, "/p/x", zx.Dir{}, 0, strings.NewReader("hello")))
		errs = append(errs, tr.Move(ctx, "/p/x", "/p/y"))
		rs = append(rs, tr.Put(ctx, "/p/z", zx.Dir{zx.AType: zx.TypeFile}, 0, strings.NewReader("zzz")))
		errs = append(errs, tr.Remove(ctx, "/p/y"))
		rs = append(rs, tr.Wstat(ctx, "/p/z", zx.Dir{zx.AMode: "0600"}))
		for i, c := range rs {
			if r := recv(e, c, fmt.Sprintf("pipelined reply %d", i)); r.Err != nil {
				e.t.Fatalf("pipelined request %d: %v", i, r.Err)
			}
		}
		for i, c := range errs {
			if err := recv(e, c, fmt.Sprintf("pipelined move/remove %d", i)); err != nil {
				e.t.Fatalf("pipelined move/remove %d: %v", i, err)
			}
		}
		e.check("/p/z:zzz")
		if m := e.stat("/p/z").Mode(); m != 0600 {
			e.t.Fatalf("/p/z: mode %o, want 0600", m)
		}
	}},
	{"Pipeline1000", func(e *env) {
		tr, ctx := e.tr, e.ctx
		const n = 1000
		mk := tr.Put(ctx, "/d", zx.Dir{zx.AType: zx.TypeDir}, 0, nil)
		var puts []<-chan zx.Reply
		for i := range n {
			p := fmt.Sprintf("/d/f%04d", i)
			puts = append(puts, tr.Put(ctx, p, zx.Dir{zx.AType: zx.TypeFile}, 0, strings.NewReader(p)))
		}
		full := tr.Get(ctx, "/d", 0, -1) // must see every file
		var rms []<-chan error
		for i := range n {
			rms = append(rms, tr.Remove(ctx, fmt.Sprintf("/d/f%04d", i)))
		}
		empty := tr.Get(ctx, "/d", 0, -1) // must see none
		if r := recv(e, mk, "put /d"); r.Err != nil {
			e.t.Fatalf("put /d: %v", r.Err)
		}
		_, ds, err := streamErr(collect(e, full, "get /d after the creates", false))
		if err != nil || len(ds) != n {
			e.t.Fatalf("get /d after %d pipelined creates: %d entries, %v", n, len(ds), err)
		}
		for i, d := range ds {
			if want := fmt.Sprintf("/d/f%04d", i); d.Path() != want || d.Size() != int64(len(want)) {
				e.t.Fatalf("entry %d: %v, want %s of size %d", i, d, want, len(want))
			}
		}
		for i, c := range puts {
			if r := recv(e, c, "pipelined put"); r.Err != nil {
				e.t.Fatalf("pipelined put %d: %v", i, r.Err)
			}
		}
		for i, c := range rms {
			if err := recv(e, c, "pipelined remove"); err != nil {
				e.t.Fatalf("pipelined remove %d: %v", i, err)
			}
		}
		_, ds, err = streamErr(collect(e, empty, "get /d after the removes", false))
		if err != nil || len(ds) != 0 {
			e.t.Fatalf("get /d after the removes: %d entries, %v", len(ds), err)
		}
		e.check("/d/")
	}},
	{"Concurrent", func(e *env) {
		e.mk("/c/")
		const workers, each = 16, 50
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					p := fmt.Sprintf("/c/w%02d.%02d", w, i)
					data := bytes.Repeat([]byte(p), 1+i*7)
					r := <-e.tr.Put(e.ctx, p, zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, bytes.NewReader(data))
					if r.Err != nil {
						e.t.Errorf("put %s: %v", p, r.Err)
						return
					}
					got, err := zx.ReadFile(e.ctx, e.tr, p)
					if err != nil || !bytes.Equal(got, data) {
						e.t.Errorf("get %s: %d bytes, %v: contents differ", p, len(got), err)
						return
					}
					if d, err := zx.Stat(e.ctx, e.tr, p); err != nil || d.Size() != int64(len(data)) {
						e.t.Errorf("stat %s: %v %v", p, d, err)
						return
					}
				}
			})
		}
		wg.Wait()
		if e.t.Failed() {
			return
		}
		if ds := e.readDir("/c"); len(ds) != workers*each {
			e.t.Fatalf("%d files, want %d", len(ds), workers*each)
		}
	}},
}

var cancelTests = []subtest{
	{"CancelGet", func(e *env) {
		data := pseudoRandom(5<<20, 2)
		e.put("/big", zx.Dir{zx.AType: zx.TypeFile}, 0, data)
		ctx, cancel := context.WithCancel(e.ctx)
		c := e.tr.Get(ctx, "/big", 0, -1)
		first := recv(e, c, "get /big")
		if first.Err != nil || len(first.Data) == 0 {
			e.t.Fatalf("get /big: first Item %v", first.Err)
		}
		cancel()
		var n int
		deadline := time.NewTimer(2 * time.Second)
		defer deadline.Stop()
	drain:
		for {
			select {
			case it, ok := <-c:
				if !ok {
					break drain
				}
				n += len(it.Data)
				if it.Err != nil && !isKind(it.Err, zx.ErrCanceled) {
					e.t.Fatalf("cancelled get: error %v, want %q", it.Err, zx.ErrCanceled)
				}
			case <-deadline.C:
				e.t.Fatal("cancelled get: stream not closed within 2s")
			}
		}
		if n+len(first.Data) >= len(data) {
			e.t.Logf("cancelled get sent the whole file (%d bytes)", n+len(first.Data))
		}
		// The tree still works.
		if got := e.read("/big"); got != string(data) {
			e.t.Fatal("get /big after a cancelled get: contents differ")
		}
	}},
	{"CancelFind", func(e *env) {
		var spec []string
		for i := range 200 {
			spec = append(spec, fmt.Sprintf("/d%d/f%d:x", i%10, i))
		}
		e.mk(spec...)
		ctx, cancel := context.WithCancel(e.ctx)
		c := find(e.tr, ctx, "/", zx.FindOpts{Pred: "type=-"}, false)
		if it := recv(e, c, "find"); it.Err != nil {
			e.t.Fatalf("find: %v", it.Err)
		}
		cancel()
		deadline := time.NewTimer(2 * time.Second)
		defer deadline.Stop()
		for {
			select {
			case it, ok := <-c:
				if !ok {
					e.check(spec...)
					return
				}
				if it.Err != nil && !isKind(it.Err, zx.ErrCanceled) {
					e.t.Fatalf("cancelled find: error %v, want %q", it.Err, zx.ErrCanceled)
				}
			case <-deadline.C:
				e.t.Fatal("cancelled find: stream not closed within 2s")
			}
		}
	}},
	{"CancelledRequests", func(e *env) {
		e.mk("/f:old", "/d/")
		ctx, cancel := context.WithCancel(e.ctx)
		cancel()
		// Each may fail with ErrCanceled or complete: the state must say which.
		put := recv(e, e.tr.Put(ctx, "/g", zx.Dir{zx.AType: zx.TypeFile}, 0, strings.NewReader("new")), "cancelled put")
		rm := recv(e, e.tr.Remove(ctx, "/f"), "cancelled remove")
		st := recv(e, e.tr.Stat(ctx, "/d"), "cancelled stat")
		ws := recv(e, e.tr.Wstat(ctx, "/d", zx.Dir{zx.AMode: "0700"}), "cancelled wstat")
		mv := recv(e, e.tr.Move(ctx, "/d", "/e"), "cancelled move")
		for _, err := range []error{put.Err, rm, st.Err, ws.Err, mv} {
			if err != nil && !isKind(err, zx.ErrCanceled) {
				e.t.Fatalf("cancelled request: error %v, want none or %q", err, zx.ErrCanceled)
			}
		}
		var want []string
		if put.Err == nil {
			want = append(want, "/g:new")
		}
		if rm != nil {
			want = append(want, "/f:old")
		}
		dir := "/d"
		if mv == nil {
			dir = "/e"
		}
		want = append(want, dir+"/")
		e.check(want...)
		if m := e.stat(dir).Mode(); ws.Err == nil && m != 0700 || ws.Err != nil && m != 0755 {
			e.t.Fatalf("%s: mode %o after a cancelled wstat that replied %v", dir, m, ws.Err)
		}
		// A Get with a cancelled context ends, with ErrCanceled or not.
		its := collect(e, e.tr.Get(ctx, dir, 0, -1), "cancelled get", false)
		for _, it := range its {
			if it.Err != nil && !isKind(it.Err, zx.ErrCanceled) {
				e.t.Fatalf("cancelled get: error %v", it.Err)
			}
		}
	}},
}
