package mount_test

import (
	"bytes"
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

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
	wait(t, relBegun, "the release")

	terr := make(chan error, 1)
	go func() { terr <- os.Truncate(p, 100) }()
	wait(t, took, "the truncation")
	close(relGo)
	wait(t, relDone, "the release")
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

// TestGetattrDuringLateRelease: an O_TRUNC open of a file whose other
// handle's release comes late, and a stat whose reply the server sent
// before that release's flush (carrying the truncation) reached it, but
// which the mount used after: the mount answered the old size (its
// handles no longer had unsent writes), the kernel took it, and a write
// through a descriptor opened O_APPEND landed at the old end, leaving
// zeros before it (TestDifferential, ZX_SEED=1795577730838825726, op
// 1248). The hooks make the interleaving certain.
func TestGetattrDuringLateRelease(t *testing.T) {
	e := mnt(t, setup{})
	p := e.p("f")
	relBegun, relGo, relDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	statted, statGo := make(chan struct{}), make(chan struct{})
	var holdRel, holdStat atomic.Bool
	holdRel.Store(true)
	mount.SetReleaseHooks(e.m, func(q string) {
		if q == "/f" && holdRel.Load() {
			close(relBegun)
			<-relGo
		}
	}, func(q string) {
		if q == "/f" && holdRel.CompareAndSwap(true, false) {
			close(relDone)
		}
	}, nil)
	mount.SetStatHook(e.m, func(q string) {
		if q == "/f" && holdStat.CompareAndSwap(true, false) {
			close(statted)
			<-statGo
		}
	})
	t.Cleanup(func() {
		for _, c := range []chan struct{}{relGo, statGo} {
			select {
			case <-c:
			default:
				close(c)
			}
		}
	})

	old := bytes.Repeat([]byte("o"), 4096)
	a, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0644)
	must(t, err)
	_, err = a.Write(old)
	must(t, err)
	b, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	must(t, err)
	defer b.Close()
	must(t, a.Close()) // FLUSH sends the data; RELEASE comes after
	wait(t, relBegun, "the release")
	c, err := os.OpenFile(p, os.O_TRUNC|os.O_RDWR, 0)
	must(t, err)
	defer c.Close()

	holdStat.Store(true)
	type statRes struct {
		st  unix.Statx_t
		err error
	}
	sc := make(chan statRes, 1)
	go func() {
		// Forced: a GETATTR whatever the kernel has cached.
		var r statRes
		r.err = unix.Statx(int(c.Fd()), "", unix.AT_EMPTY_PATH|unix.AT_STATX_FORCE_SYNC, unix.STATX_SIZE, &r.st)
		sc <- r
	}()
	wait(t, statted, "the stat") // its reply: the size before the truncation
	close(relGo)
	wait(t, relDone, "the release") // the truncation is on the server
	close(statGo)
	r := <-sc
	must(t, r.err)
	if r.st.Size != 0 {
		t.Errorf("fstat after O_TRUNC open: size %d, want 0", r.st.Size)
	}

	data := bytes.Repeat([]byte("n"), 5000)
	_, err = b.Write(data)
	must(t, err)
	must(t, b.Close())
	got, err := os.ReadFile(p)
	must(t, err)
	if !bytes.Equal(got, data) {
		t.Errorf("after O_TRUNC open and O_APPEND write: %d bytes, first %q, want %d bytes of %q", len(got), got[:min(len(got), 10)], len(data), "n")
	}
}

// wait waits for c, which a hook closes when the mount reaches a point
// the test orders, failing the test if it never does (the kernel did not
// send what the test expected) rather than hanging it.
func wait(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s never reached the mount", what)
	}
}
