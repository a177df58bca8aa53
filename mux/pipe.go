package mux

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Pipe returns a net.Conn that reads from r and writes to w: a connection
// over a process's standard input and output, or over the pipes of a child
// process (the ssh transport). Close closes both; CloseWrite closes w only,
// so the peer sees the end of its input. Deadlines are not supported:
// mux does not use them.
func Pipe(r io.ReadCloser, w io.WriteCloser, local, remote string) net.Conn {
	return &pipeConn{r: r, w: w, local: pipeAddr(local), remote: pipeAddr(remote)}
}

type pipeConn struct {
	r             io.ReadCloser
	w             io.WriteCloser
	local, remote pipeAddr
	closeW        sync.Once
	closeR        sync.Once
}

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }

func (p *pipeConn) Read(b []byte) (int, error)  { return p.r.Read(b) }
func (p *pipeConn) Write(b []byte) (int, error) { return p.w.Write(b) }

func (p *pipeConn) CloseWrite() error {
	var err error
	p.closeW.Do(func() { err = p.w.Close() })
	return err
}

func (p *pipeConn) Close() error {
	werr := p.CloseWrite()
	var rerr error
	p.closeR.Do(func() { rerr = p.r.Close() })
	return errors.Join(werr, rerr)
}

func (p *pipeConn) LocalAddr() net.Addr  { return p.local }
func (p *pipeConn) RemoteAddr() net.Addr { return p.remote }

var errNoDeadline = errors.New("pipe: deadlines not supported")

func (p *pipeConn) SetDeadline(time.Time) error      { return errNoDeadline }
func (p *pipeConn) SetReadDeadline(time.Time) error  { return errNoDeadline }
func (p *pipeConn) SetWriteDeadline(time.Time) error { return errNoDeadline }
