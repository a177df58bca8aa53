package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"syscall"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/auth"
	"github.com/zxfs/zx/dump"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/server"
)

// defaultTree is the name of the tree zx serve exports DIR as.
const defaultTree = "main"

// dumpTree is the name of the tree zx serve --dump exports a store as.
const dumpTree = "dump"

func serveCommand() command {
	return command{
		name:    "serve",
		args:    "[--listen ADDR | --stdio] [--tree NAME=DIR]... [--dump STORE] [--ro] [--tls] [--authorized FILE] [--state DIR] [--log-level LEVEL] [limits] [DIR]",
		summary: "export local directories",
		help: "Serve exports the directory DIR (default: the current directory) as the server's default tree, " +
			"\"" + defaultTree + "\", and each --tree NAME=DIR as the tree NAME (zx://HOST/@NAME/PATH). " +
			"--dump STORE exports a zx dump store, read-only, as the tree \"dump\" " +
			"(zx://HOST/@dump/TREE/YYYY/MMDD/PATH), to browse or mount the past. " +
			"No request can reach outside an exported directory, and symbolic links are never followed. " +
			"On loopback it speaks plain zx unless --tls is given. On any other address it speaks " +
			"TLS 1.3 only and serves only clients whose keys the --authorized file lists, each with " +
			"the trees and rights (ro or rw) given there (docs/security.md); it refuses to start " +
			"without that file. The file is read again when it changes; a line in it that does not parse grants " +
			"nothing while the others keep working, and is logged (file:line and why) at level error, at start and " +
			"after each change. Its own key and self-signed certificate are made on first start in " +
			"the --state directory; it prints the key's fingerprint, which clients pin (zx ls --trust " +
			"FINGERPRINT ...). With --cert and --key it presents a certificate a CA signed instead " +
			"(clients then use --ca). " +
			"When it is ready it prints \"zx: serving DIR at zx://ADDR/\" to stderr. " +
			"SIGINT or SIGTERM stop it gracefully: requests in flight get up to 10 seconds to finish. " +
			"With --stdio it serves one connection on its standard input and output instead, and exits when " +
			"that ends: ssh://HOST/DIR locations run \"zx serve --stdio DIR\" on HOST through ssh, which " +
			"authenticates and encrypts (no TLS then). " +
			"Limits keep one client from starving the others: connections beyond --max-conns are refused, " +
			"memory is bounded per connection (--max-conn-buffer) and for the server (--max-memory): what it buffers, " +
			"what each request being served costs and the data it reads ahead, and what connections cost (640 KiB each, at most half of it); " +
			"requests wait for room in order, a reply is read from disk only as fast as its client takes it, " +
			"and the server's resident memory stays within --max-memory plus 64 MiB; " +
			"each connection's requests are paced to --request-rate, a reply the client does not read for " +
			"--stall-timeout is abandoned, and connections idle for --idle-timeout are closed. " +
			"A client that hits a limit is told which one. " +
			"Unless the environment sets GOGC, it runs with GOGC=400: a little more memory for a fifth less CPU per entry on a large find.",
		exit: "0 stopped by SIGINT or SIGTERM (with --stdio: the connection ended) with every request finished; 1 it could not start (a directory it cannot export, an address it cannot listen on, no authorized file beyond loopback) or cut off requests still running after 10 seconds; 2 bad usage.",
		example: "zx serve --listen 127.0.0.1:5640 --tree src=$HOME/src --ro $HOME/docs\n" +
			"zx serve --listen 0.0.0.0:5640 --authorized /etc/zx/authorized /srv/project",
		run: runServe,
	}
}

func runServe(args []string) int {
	c := serveCommand()
	fs := newFlagSet(c)
	listen := fs.String("listen", "127.0.0.1:"+server.DefaultPort, "`ADDR` to listen on; anything but loopback means TLS and client keys")
	forceTLS := fs.Bool("tls", false, "speak TLS and require authorized client keys on loopback too")
	state := fs.String("state", "", "`DIR` keeping the server's key and certificate (default $XDG_CONFIG_HOME/zx/server or ~/.config/zx/server)")
	authorized := fs.String("authorized", "", "`FILE` of client keys that may connect, with their users, trees and rights (default DIR/authorized in --state)")
	certFile := fs.String("cert", "", "present the certificate chain in `FILE` (PEM, e.g. signed by a CA) instead of the self-signed one")
	keyFile := fs.String("key", "", "the private key of --cert (PEM `FILE`)")
	ro := fs.Bool("ro", false, "export every tree read-only")
	var compress compressFlag
	compress.register(fs)
	stdio := fs.Bool("stdio", false, "serve one connection on standard input and output (what ssh:// locations run), then exit")
	level := fs.String("log-level", "warn", "log `LEVEL`: debug, info, warn or error")
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
	maxConns := fs.Int("max-conns", 1024, "connections served at once; more are refused")
	maxStreams := fs.Int("max-streams", 4096, "requests in flight per connection")
	maxMemory, maxConnBuf := int64(1<<30), int64(64<<20)
	fs.Func("max-memory", "`BYTES` of memory all connections may hold together: what they cost, buffer and work on (default 1GiB)", func(v string) error {
		n, err := parseSize(v)
		maxMemory = n
		return err
	})
	fs.Func("max-conn-buffer", "`BYTES` of memory one connection may hold each way: what it buffers and works on (default 64MiB)", func(v string) error {
		n, err := parseSize(v)
		maxConnBuf = n
		return err
	})
	rate := fs.Float64("request-rate", 10000, "requests per second per connection; 0: no limit")
	burst := fs.Int("request-burst", 0, "requests a connection may make at once above the rate (default: as many as --request-rate)")
	idle := fs.Duration("idle-timeout", 30*time.Minute, "close connections with no request for this long; 0: never")
	stall := fs.Duration("stall-timeout", 2*time.Minute, "abandon a reply the client does not read for this long; 0: never")
	keepalive := fs.Duration("keepalive", 15*time.Second, "ping a client silent for this long")
	peerTimeout := fs.Duration("peer-timeout", 20*time.Second, "close a connection whose client stays silent this long after a ping")
	writeTimeout := fs.Duration("write-timeout", time.Minute, "close a connection whose client takes no data for this long; 0: never")
	lease := fs.Duration("delegation-lease", 15*time.Second, "how long a client's delegations outlive its lost connection, or a recall it does not answer: the longest another client waits for it")
	noDeleg := fs.Bool("no-delegations", false, "grant no delegations (clients' closes then always wait for the server)")
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	switch {
	case *maxConns <= 0 || *maxStreams <= 0 || maxMemory <= 0 || maxConnBuf <= 0:
		return usageError(c, "--max-conns, --max-streams, --max-memory and --max-conn-buffer must be positive")
	case *rate < 0 || *burst < 0 || *idle < 0 || *stall < 0 || *writeTimeout < 0:
		return usageError(c, "--request-rate, --request-burst, --idle-timeout, --stall-timeout and --write-timeout must not be negative")
	case *keepalive <= 0 || *peerTimeout <= 0 || *lease <= 0:
		return usageError(c, "--keepalive, --peer-timeout and --delegation-lease must be positive")
	}
	cfg := server.Config{
		MaxConns:     *maxConns,
		MaxMemory:    maxMemory,
		RequestRate:  *rate,
		RequestBurst: *burst,
		DelegLease:   *lease,
		NoDeleg:      *noDeleg,
		Mux: mux.Config{
			MaxStreams:   *maxStreams,
			MaxBuffer:    int(min(maxConnBuf, 1<<40)),
			IdleTimeout:  *idle,
			StallTimeout: *stall,
			KeepAlive:    *keepalive,
			Timeout:      *peerTimeout,
			WriteTimeout: *writeTimeout,
		},
	}
	// Zero means "no limit" on the command line, "default" in the configs.
	if *rate == 0 {
		cfg.RequestRate = -1
	}
	if *idle == 0 {
		cfg.Mux.IdleTimeout = -1
	}
	if *stall == 0 {
		cfg.Mux.StallTimeout = -1
	}
	if *writeTimeout == 0 {
		cfg.Mux.WriteTimeout = -1
	}
	if len(rest) > 1 {
		return usageError(c, "too many arguments: one DIR at most (export others with --tree NAME=DIR)")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		return usageError(c, fmt.Sprintf("bad --log-level %q: want debug, info, warn or error", *level))
	}
	serverGC(maxMemory)
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
	loopback := true // --stdio: ssh authenticates and encrypts
	if *stdio {
		listenSet := false
		fs.Visit(func(f *flag.Flag) { listenSet = listenSet || f.Name == "listen" || f.Name == "tls" })
		if listenSet {
			return usageError(c, "--stdio excludes --listen and --tls (ssh authenticates and encrypts)")
		}
	} else {
		var err error
		if loopback, err = isLoopback(*listen); err != nil {
			return fail("%v", err)
		}
	}
	if (*certFile == "") != (*keyFile == "") {
		return usageError(c, "--cert and --key go together")
	}
	useTLS := *forceTLS || !loopback
	var tlsCfg *tls.Config
	var authz *auth.Authorized
	var fingerprint string
	if useTLS {
		var msg string
		tlsCfg, authz, fingerprint, msg = serverSecurity(*listen, *state, *authorized, *certFile, *keyFile)
		if msg != "" {
			return fail("%s", msg)
		}
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
	logLevel := new(slog.LevelVar)
	logLevel.Set(lvl)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel}))
	cfg.Logger, cfg.LogLevel, cfg.TLS, cfg.Authorized = log, logLevel, tlsCfg, authz
	if authz != nil {
		// Lines that grant nothing are logged now and whenever the
		// file changes.
		authz.SetLogger(log)
	}
	cfg.Mux.Compression = compress.mode
	if *stdio && !idleSet(fs) {
		// The one connection is the ssh session's: it ends with it.
		cfg.Mux.IdleTimeout = -1
	}
	srv, err := server.New(exported, defaultTree, cfg)
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
	if !useTLS {
		// The name may resolve otherwise now than it did: check the
		// address actually bound.
		if lb, err := isLoopback(l.Addr().String()); err != nil || !lb {
			l.Close()
			return fail("%s resolved to %s, which is not loopback: give --tls and --authorized", *listen, l.Addr())
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	go returnMemory(ctx, srv)
	for _, name := range order[1:] {
		log.Info("exporting", "tree", name, "dir", trees[name])
	}
	log.Info("serving", "read-only", *ro, "tls", useTLS)
	if useTLS {
		if fingerprint != "" {
			fmt.Fprintf(os.Stderr, "zx: TLS with authorized keys from %s; server key %s (clients pin it: --trust %s)\n", authz.Path(), fingerprint, fingerprint)
		} else {
			fmt.Fprintf(os.Stderr, "zx: TLS with authorized keys from %s; certificate from %s (clients verify it: --ca FILE)\n", authz.Path(), *certFile)
		}
	}
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

// isLoopback reports whether addr (HOST:PORT) is a loopback address, where
// a server may speak plain zx: every address its host resolves to must be
// loopback.
func isLoopback(addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("bad address %q: %v (want HOST:PORT, e.g. 127.0.0.1:5640)", addr, err)
	}
	if host == "" {
		return false, nil
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return false, fmt.Errorf("cannot resolve %s: %v", host, err)
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

// serverSecurity loads the server's TLS identity and authorized file. On
// failure it returns a message saying what to do.
func serverSecurity(listen, state, authorized, certFile, keyFile string) (*tls.Config, *auth.Authorized, string, string) {
	if state == "" {
		var err error
		if state, err = configPath("server"); err != nil {
			return nil, nil, "", err.Error()
		}
	}
	if authorized == "" {
		authorized = filepath.Join(state, "authorized")
	}
	authz, err := auth.LoadAuthorized(authorized)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, "", fmt.Sprintf("refusing to listen on %s without an authorized keys file: %s does not exist. "+
			"Create it with one line per client key, e.g.\n\n"+
			"    zx-ed25519 AAAAC3Nz...= user=alice tree=main:rw\n\n"+
			"(clients make their keys with 'zx keygen'; the format is in docs/security.md), "+
			"or name another file with --authorized FILE, or listen on 127.0.0.1 without --tls", listen, authorized)
	}
	if err != nil {
		return nil, nil, "", fmt.Sprintf("authorized keys: %v", err)
	}
	var id *auth.ServerIdentity
	if certFile != "" {
		id, err = auth.LoadCertFiles(certFile, keyFile)
	} else {
		id, err = auth.LoadServerIdentity(state)
		if err == nil && id.Created {
			fmt.Fprintf(os.Stderr, "zx: made a new server key in %s\n", state)
		}
	}
	if err != nil {
		return nil, nil, "", err.Error()
	}
	return auth.ServerConfig(id), authz, id.Fingerprint, ""
}

// idleSet reports whether --idle-timeout was given.
func idleSet(fs *flag.FlagSet) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "idle-timeout" })
	return set
}

// serverGCPercent is the garbage collector's target (GOGC) of `zx serve`
// when the environment sets none. A server's live heap is small (a few MB)
// and a find allocates one map per entry, so at Go's default of 100 it
// collects several times per find of a large tree: on loopback, a find of
// Go's source tree took a fifth more CPU at 100 than at 400. The price is
// a heap up to five times the live data instead of twice.
const serverGCPercent = 400

// serverOverhead is the resident memory `zx serve` may use beyond its
// --max-memory budget: the program and the Go runtime (about 12 MB at
// start), what is not counted against the budget (the data structures of
// the trees, a request's work beside what its cost covers), and room for
// the collector's garbage. The runtime's memory limit is set 16 MiB
// below it, for the program's own pages, which the runtime does not count.
const serverOverhead = 64 << 20

// serverGC sets the collector's target to serverGCPercent, unless GOGC
// says otherwise, and its soft memory limit to maxMemory plus
// serverOverhead, unless GOMEMLIMIT says otherwise: near the limit the
// collector runs more often, so that garbage cannot take the server
// far beyond its budget (at GOGC=400 it could reach five times it).
func serverGC(maxMemory int64) {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(serverGCPercent)
	}
	if _, ok := os.LookupEnv("GOMEMLIMIT"); !ok {
		debug.SetMemoryLimit(min(maxMemory, math.MaxInt64-serverOverhead) + serverOverhead - 16<<20)
	}
}

// returnMemory gives the memory that the server's connections no longer
// use back to the system, once some of them have ended or their buffers
// have emptied: Go's runtime keeps what its heap grew to until a
// collection, which an idle server may not run for two minutes, and then
// gives it back slowly (after hostile connections that held 125 MB had
// closed, the server still held all of it two and a half minutes later).
// It looks every second, and returns memory at most every returnEvery
// (each return is a full collection): when connections have ended, or
// when the memory they use has halved and at least returnMin more is
// held than after the last return.
func returnMemory(ctx context.Context, srv *server.Server) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	base := heldMemory()
	var last time.Time
	conns, used := srv.NumConns(), srv.Memory().Used()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			n, u := srv.NumConns(), srv.Memory().Used()
			ended, drained := n < conns, u < used/2
			conns, used = n, u
			if now.Sub(last) < returnEvery || !ended && !(drained && heldMemory() >= base+returnMin) {
				continue
			}
			debug.FreeOSMemory()
			base, last = heldMemory(), now
		}
	}
}

const (
	returnMin   = 16 << 20
	returnEvery = 5 * time.Second
)

// heldMemory returns the bytes the runtime holds from the system and has
// not given back: roughly the process's resident memory.
func heldMemory() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() - s[1].Value.Uint64()
}
