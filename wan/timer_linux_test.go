package wan

import (
	"testing"
	"time"
)

// TestHRTimer checks the high-resolution timer the writers use on Linux:
// it never wakes early, and closing it wakes a sleeper at once.
func TestHRTimer(t *testing.T) {
	h := newHRTimer()
	if h == nil {
		t.Fatal("no timerfd: the writers would fall back to time.Timer")
	}
	for _, d := range []time.Duration{50 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond} {
		t0 := time.Now()
		if err := h.sleep(d); err != nil {
			t.Fatalf("sleep %v: %v", d, err)
		}
		if el := time.Since(t0); el < d {
			t.Errorf("sleep %v woke after %v", d, el)
		}
	}
	done := make(chan error, 1)
	go func() { done <- h.sleep(time.Hour) }()
	time.Sleep(20 * time.Millisecond) // let it block on the timer
	h.close()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("sleep on a closed timer: no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("close did not wake a sleep of an hour")
	}
}
