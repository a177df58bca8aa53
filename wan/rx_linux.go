package wan

import (
	"io"
	"net"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// stampReader reads from a TCP socket and reports when the kernel received
// the data (SO_TIMESTAMPNS), not when the reader goroutine got to run: on a
// loaded machine the wake-up of the reader can lag by milliseconds, and that
// lag must not be added to the emulated latency.
type stampReader struct {
	rc   syscall.RawConn
	fn   func(fd uintptr) bool
	p    []byte
	oob  []byte
	n    int
	oobn int
	err  error
}

// newReader returns a reader for c that timestamps arrivals, with kernel
// timestamps where available.
func newReader(c net.Conn) reader {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return plainReader{c}
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return plainReader{c}
	}
	var serr error
	err = rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1)
	})
	if err != nil || serr != nil {
		return plainReader{c}
	}
	r := &stampReader{rc: rc, oob: make([]byte, unix.CmsgSpace(int(unsafe.Sizeof(unix.Timespec{}))))}
	r.fn = func(fd uintptr) bool {
		r.n, r.oobn, _, _, r.err = unix.Recvmsg(int(fd), r.p, r.oob, 0)
		return r.err != unix.EAGAIN
	}
	return r
}

func (r *stampReader) read(p []byte) (int, time.Time, error) {
	r.p = p
	err := r.rc.Read(r.fn)
	now := time.Now()
	r.p = nil
	if err == nil && r.err != nil {
		err = &net.OpError{Op: "read", Net: "tcp", Err: r.err}
	}
	if err != nil {
		return 0, now, err
	}
	if r.n == 0 {
		return 0, now, io.EOF
	}
	return r.n, r.stamp(now), nil
}

// stamp returns the arrival time given by the control message, converted
// from the kernel's wall clock to a time with a monotonic reading, or now.
func (r *stampReader) stamp(now time.Time) time.Time {
	oob := r.oob[:r.oobn]
	for len(oob) >= unix.SizeofCmsghdr {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		if h.Len < unix.SizeofCmsghdr || int(h.Len) > len(oob) {
			break
		}
		if h.Level == unix.SOL_SOCKET && h.Type == unix.SCM_TIMESTAMPNS &&
			int(h.Len) >= unix.CmsgLen(int(unsafe.Sizeof(unix.Timespec{}))) {
			ts := (*unix.Timespec)(unsafe.Pointer(&oob[unix.CmsgLen(0)]))
			lag := now.UnixNano() - ts.Nano()
			// Ignore nonsense, e.g. after the wall clock was stepped.
			if lag > 0 && lag < int64(time.Second) {
				return now.Add(-time.Duration(lag))
			}
			return now
		}
		oob = oob[unix.CmsgSpace(int(h.Len)-unix.CmsgLen(0)):]
	}
	return now
}
