package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/server"
)

// recalls opens owner's recalls stream on c and waits for Ready.
func recalls(t *testing.T, c *client.Conn, owner string) <-chan zx.Recall {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	rc := c.Tree("").Recalls(ctx, owner)
	if r := <-rc; r.Err != nil || !r.Ready {
		t.Fatalf("recalls: %+v", r)
	}
	return rc
}

func nextRecall(t *testing.T, rc <-chan zx.Recall) string {
	t.Helper()
	select {
	case r := <-rc:
		if r.Err != nil {
			t.Fatalf("recalls: %v", r.Err)
		}
		return r.Path
	case <-time.After(10 * time.Second):
		t.Fatal("no recall")
	}
	return ""
}

// TestDelegationRecall: while A holds a delegation of /d, B's requests
// inside it (and a find from above) are held until A has sent what it had
// pending and given /d back; then B sees A's changes. B's requests
// elsewhere are not held, and B cannot get a delegation overlapping A's.
func TestDelegationRecall(t *testing.T) {
	ctx := context.Background()
	srv, addr := serve(t, memfs.New(), server.Config{DelegLease: 3 * time.Second})
	a, b := dial(t, addr), dial(t, addr)
	ta, tb := a.Tree(""), b.Tree("")
	mkdir(t, ta, "/d0")
	mkdir(t, ta, "/d1")
	mkdir(t, ta, "/d2")
	mkdir(t, ta, "/other")
	ra := recalls(t, a, "A")
	recalls(t, b, "B")

	for i, look := range []struct {
		name string
		do   func() (string, error)
	}{
		{"stat", func() (string, error) {
			d, err := zx.Stat(ctx, tb, "/d0/f")
			return d[zx.ASize], err
		}},
		{"find from the root", func() (string, error) {
			var size string
			for it := range tb.Find(ctx, "/", zx.FindOpts{Pred: "name=f"}) {
				if it.Err != nil {
					return "", it.Err
				}
				size = it.Dir[zx.ASize]
			}
			return size, nil
		}},
		{"allocate", func() (string, error) {
			r := <-tb.Allocate(ctx, "/d2/f", zx.AllocKeepSize, 0, 4096)
			return r.Dir[zx.ASize], r.Err
		}},
	} {
		dir := "/d" + string(rune('0'+i))
		must(t, (<-ta.Delegate(ctx, dir)).Err)
		if err := (<-tb.Delegate(ctx, dir+"/x")).Err; !errors.Is(err, zx.ErrBusy) {
			t.Fatalf("B's delegation inside A's: %v, want busy", err)
		}
		name := dir + "/f"
		got := make(chan string, 1)
		go func() {
			size, err := look.do()
			if err != nil {
				size = err.Error()
			}
			got <- size
		}()
		if p := nextRecall(t, ra); p != dir {
			t.Fatalf("%s: recall of %s", look.name, p)
		}
		// B is held: its requests elsewhere are not.
		if _, err := zx.Stat(ctx, tb, "/other"); err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-got:
			t.Fatalf("%s: answered (%s) before A gave %s back", look.name, s, dir)
		default:
		}
		// A's pending change, sent now, then the return, without
		// waiting for either.
		pc := ta.Put(ctx, name, zx.Dir{zx.AType: zx.TypeFile}, 0, strings.NewReader("written under the delegation"))
		ec := ta.Return(ctx, dir)
		if s := <-got; s != "28" {
			t.Fatalf("%s: B saw size %q, want A's 28 bytes", look.name, s)
		}
		must(t, (<-pc).Err)
		must(t, <-ec)
	}
	st := srv.DelegStats()
	if st.Recalls != 3 || st.Returned != 3 || st.Held != 0 || st.Revoked != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestDelegationLease: a holder whose connection is lost keeps its
// delegation for the lease, and no longer: B's request is then served.
func TestDelegationLease(t *testing.T) {
	ctx := context.Background()
	srv, addr := serve(t, memfs.New(), server.Config{DelegLease: 300 * time.Millisecond})
	a, b := dial(t, addr), dial(t, addr)
	ta, tb := a.Tree(""), b.Tree("")
	mkdir(t, ta, "/d")
	recalls(t, a, "A")
	must(t, (<-ta.Delegate(ctx, "/d")).Err)
	a.Close()
	if _, err := zx.Stat(ctx, tb, "/d"); err != nil {
		t.Fatal(err)
	}
	if st := srv.DelegStats(); st.Revoked != 1 || st.Held != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestDelegationOldServer: a server without delegations says so.
func TestDelegationOldServer(t *testing.T) {
	ctx := context.Background()
	_, addr := serve(t, memfs.New(), server.Config{NoDeleg: true})
	c := dial(t, addr)
	if ok, err := c.Delegates(ctx); ok || err != nil {
		t.Fatalf("Delegates: %v %v", ok, err)
	}
	if err := (<-c.Tree("").Delegate(ctx, "/")).Err; !errors.Is(err, zx.ErrNotSupp) {
		t.Fatalf("Delegate: %v", err)
	}
	r := <-c.Tree("").Recalls(ctx, "A")
	if !errors.Is(r.Err, zx.ErrNotSupp) {
		t.Fatalf("Recalls: %+v", r)
	}
}

func mkdir(t *testing.T, tr zx.Tree, p string) {
	t.Helper()
	if _, err := zx.Mkdir(context.Background(), tr, p, 0o755); err != nil {
		t.Fatal(err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
