package zxtest

import (
	"bytes"
	"errors"

	"github.com/zxfs/zx"
)

// syncTests check Sync, for trees that are zx.Syncers.
var syncTests = []subtest{
	{"sync", func(e *env) {
		s, ok := e.tr.(zx.Syncer)
		if !ok {
			e.t.Skip("not a zx.Syncer")
		}
		// Issued behind a put without waiting for it: the Sync comes
		// after it, so the file exists for it.
		pc := e.tr.Put(e.ctx, "/f", zx.Dir{zx.AType: zx.TypeFile}, 0, bytes.NewReader([]byte("data")))
		sc := s.Sync(e.ctx, "/f")
		if r := recv(e, pc, "put /f"); r.Err != nil {
			e.t.Fatalf("put /f: %v", r.Err)
		}
		if err := recv(e, sc, "sync /f"); err != nil {
			e.t.Fatalf("sync /f behind its put: %v", err)
		}
		e.put("/d", zx.Dir{zx.AType: zx.TypeDir}, 0, nil)
		for _, p := range []string{"/d", "/"} {
			if err := recv(e, s.Sync(e.ctx, p), "sync "+p); err != nil {
				e.t.Errorf("sync %s: %v", p, err)
			}
		}
		if err := recv(e, s.Sync(e.ctx, "/nothing"), "sync /nothing"); !errors.Is(err, zx.ErrNotExist) {
			e.t.Errorf("sync /nothing = %v, want ErrNotExist", err)
		}
		if got := e.read("/f"); got != "data" {
			e.t.Errorf("after sync, /f holds %q", got)
		}
	}},
}
