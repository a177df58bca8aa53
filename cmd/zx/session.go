package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
)

// A session is one run of a client command: its context (cancelled by
// Ctrl-C, SIGTERM or --timeout, which cancels the requests on the wire), its
// connections, one per server, and its output.
type session struct {
	cmd   string
	opts  commonFlags
	ctx   context.Context
	stop  func()
	start time.Time
	conns map[string]*client.Conn
	out   *bufio.Writer
}

// newSession starts a session for command cmd.
func newSession(cmd string, opts commonFlags) *session {
	ctx, stopSig := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stop := stopSig
	if opts.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.timeout)
		stop = func() { cancel(); stopSig() }
	}
	return &session{
		cmd:   cmd,
		opts:  opts,
		ctx:   ctx,
		stop:  stop,
		start: time.Now(),
		conns: make(map[string]*client.Conn),
		out:   bufio.NewWriterSize(os.Stdout, 64<<10),
	}
}

// close flushes the output, prints the statistics if asked to, and closes
// the connections. It returns code, or exitFail if the output could not be
// written.
func (s *session) close(code int) int {
	if err := s.out.Flush(); err != nil && code == exitOK {
		s.errorf("writing output: %v", err)
		code = exitFail
	}
	if s.opts.stats {
		s.printStats()
	}
	for _, c := range s.conns {
		c.Close()
	}
	s.stop()
	return code
}

// connStats are the --stats figures.
type connStats struct {
	RoundTrips int64   `json:"roundTrips"`
	BytesIn    int64   `json:"bytesIn"`
	BytesOut   int64   `json:"bytesOut"`
	Requests   int64   `json:"requests"`
	ElapsedMs  float64 `json:"elapsedMs"`
	// Bytes compression kept off the wire (zstd), received and sent.
	ZstdSavedIn  int64 `json:"zstdSavedIn,omitempty"`
	ZstdSavedOut int64 `json:"zstdSavedOut,omitempty"`
}

func (s *session) stats() connStats {
	var st connStats
	for _, c := range s.conns {
		cs := c.Stats()
		st.RoundTrips += cs.RoundTrips
		st.BytesIn += cs.BytesIn
		st.BytesOut += cs.BytesOut
		st.Requests += cs.Streams
		st.ZstdSavedIn += cs.SavedIn
		st.ZstdSavedOut += cs.SavedOut
	}
	st.ElapsedMs = float64(time.Since(s.start).Microseconds()) / 1000
	return st
}

func (s *session) printStats() {
	st := s.stats()
	if s.opts.json {
		b, _ := json.Marshal(map[string]connStats{"stats": st})
		fmt.Fprintf(os.Stderr, "%s\n", b)
		return
	}
	var zstd string
	if st.ZstdSavedIn > 0 || st.ZstdSavedOut > 0 {
		zstd = fmt.Sprintf(" (zstd saved %s in, %s out)", fmtBytes(st.ZstdSavedIn), fmtBytes(st.ZstdSavedOut))
	}
	fmt.Fprintf(os.Stderr, "zx %s: %s waited for, %s, %s in, %s out%s, %s\n",
		s.cmd, plural(st.RoundTrips, "round trip"), plural(st.Requests, "request"), fmtBytes(st.BytesIn), fmtBytes(st.BytesOut), zstd,
		roundDuration(time.Duration(st.ElapsedMs*float64(time.Millisecond))))
}

// errorf prints "zx CMD: message" to stderr.
func (s *session) errorf(format string, args ...any) {
	s.out.Flush() // keep stdout and stderr in order on a terminal
	fmt.Fprintf(os.Stderr, "zx %s: %s\n", s.cmd, fmt.Sprintf(format, args...))
}

// fail reports err, with advice where there is some, and returns exitFail.
func (s *session) fail(err error) int {
	if s.ctx.Err() != nil {
		// Cut short: say why, not how the request noticed.
		why := "interrupted"
		if errors.Is(s.ctx.Err(), context.DeadlineExceeded) {
			why = fmt.Sprintf("gave up after --timeout %v", s.opts.timeout)
		}
		var ze *zx.Error
		if errors.As(err, &ze) && ze.Path != "" {
			why = ze.Path + ": " + why
		}
		s.errorf("%s", why)
		return exitFail
	}
	s.errorf("%s", explain(err))
	return exitFail
}

// parse parses a zx:// location.
func (s *session) parse(arg string) (client.Location, error) {
	loc, err := client.ParseLocation(arg)
	if err != nil {
		if !strings.HasPrefix(arg, "zx://") && !strings.HasPrefix(arg, "ssh://") {
			return loc, fmt.Errorf("%q is not a zx:// or ssh:// location (zx://HOST[:PORT]/PATH or ssh://[USER@]HOST[:PORT]/DIR)", arg)
		}
		return loc, err
	}
	return loc, nil
}

// tree returns the tree of loc, dialling its server on first use. It does
// not talk to the server otherwise (no attach): a missing tree shows in
// the first request's error, and no round trip is spent.
func (s *session) tree(loc client.Location) (*client.Tree, error) {
	c, ok := s.conns[loc.Addr]
	if !ok {
		var err error
		opts, err := clientOptions(loc, s.opts.sec)
		if err != nil {
			return nil, err
		}
		opts.Mux.Compression = s.opts.compress.mode
		c, err = dial(s.ctx, loc, s.opts.ssh, opts)
		if err != nil {
			return nil, err
		}
		s.conns[loc.Addr] = c
	}
	return c.Tree(loc.Tree), nil
}

// dialError explains a failure to connect to addr.
func dialError(addr string, err error) error {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot connect to %s: connection refused; is `zx serve` running at %s?", addr, addr)
	case errors.Is(err, context.DeadlineExceeded), zx.KindOf(err) == zx.ErrTimeout:
		return fmt.Errorf("cannot connect to %s: timed out; check the host and port, and that no firewall is in the way", addr)
	case errors.Is(err, context.Canceled), zx.KindOf(err) == zx.ErrCanceled:
		return fmt.Errorf("cannot connect to %s: interrupted", addr)
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return fmt.Errorf("cannot connect to %s: cannot resolve %s: %v", addr, dnsErr.Name, dnsErr.Err)
	}
	var ze *zx.Error
	if errors.As(err, &ze) && ze.Kind == zx.ErrAuth && ze.Msg != "" {
		// TLS and key checks explain themselves.
		return fmt.Errorf("cannot connect to %s: %s", addr, ze.Msg)
	}
	return fmt.Errorf("cannot connect to %s: %v", addr, err)
}

// explain adds advice to the errors that have some.
func explain(err error) string {
	msg := err.Error()
	switch zx.KindOf(err) {
	case zx.ErrCanceled:
		if !strings.Contains(msg, "cancel") {
			msg += " (cancelled)"
		}
	case zx.ErrReadOnly:
		if strings.Contains(msg, "read-only access") {
			return msg
		}
		return msg + " (the tree is served read-only: see zx serve --ro)"
	case zx.ErrIO:
		if strings.Contains(msg, "connection") || strings.Contains(msg, "EOF") {
			return msg + " (the connection to the server was lost)"
		}
	case zx.ErrNotEmpty:
		if ze := (*zx.Error)(nil); errors.As(err, &ze) && ze.Op == "remove" {
			return msg + " (zx rm -r removes a directory with its contents)"
		}
	}
	return msg
}

// emit writes v as one line of JSON.
func (s *session) emit(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	s.out.Write(b)
	s.out.WriteByte('\n')
}

// println writes one line of text output.
func (s *session) println(a ...any) { fmt.Fprintln(s.out, a...) }

// printf writes text output.
func (s *session) printf(format string, a ...any) { fmt.Fprintf(s.out, format, a...) }

// fmtBytes formats a byte count for people.
func fmtBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// roundDuration rounds d to 3 or 4 significant digits, for people.
func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}
