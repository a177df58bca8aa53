package wan

import (
	"net"
	"time"
)

// reader reads from a socket and reports when the data arrived.
type reader interface {
	read(p []byte) (int, time.Time, error)
}

// plainReader stamps data with the time the read returned.
type plainReader struct{ c net.Conn }

func (r plainReader) read(p []byte) (int, time.Time, error) {
	n, err := r.c.Read(p)
	return n, time.Now(), err
}
