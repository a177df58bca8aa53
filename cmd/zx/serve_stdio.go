package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/server"
)

// serveStdio serves one connection on standard input and output: the
// server end of the ssh transport (ssh://HOST/DIR runs "zx serve --stdio
// DIR" on HOST). Logs go to standard error, which ssh passes back to the
// client. It returns when the connection ends: the client closed it (ssh
// ended), or a signal asked for a graceful stop.
func serveStdio(srv *server.Server, log *slog.Logger) int {
	in, out, err := stdioFiles()
	if err != nil {
		fmt.Fprintf(os.Stderr, "zx serve: --stdio: %v\n", err)
		return exitFail
	}
	nc := mux.Pipe(in, out, "stdio", "stdio")
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	done := make(chan struct{})
	go func() {
		srv.ServeConn(nc)
		close(done)
	}()
	log.Info("serving standard input and output")
	select {
	case <-done:
		return exitOK
	case <-ctx.Done():
	}
	stop()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		fmt.Fprintf(os.Stderr, "zx serve: requests still in flight after 10s were cut off\n")
		return exitFail
	}
	return exitOK
}

// stdioFiles takes standard input and output for the protocol: it moves
// them to new descriptors in non-blocking mode (so that closing them ends
// a blocked read) and points descriptors 0 and 1 at /dev/null, so that
// nothing else in the process can write into the protocol stream by
// mistake.
func stdioFiles() (in, out *os.File, err error) {
	devnull, err := unix.Open(os.DevNull, unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	defer unix.Close(devnull)
	var fds [2]int
	for i := range fds {
		fd, err := unix.FcntlInt(uintptr(i), unix.F_DUPFD_CLOEXEC, 3)
		if err != nil {
			return nil, nil, fmt.Errorf("standard %s: %v", []string{"input", "output"}[i], err)
		}
		if err := unix.Dup2(devnull, i); err != nil {
			return nil, nil, err
		}
		unix.SetNonblock(fd, true)
		fds[i] = fd
	}
	return os.NewFile(uintptr(fds[0]), "stdin"), os.NewFile(uintptr(fds[1]), "stdout"), nil
}
