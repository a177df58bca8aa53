package mount_test

import (
	"bytes"
	"context"
	"os"
	"sync/atomic"
	"testing"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/mount"
)

// TestTruncateDuringLateRelease: the kernel sends RELEASE after close has
// returned, so a file whose descriptors are all closed may still have an
// open handle on the mount, and a truncate(2) by path goes to that
// handle's state. A truncation that took the state just as the late
// release detached it was recorded there and sent by no one: the file
// kept its old size (the randomized differential test, ZX_SEED=
// 1795577730838825726: truncate b/f to 4095 left it at 100). The hooks
// make the interleaving certain: the release begins, the truncation
// takes the state, the release ends, then the truncation goes on.
func TestTruncateDuringLateRelease(t *testing.T) {
	e := mnt(t, setup{})
	p := e.p("f")
	relBegun, relGo, relDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	took, truncGo := make(chan struct{}), make(chan struct{})
	var holdRel, holdTrunc atomic.Bool
	holdRel.Store(true)
	holdTrunc.Store(true)
	mount.SetReleaseHooks(e.m, func(q string) {
		if q == "/f" && holdRel.Load() {
			close(relBegun)
			<-relGo
		}
	}, func(q string) {
		if q == "/f" && holdRel.CompareAndSwap(true, false) {
			close(relDone)
		}
	}, func(q string) {
		if q == "/f" && holdTrunc.CompareAndSwap(true, false) {
			close(took)
			<-truncGo
		}
	})
	// Nothing must stay blocked if the test fails half-way.
	t.Cleanup(func() {
		select {
		case <-relGo:
		default:
			close(relGo)
		}
		select {
		case <-truncGo:
		default:
			close(truncGo)
		}
	})

	data := []byte("0123456789")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0644)
	must(t, err)
	_, err = f.Write(data)
	must(t, err)
	must(t, f.Close()) // FLUSH sends the data; RELEASE comes after
	<-relBegun

	terr := make(chan error, 1)
	go func() { terr <- os.Truncate(p, 100) }()
	<-took
	close(relGo)
	<-relDone
	close(truncGo)
	must(t, <-terr)

	want := append(bytes.Clone(data), make([]byte, 90)...)
	d, err := zx.Stat(context.Background(), e.conn.Tree(""), "/f")
	must(t, err)
	if d.Size() != 100 {
		t.Errorf("server: size %d after truncate to 100, want 100", d.Size())
	}
	fi, err := os.Stat(p)
	must(t, err)
	if fi.Size() != 100 {
		t.Errorf("mount: size %d after truncate to 100, want 100", fi.Size())
	}
	got, err := os.ReadFile(p)
	must(t, err)
	if !bytes.Equal(got, want) {
		t.Errorf("mount: read %q, want %q", got, want)
	}
}
