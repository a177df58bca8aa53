package deleg

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// holder records the recalls it is sent.
type holder struct {
	mu   sync.Mutex
	got  []string
	kick chan string
}

func newHolder() *holder { return &holder{kick: make(chan string, 16)} }

func (h *holder) Recall(tree, path string) {
	h.mu.Lock()
	h.got = append(h.got, tree+":"+path)
	h.mu.Unlock()
	h.kick <- tree + ":" + path
}

func waitDone(t *testing.T, d *Deleg) {
	t.Helper()
	select {
	case <-d.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("%s:%s never ended", d.Tree, d.Path)
	}
}

func TestGrantConflicts(t *testing.T) {
	tb := New(Config{})
	a, b := newHolder(), newHolder()
	if !g(tb, "main", "/d", "A", a) {
		t.Fatal("first grant refused")
	}
	if !g(tb, "main", "/d/x", "A", a) {
		t.Fatal("a path under the owner's own delegation refused")
	}
	if n := tb.Stats().Held; n != 1 {
		t.Fatalf("%d held, want 1: /d covers /d/x", n)
	}
	for _, p := range []string{"/d", "/d/y", "/"} {
		if g(tb, "main", p, "B", b) {
			t.Errorf("grant of %s to B over A's /d", p)
		}
	}
	if !g(tb, "other", "/d", "B", b) || !g(tb, "main", "/e", "B", b) {
		t.Fatal("grants that overlap nothing refused")
	}
	for _, c := range []struct {
		owner string
		s     Scope
		paths []string
		want  int
	}{
		{"B", Inside, []string{"/d"}, 1},
		{"B", Inside, []string{"/d/a/b"}, 1},
		{"B", Inside, []string{"/"}, 0},        // a stat or listing of the root
		{"B", Walk, []string{"/"}, 1},          // a find from the root
		{"B", Walk, []string{"/x", "/d/z"}, 1}, // a move into it
		{"A", Walk, []string{"/"}, 1},          // B's /e
		{"A", Inside, []string{"/d/q"}, 0},     // its own
		{"", Inside, []string{"/d"}, 1},        // a connection with no owner
	} {
		if got := tb.Conflicts("main", c.owner, c.s, c.paths...); len(got) != c.want {
			t.Errorf("Conflicts(%s, %v, %v) = %d, want %d", c.owner, c.s, c.paths, len(got), c.want)
		}
	}
}

func TestRecallReturn(t *testing.T) {
	tb := New(Config{Cooldown: time.Hour})
	a := newHolder()
	g(tb, "main", "/d", "A", a)
	ds := tb.Conflicts("main", "B", Inside, "/d/f")
	done := make(chan error, 1)
	go func() { done <- tb.Recall(context.Background(), ds) }()
	if got := <-a.kick; got != "main:/d" {
		t.Fatalf("recall of %s", got)
	}
	select {
	case err := <-done:
		t.Fatalf("Recall returned (%v) before the holder gave it back", err)
	default:
	}
	d := tb.Returning("main", "/d", "A")
	if d == nil {
		t.Fatal("Returning found nothing")
	}
	tb.Return(d)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if tb.Revoked(d) || tb.Stats().Returned != 1 || tb.Stats().Held != 0 {
		t.Fatalf("after return: revoked %v, %+v", tb.Revoked(d), tb.Stats())
	}
	// Recalled for another owner: not granted again during the cooldown.
	if g(tb, "main", "/d", "A", a) {
		t.Fatal("granted again at once after a recall")
	}
}

func TestLeaseRevokes(t *testing.T) {
	tb := New(Config{Lease: 50 * time.Millisecond})
	a := newHolder()
	g(tb, "main", "/d", "A", a)
	g(tb, "main", "/e", "A", a)
	tb.Detach("A", a)
	ds := tb.Conflicts("main", "B", Inside, "/d")
	if err := tb.Recall(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	if !tb.Revoked(ds[0]) {
		t.Fatal("a delegation whose holder is gone was not revoked")
	}
	select {
	case got := <-a.kick:
		t.Fatalf("recall %s sent to a lost connection", got)
	default:
	}
	// /e, not recalled, goes with the lease too.
	e := tb.Conflicts("main", "B", Inside, "/e")
	if len(e) == 1 {
		waitDone(t, e[0])
	}
	if s := tb.Stats(); s.Held != 0 || s.Revoked != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestReattachKeeps(t *testing.T) {
	tb := New(Config{Lease: 200 * time.Millisecond})
	a1, a2 := newHolder(), newHolder()
	g(tb, "main", "/d", "A", a1)
	tb.Detach("A", a1)
	tb.Attach("A", a2) // back within the lease
	time.Sleep(400 * time.Millisecond)
	if held := tb.Held("A"); !slices.Equal(held, []string{"main:/d"}) {
		t.Fatalf("held %v after coming back within the lease", held)
	}
	// A recall goes to the new connection.
	ds := tb.Conflicts("main", "B", Inside, "/d")
	go tb.Recall(context.Background(), ds)
	if got := <-a2.kick; got != "main:/d" {
		t.Fatalf("recall %s", got)
	}
	tb.Return(tb.Returning("main", "/d", "A"))
	waitDone(t, ds[0])
}

func TestUnansweredRecallRevokes(t *testing.T) {
	tb := New(Config{Lease: 50 * time.Millisecond})
	a := newHolder()
	g(tb, "main", "/d", "A", a)
	ds := tb.Conflicts("main", "B", Walk, "/")
	if err := tb.Recall(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	if !tb.Revoked(ds[0]) {
		t.Fatal("a recall never answered did not revoke")
	}
	if tb.Returning("main", "/d", "A") != nil {
		t.Fatal("a revoked delegation can be returned")
	}
}

func g(tb *Table, tree, p, owner string, h Holder) bool {
	ok, _, _ := tb.Grant(tree, p, owner, h)
	return ok
}

// TestRevocationTouched: the owner of a revoked delegation learns, when
// it asks again, what others changed under it since, once.
func TestRevocationTouched(t *testing.T) {
	tb := New(Config{Lease: 20 * time.Millisecond, Cooldown: time.Millisecond})
	a := newHolder()
	g(tb, "main", "/d", "A", a)
	tb.Detach("A", a)
	ds := tb.Conflicts("main", "B", Inside, "/d/x")
	if err := tb.Recall(context.Background(), ds); err != nil || !tb.Revoked(ds[0]) {
		t.Fatalf("not revoked: %v", err)
	}
	tb.Touch("main", "B", "/d/x")
	tb.Touch("main", "B", "/elsewhere")
	tb.Touch("main", "A", "/d/own")  // the owner's own
	time.Sleep(5 * time.Millisecond) // past the cooldown
	ok, held, rv := tb.Grant("main", "/d", "A", a)
	if !ok || held || rv == nil || rv.All || len(rv.Touched) != 1 || !rv.Touched["/d/x"] {
		t.Fatalf("Grant = %v %v %+v, want granted again with /d/x touched", ok, held, rv)
	}
	if _, held, rv := tb.Grant("main", "/d", "A", a); !held || rv != nil {
		t.Fatalf("second Grant: held %v %+v", held, rv)
	}
	if tb.Revocations() {
		t.Fatal("the revocation is kept after its owner was told")
	}
}
