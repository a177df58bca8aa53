package main

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// A progress bar shows a transfer's bytes done and total, rate and time
// left on stderr, refreshed at most ten times a second. It shows only when
// stderr is a terminal, and only once the transfer has lasted half a
// second, so that short transfers and scripts see nothing. All methods
// work on a nil *progress, which shows nothing.
type progress struct {
	done  atomic.Int64
	total atomic.Int64 // 0: unknown
	start time.Time
	stop  chan struct{}
	wg    sync.WaitGroup
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool {
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// newProgress starts a progress bar for a transfer of total bytes (0 if
// not known yet), or returns nil when stderr is not a terminal.
func newProgress(total int64) *progress {
	if !isTerminal(os.Stderr) {
		return nil
	}
	p := &progress{start: time.Now(), stop: make(chan struct{})}
	p.total.Store(total)
	p.wg.Add(1)
	go p.loop()
	return p
}

// add counts n more bytes done.
func (p *progress) add(n int64) {
	if p != nil {
		p.done.Add(n)
	}
}

// grow adds n bytes to the total.
func (p *progress) grow(n int64) {
	if p != nil {
		p.total.Add(n)
	}
}

// finish clears the bar.
func (p *progress) finish() {
	if p == nil {
		return
	}
	close(p.stop)
	p.wg.Wait()
}

func (p *progress) loop() {
	defer p.wg.Done()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	shown := false
	for {
		select {
		case <-p.stop:
			if shown {
				fmt.Fprint(os.Stderr, "\r\033[K")
			}
			return
		case <-t.C:
			el := time.Since(p.start)
			if el < 500*time.Millisecond {
				continue
			}
			shown = true
			fmt.Fprintf(os.Stderr, "\r\033[K%s", p.line(el))
		}
	}
}

// line formats the bar after el of transfer.
func (p *progress) line(el time.Duration) string {
	done, total := p.done.Load(), p.total.Load()
	rate := float64(done) / el.Seconds()
	s := fmtBytes(done)
	if total > 0 {
		s += " / " + fmtBytes(total)
		if total >= done {
			s = fmt.Sprintf("%3d%% %s", done*100/max(total, 1), s)
		}
	}
	s += fmt.Sprintf("  %s/s", fmtBytes(int64(rate)))
	if total > done && rate > 0 {
		eta := time.Duration(float64(total-done) / rate * float64(time.Second))
		s += "  ETA " + eta.Round(time.Second).String()
	}
	return s
}
