package server_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/zxfs/zx"
)

// owner returns the uid and gid of a file.
func owner(t *testing.T, p string) (uint32, uint32) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	return st.Uid, st.Gid
}

// Requests act as the key's user: what they create belongs to that user,
// and they cannot give entries away. A per-request identity is honoured
// only on a multi-user key.
func TestRequestsActAsKeyUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("SKIPPED: creating files owned by other users needs root (CI runs tests as root)")
	}
	ann, share := newKey(t), newKey(t)
	s := startTLS(t, "", t.TempDir(),
		grantLine(ann, "user=ann tree=*:rw uid=2001 gid=2002")+
			grantLine(share, "user=share tree=*:rw multiuser uidmap=1000:3000 gidmap=100:3100"))
	ctx := context.Background()
	dir := s.dirs["main"]
	want := func(name string, uid, gid uint32) {
		t.Helper()
		if u, g := owner(t, filepath.Join(dir, name)); u != uid || g != gid {
			t.Errorf("%s is owned by %d:%d, want %d:%d", name, u, g, uid, gid)
		}
	}

	a := dialTLS(t, s, ann).Tree("")
	// A single-user key: what the request says is ignored.
	actx := zx.WithCaller(ctx, zx.Caller{Uid: 4444, Gid: 4444})
	if _, err := zx.WriteFile(actx, a, "/ann.txt", nil, []byte("x")); err != nil {
		t.Fatal(err)
	}
	want("ann.txt", 2001, 2002)
	if _, err := zx.Mkdir(ctx, a, "/ann.d", 0o755); err != nil {
		t.Fatal(err)
	}
	want("ann.d", 2001, 2002)
	// Giving entries away is refused, and changes nothing.
	for _, d := range []zx.Dir{{zx.AUid: "0"}, {zx.AGid: "0"}, {zx.AUid: "2001", zx.AGid: "1"}} {
		_, err := zx.Wstat(ctx, a, "/ann.txt", d)
		if !errors.Is(err, zx.ErrNotPermit) || !strings.Contains(err.Error(), "act as uid 2001, gid 2002") {
			t.Errorf("wstat %v: %v", d, err)
		}
		r := <-a.Put(ctx, "/given.txt", zx.Dir{zx.AType: zx.TypeFile, zx.AUid: d[zx.AUid], zx.AGid: d[zx.AGid]}, 0, nil)
		if !errors.Is(r.Err, zx.ErrNotPermit) {
			t.Errorf("put %v: %v", d, r.Err)
		}
	}
	want("ann.txt", 2001, 2002)
	if _, err := os.Lstat(filepath.Join(dir, "given.txt")); err == nil {
		t.Error("a refused put created given.txt")
	}
	// Setting one's own ids is fine.
	if _, err := zx.Wstat(ctx, a, "/ann.txt", zx.Dir{zx.AUid: "2001", zx.AGid: "2002", zx.AMode: "04755"}); err != nil {
		t.Errorf("wstat to one's own ids: %v", err)
	}

	// The client's own ids stand for the key's (as a mount sets them on
	// what it creates), both ways.
	cctx := zx.WithCaller(ctx, zx.Caller{Uid: 1000, Gid: 1000})
	r := <-a.Put(cctx, "/mine.txt", zx.Dir{zx.AType: zx.TypeFile, zx.AUid: "1000", zx.AGid: "1000"}, 0, nil)
	if r.Err != nil || r.Dir[zx.AUid] != "1000" || r.Dir[zx.AGid] != "1000" {
		t.Errorf("put with the client's own ids: %v %v", r.Dir, r.Err)
	}
	want("mine.txt", 2001, 2002)
	if d, err := zx.Stat(ctx, a, "/mine.txt"); err != nil || d[zx.AUid] != "2001" {
		t.Errorf("stat without caller ids: %v %v", d, err)
	}
	if _, err := zx.Wstat(cctx, a, "/mine.txt", zx.Dir{zx.AUid: "1001"}); !errors.Is(err, zx.ErrNotPermit) {
		t.Errorf("wstat giving the file to another client uid: %v", err)
	}

	// A multi-user key: each request acts as the user it says, mapped.
	m := dialTLS(t, s, share).Tree("")
	for _, tc := range []struct {
		name     string
		c        *zx.Caller
		uid, gid uint32
	}{
		{"mapped", &zx.Caller{Uid: 1000, Gid: 100}, 3000, 3100},
		{"unmapped", &zx.Caller{Uid: 1234, Gid: 1235}, 1234, 1235},
		{"root", &zx.Caller{Uid: 0, Gid: 0}, 65534, 65534}, // squashed
		{"none", nil, 0, 0}, // the key has no ids: the server's own
	} {
		cctx := ctx
		if tc.c != nil {
			cctx = zx.WithCaller(ctx, *tc.c)
		}
		if _, err := zx.WriteFile(cctx, m, "/"+tc.name, nil, []byte("x")); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want(tc.name, tc.uid, tc.gid)
	}
	// The multi-user client sees its own ids in entries, and sets them.
	mctx := zx.WithCaller(ctx, zx.Caller{Uid: 1000, Gid: 100})
	if d, err := zx.Stat(mctx, m, "/mapped"); err != nil || d[zx.AUid] != "1000" || d[zx.AGid] != "100" {
		t.Errorf("stat of a mapped file through the multi-user key: %v %v", d, err)
	}
	if d, err := zx.Stat(mctx, m, "/unmapped"); err != nil || d[zx.AUid] != "1234" {
		t.Errorf("stat of an unmapped file: %v %v", d, err)
	}
	found := false
	for it := range m.Find(mctx, "/", zx.FindOpts{Pred: "name=mapped"}) {
		if it.Err != nil {
			t.Fatal(it.Err)
		}
		found = it.Dir[zx.AUid] == "1000" && it.Dir[zx.AGid] == "100"
	}
	if !found {
		t.Error("find does not map ids back to the client's")
	}
	if d, err := zx.Wstat(mctx, m, "/mapped", zx.Dir{zx.AUid: "1000", zx.AGid: "100"}); err != nil || d[zx.AUid] != "1000" {
		t.Errorf("wstat of one's own client ids: %v %v", d, err)
	}
	want("mapped", 3000, 3100)
	// A squashed root cannot give files to root: its 0 is nobody too.
	rctx := zx.WithCaller(ctx, zx.Caller{Uid: 0, Gid: 0})
	zx.Wstat(rctx, m, "/root", zx.Dir{zx.AUid: "0", zx.AGid: "0"})
	want("root", 65534, 65534)
	if _, err := zx.Wstat(rctx, m, "/root", zx.Dir{zx.AUid: "1"}); !errors.Is(err, zx.ErrNotPermit) {
		t.Errorf("squashed root giving a file to uid 1: %v", err)
	}
}
