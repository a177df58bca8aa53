package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/dump"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/server"
)

// defaultTree is the name of the tree zx serve exports DIR as.
const defaultTree = "main"

// dumpTree is the name of the tree zx serve --dump exports a store as.
const dumpTree = "dump"

func serveCommand() command {
	return command{
		name:    "serve",
		args:    "[--listen ADDR | --stdio] [--tree NAME=DIR]... [--dump STORE] [--ro] [--log-level LEVEL] [DIR]",
		summary: "export local directories",
		help: "Serve exports the directory DIR (default: the current directory) as the server's default tree, " +
			"\"" + defaultTree + "\", and each --tree NAME=DIR as the tree NAME (zx://HOST/@NAME/PATH). " +
			"--dump STORE exports a zx dump store, read-only, as the tree \"dump\" " +
			"(zx://HOST/@dump/TREE/YYYY/MMDD/PATH), to browse or mount the past. " +
			"No request can reach outside an exported directory, and symbolic links are never followed. " +
			"Until this build has TLS and client keys, it listens on loopback addresses only: " +
			"reach it from other machines through ssh port forwarding. " +
			"When it is ready it prints \"zx: serving DIR at zx://ADDR/\" to stderr. " +
			"SIGINT or SIGTERM stop it gracefully: requests in flight get up to 10 seconds to finish. " +
			"With --stdio it serves one connection on its standard input and output instead, and exits when " +
			"that ends: ssh://HOST/DIR locations run \"zx serve --stdio DIR\" on HOST through ssh.",
		example: "zx serve --listen 127.0.0.1:5640 --tree src=$HOME/src --ro $HOME/docs",
		run:     runServe,
	}
}

func runServe(args []string) int {
	c := serveCommand()
	fs := newFlagSet(c)
	listen := fs.String("listen", "127.0.0.1:"+server.DefaultPort, "address to listen on (loopback only)")
	ro := fs.Bool("ro", false, "export every tree read-only")
	stdio := fs.Bool("stdio", false, "serve one connection on standard input and output (what ssh:// locations run), then exit")
	level := fs.String("log-level", "warn", "log level: debug, info, warn or error")
	dumpStore := fs.String("dump", "", "also export the dump store `STORE`, read-only, as the tree \"dump\"")
	trees := map[string]string{}
	var order []string
	fs.Func("tree", "also export DIR as the tree NAME (`NAME=DIR`; repeatable)", func(v string) error {
		name, dir, ok := strings.Cut(v, "=")
		switch {
		case !ok || name == "" || dir == "":
			return errors.New("want NAME=DIR")
		case strings.ContainsAny(name, "/@") || name == defaultTree || name == dumpTree:
			return fmt.Errorf("bad tree name %q (no / or @; %q is the default tree)", name, defaultTree)
		case trees[name] != "":
			return fmt.Errorf("tree %q given twice", name)
		}
		trees[name] = dir
		order = append(order, name)
		return nil
	})
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) > 1 {
		return usageError(c, "too many arguments: one DIR at most (export others with --tree NAME=DIR)")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return usageError(c, fmt.Sprintf("bad --log-level %q: want debug, info, warn or error", *level))
	}
	dir := "."
	if len(rest) == 1 {
		dir = rest[0]
	}
	trees[defaultTree] = dir
	order = append([]string{defaultTree}, order...)

	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "zx serve: "+format+"\n", a...)
		return exitFail
	}
	if *stdio {
		listenSet := false
		fs.Visit(func(f *flag.Flag) { listenSet = listenSet || f.Name == "listen" })
		if listenSet {
			return usageError(c, "--stdio and --listen exclude each other")
		}
	} else if err := checkLoopback(*listen); err != nil {
		return fail("%v", err)
	}
	exported := make(map[string]zx.Tree)
	for _, name := range order {
		abs, err := filepath.Abs(trees[name])
		if err == nil {
			var st os.FileInfo
			if st, err = os.Stat(abs); err == nil && !st.IsDir() {
				err = fmt.Errorf("%s is not a directory", abs)
			}
		}
		var t *lfs.FS
		if err == nil {
			t, err = lfs.New(abs, lfs.Options{ReadOnly: *ro})
		}
		if err != nil {
			return fail("cannot export %s: %v", trees[name], err)
		}
		defer t.Close()
		trees[name] = abs
		exported[name] = t
	}
	if *dumpStore != "" {
		dfs, err := dump.Open(*dumpStore)
		if err != nil {
			return fail("cannot export the dump store %s: %v", *dumpStore, err)
		}
		exported[dumpTree] = dfs
		trees[dumpTree] = *dumpStore
		order = append(order, dumpTree)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	srv, err := server.New(exported, defaultTree, server.Config{Logger: log})
	if err != nil {
		return fail("%v", err)
	}
	if *stdio {
		return serveStdio(srv, log)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return fail("cannot listen on %s: address in use; is another zx serve running? (choose another port with --listen)", *listen)
		}
		return fail("cannot listen on %s: %v", *listen, err)
	}
	if err := checkLoopback(l.Addr().String()); err != nil {
		l.Close()
		return fail("%v", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	for _, name := range order[1:] {
		log.Info("exporting", "tree", name, "dir", trees[name])
	}
	log.Info("serving", "read-only", *ro)
	fmt.Fprintf(os.Stderr, "zx: serving %s at zx://%s/\n", trees[defaultTree], l.Addr())

	select {
	case err := <-served:
		return fail("%v", err)
	case <-ctx.Done():
	}
	stop() // a second Ctrl-C kills at once
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fail("requests still in flight after 10s were cut off")
	}
	return exitOK
}

// checkLoopback refuses addresses that are not loopback ones: without TLS
// and client keys, a server must not be reachable from other machines.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad address %q: %v (want HOST:PORT, e.g. 127.0.0.1:5640)", addr, err)
	}
	refuse := fmt.Errorf("refusing to listen on %s: listening beyond loopback requires TLS and client keys, "+
		"which this build does not have yet; use ssh port forwarding or listen on 127.0.0.1", addr)
	if host == "" {
		return refuse
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return fmt.Errorf("cannot resolve %s: %v", host, err)
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	if len(ips) == 0 {
		return refuse
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return refuse
		}
	}
	return nil
}
