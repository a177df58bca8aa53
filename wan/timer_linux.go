package wan

import (
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// hrTimer sleeps on a timerfd read through the runtime's network poller:
// the kernel's high-resolution timers wake it within tens of microseconds
// of the time asked for, where a time.Timer is rounded up to a millisecond
// (the poller's epoll timeout) and overshoots by hundreds of microseconds
// more on a virtual machine. The sleeping goroutine holds no thread. Close
// interrupts a sleep.
type hrTimer struct {
	f  *os.File
	rc syscall.RawConn
	b  [8]byte
}

// newHRTimer returns a high-resolution timer, or nil if the system has none
// to give (the caller then uses time.Timer).
func newHRTimer() *hrTimer {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), "timerfd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil
	}
	return &hrTimer{f: f, rc: rc}
}

// sleep sleeps for d; it fails if the timer is closed.
func (h *hrTimer) sleep(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	var serr error
	err := h.rc.Control(func(fd uintptr) {
		serr = unix.TimerfdSettime(int(fd), 0, &unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}, nil)
	})
	if err == nil {
		err = serr
	}
	if err == nil {
		_, err = h.f.Read(h.b[:])
	}
	return err
}

func (h *hrTimer) close() { h.f.Close() }
