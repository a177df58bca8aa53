// Package testbed sets up what zx's benchmark programs (zxbench,
// replbench, zstdbench) measure with: the Go source tree as the usual
// workload, and a zx server of a local directory on a loopback port, for
// the program to reach directly or through the WAN emulator (package wan).
package testbed

import (
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/server"
)

// GoSource returns the directory elem of the Go distribution's source
// tree, $(go env GOROOT)/src/elem...: a large, real tree that every
// machine with Go has.
func GoSource(elem ...string) (string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOROOT failed: %v", err)
	}
	return filepath.Join(append([]string{strings.TrimSpace(string(out)), "src"}, elem...)...), nil
}

// Server is a zx server of one local directory (package lfs) on a
// loopback port.
type Server struct {
	Addr   string // where it listens, host:port
	Finder bool   // whether the tree runs find and findget itself (zx.Finder)

	fs   *lfs.FS
	srv  *server.Server
	done chan struct{} // closed when Serve returns
}

// Serve serves dir, with lfs options opts and server configuration cfg,
// on a port of 127.0.0.1 until Close.
func Serve(dir string, opts lfs.Options, cfg server.Config) (*Server, error) {
	fs, err := lfs.New(dir, opts)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(map[string]zx.Tree{"main": fs}, "main", cfg)
	if err != nil {
		fs.Close()
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		fs.Close()
		return nil, err
	}
	_, finder := any(fs).(zx.Finder)
	s := &Server{Addr: l.Addr().String(), Finder: finder, fs: fs, srv: srv, done: make(chan struct{})}
	go func() { srv.Serve(l); close(s.done) }()
	return s, nil
}

// Close stops the server, waiting a few seconds at most for its
// connections to end, and closes the tree.
func (s *Server) Close() error {
	s.srv.Close()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
	return s.fs.Close()
}
