package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/auth"
	"github.com/zxfs/zx/client"
)

// secFlags are how a client command authenticates itself and checks the
// server, declared once for every command that dials.
type secFlags struct {
	tls        bool
	identity   string
	trust      string
	acceptNew  bool
	ca         string
	knownHosts string
}

func (o *secFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.tls, "tls", false, "speak TLS to a loopback server too (always done for other addresses)")
	fs.StringVar(&o.identity, "identity", "", "client key `FILE` (default $XDG_CONFIG_HOME/zx/id_ed25519 or ~/.config/zx/id_ed25519; make it with zx keygen)")
	fs.StringVar(&o.trust, "trust", "", "accept and pin the server key with this `FINGERPRINT` (SHA256:..., as zx serve prints it)")
	fs.BoolVar(&o.acceptNew, "accept-new", false, "pin the key of a server not yet known without asking (never replaces a pinned key)")
	fs.StringVar(&o.ca, "ca", "", "verify the server's certificate against the CA certificates in `FILE` instead of pinning its key")
	fs.StringVar(&o.knownHosts, "known-hosts", "", "pinned server keys `FILE` (default known_hosts in the zx configuration directory)")
}

// configPath returns name in the user's zx configuration directory.
func configPath(name string) (string, error) {
	dir, err := auth.ConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// defaultKeyFile is the client key zx keygen writes and clients use.
const defaultKeyFile = "id_ed25519"

// isLoopbackHost reports whether host names this machine through the
// loopback interface: the only addresses a client speaks plain to unless
// told otherwise.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// clientOptions returns the options for dialling loc: plain to loopback
// addresses (unless --tls), and otherwise TLS, presenting the user's key
// and checking the server's against the pinned one (or the CA). ssh://
// locations need none: ssh authenticates both ends.
func clientOptions(loc client.Location, sec secFlags) (client.Options, error) {
	if loc.IsSSH() {
		return client.Options{}, nil
	}
	// Requests say who asks; servers heed it only from multi-user keys.
	caller := &zx.Caller{Uid: os.Getuid(), Gid: os.Getgid()}
	host, _, err := net.SplitHostPort(loc.Addr)
	if err != nil {
		return client.Options{}, err
	}
	if !sec.tls && isLoopbackHost(host) {
		if sec.trust != "" || sec.ca != "" || sec.acceptNew {
			return client.Options{}, errors.New("--trust, --ca and --accept-new are for TLS: add --tls to speak TLS to a loopback server")
		}
		return client.Options{Caller: caller}, nil
	}
	o, err := clientAuth(sec)
	if err != nil {
		return client.Options{}, err
	}
	cfg, err := auth.ClientConfig(loc.Addr, o)
	if err != nil {
		return client.Options{}, err
	}
	return client.Options{TLS: cfg, Caller: caller}, nil
}

// clientAuth loads what the flags name.
func clientAuth(sec secFlags) (auth.ClientOptions, error) {
	var o auth.ClientOptions
	keyFile := sec.identity
	if keyFile == "" {
		var err error
		if keyFile, err = configPath(defaultKeyFile); err != nil {
			return o, err
		}
	}
	key, err := auth.LoadKey(keyFile)
	if errors.Is(err, fs.ErrNotExist) {
		return o, fmt.Errorf("no client key %s: make one with 'zx keygen' and send the public key it prints to the server's administrator", keyFile)
	}
	if err != nil {
		return o, fmt.Errorf("client key: %v", err)
	}
	o.Key = key
	if sec.ca != "" {
		if o.CA, err = auth.LoadCA(sec.ca); err != nil {
			return o, fmt.Errorf("--ca: %v", err)
		}
		return o, nil
	}
	khFile := sec.knownHosts
	if khFile == "" {
		if khFile, err = configPath(auth.KnownHostsFile); err != nil {
			return o, err
		}
	}
	o.KnownHosts = &auth.KnownHosts{Path: khFile}
	o.Trust = sec.trust
	o.AcceptNew = sec.acceptNew
	o.Prompt = ttyPrompt()
	return o, nil
}

// ttyPrompt returns a function asking the user on the terminal whether to
// trust a server's key, as ssh does, or nil when there is no terminal to
// ask on (then unknown servers are refused with advice).
func ttyPrompt() func(addr, fp string) (bool, error) {
	if !isTerminal(os.Stderr) {
		return nil
	}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	if !isTerminal(tty) {
		tty.Close()
		return nil
	}
	return func(addr, fp string) (bool, error) {
		defer tty.Close()
		fmt.Fprintf(tty, "The zx server at %s is not known.\nIts key fingerprint is %s.\n"+
			"Check it with the server's administrator (zx serve prints it when it starts).\n"+
			"Trust this key and pin it (yes/no)? ", addr, fp)
		line, err := bufio.NewReader(tty).ReadString('\n')
		if err != nil {
			return false, fmt.Errorf("reading the answer: %v", err)
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "yes", "y":
			return true, nil
		}
		return false, nil
	}
}
