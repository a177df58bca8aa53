package wan

import (
	"net"
	"testing"
	"time"
)

// TestArrivalStamp checks that data is stamped with the time the kernel
// received it, not the time it was read.
func TestArrivalStamp(t *testing.T) {
	got, done := make(chan net.Conn, 1), make(chan struct{})
	defer close(done)
	addr := server(t, func(c net.Conn) { got <- c; <-done })
	c := dial(t, addr)
	s := <-got
	r := newReader(s)
	if _, ok := r.(*stampReader); !ok {
		t.Fatalf("no kernel timestamps: reader is %T", r)
	}
	// The kernel turns timestamping on asynchronously (a deferred static
	// key), so the first packets after the first SO_TIMESTAMPNS may come
	// without a stamp (and are then stamped when read): try a few times.
	var lag, late time.Duration
	for range 5 {
		sent := time.Now()
		c.Write([]byte("hello"))
		time.Sleep(30 * time.Millisecond)
		n, at, err := r.read(make([]byte, 10))
		if err != nil || n != 5 {
			t.Fatalf("read: %d, %v", n, err)
		}
		if lag, late = at.Sub(sent), time.Since(sent); lag >= 0 && lag < 5*time.Millisecond {
			break
		}
	}
	if lag < 0 || lag > 5*time.Millisecond {
		t.Errorf("data stamped %v after it was sent and read %v after", lag, late)
	}
	c.Close()
	if _, _, err := r.read(make([]byte, 10)); err == nil {
		t.Errorf("read after close: no error")
	}
}
