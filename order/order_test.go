package order

import (
	"context"
	"testing"
	"time"
)

func TestConflictsWaitInOrder(t *testing.T) {
	var q Queue
	ctx := context.Background()
	w1 := q.Enter(true, "/a/b")
	r1 := q.Enter(false, "/a")     // below a pending write: waits
	r2 := q.Enter(false, "/c")     // unrelated: runs
	r3 := q.Enter(false, "/a/b/c") // under the write: waits
	w2 := q.Enter(true, "/a/b")    // after w1 and r3

	if err := r2.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	r2.Done()

	waited := func(o *Op) bool {
		c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		return o.Wait(c) != nil
	}
	if !waited(r1) || !waited(r3) || !waited(w2) {
		t.Fatal("a request that conflicts with a pending write did not wait")
	}
	w1.Done()
	if err := r1.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if !waited(w2) { // still waits for r3
		t.Fatal("write ran before an earlier conflicting read was done")
	}
	r3.Done()
	r1.Done()
	if err := w2.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	w2.Done()
	w2.Done()
	if n := q.Pending(); n != 0 {
		t.Fatalf("pending = %d, want 0", n)
	}
}

func TestReadsDoNotWaitForReads(t *testing.T) {
	var q Queue
	a := q.Enter(false, "/")
	b := q.Enter(false, "/x")
	if len(b.deps) != 0 {
		t.Fatal("read waits for a read")
	}
	a.Done()
	b.Done()
}
