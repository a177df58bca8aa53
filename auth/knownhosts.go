package auth

import (
	"bufio"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// KnownHostsFile is the name of the client's file of pinned server keys in
// its configuration directory.
const KnownHostsFile = "known_hosts"

// A KnownHosts is a file of pinned server keys, one line per server:
//
//	HOST:PORT SHA256:FINGERPRINT
//
// Blank lines and lines starting with # are ignored. HOST:PORT is the
// address as the client dials it.
type KnownHosts struct {
	Path string
	mu   sync.Mutex // serializes Add within a process
}

// Lookup returns the fingerprint pinned for addr and its line number, or
// "" if there is none.
func (k *KnownHosts) Lookup(addr string) (string, int, error) {
	f, err := os.Open(k.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		n++
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if len(fields) < 2 {
			return "", 0, fmt.Errorf("%s:%d: want HOST:PORT SHA256:FINGERPRINT", k.Path, n)
		}
		if fields[0] == addr {
			return fields[1], n, nil
		}
	}
	return "", 0, sc.Err()
}

// Add pins fp for addr, replacing any line for addr.
func (k *KnownHosts) Add(addr, fp string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	b, err := os.ReadFile(k.Path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var out strings.Builder
	for line := range strings.Lines(string(b)) {
		fields := strings.Fields(line)
		if len(fields) > 0 && fields[0] == addr {
			continue
		}
		out.WriteString(line)
		if !strings.HasSuffix(line, "\n") {
			out.WriteByte('\n')
		}
	}
	fmt.Fprintf(&out, "%s %s\n", addr, fp)
	if err := os.MkdirAll(filepath.Dir(k.Path), 0o700); err != nil {
		return err
	}
	// Write aside and rename, so a crash leaves the old file or the new.
	tmp := k.Path + ".tmp"
	os.Remove(tmp)
	if err := writeNew(tmp, []byte(out.String())); err != nil {
		return err
	}
	return os.Rename(tmp, k.Path)
}

// HostKeyError is why a client refused a server's key.
type HostKeyError struct {
	Addr    string
	Got     string // fingerprint the server presented
	Pinned  string // fingerprint pinned for Addr, if any
	Trust   string // the fingerprint the user said to trust, if any
	File    string // the known hosts file
	Line    int    // line of the pinned key
	Changed bool   // a key was pinned and this is another one
}

func (e *HostKeyError) Error() string {
	switch {
	case e.Changed:
		return fmt.Sprintf("\n"+
			"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"+
			"@  WARNING: THE KEY OF THE ZX SERVER AT %s HAS CHANGED!\n"+
			"@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@\n"+
			"Someone could be intercepting the connection, or the server's key was replaced.\n"+
			"The server presented key %s,\nbut %s:%d pins %s.\n"+
			"Connection refused. If you know the key changed (ask the server's administrator\n"+
			"for the fingerprint zx serve prints), remove line %d of %s,\n"+
			"or connect once with --trust %s",
			e.Addr, e.Got, e.File, e.Line, e.Pinned, e.Line, e.File, e.Got)
	case e.Trust != "":
		return fmt.Sprintf("the server at %s presented key %s, not the %s given with --trust; connection refused", e.Addr, e.Got, e.Trust)
	}
	return fmt.Sprintf("the server at %s is not known: its key is %s. "+
		"Check that fingerprint with the server's administrator (zx serve prints it), "+
		"then connect with --trust %s to pin it in %s", e.Addr, e.Got, e.Got, e.File)
}

// ClientOptions say how a client authenticates itself and checks servers.
type ClientOptions struct {
	// Key is the client's key; nil presents none, and servers refuse.
	Key ed25519.PrivateKey
	// KnownHosts pins server keys on first use. Required unless CA is set.
	KnownHosts *KnownHosts
	// Trust is a fingerprint the user vouched for: a server presenting
	// it is accepted and pinned, also in place of a changed key.
	Trust string
	// AcceptNew pins the key of a server not yet known without asking.
	AcceptNew bool
	// Prompt, if set, asks the user whether to trust an unknown server's
	// key; nil refuses unknown servers (unless Trust or AcceptNew).
	Prompt func(addr, fingerprint string) (bool, error)
	// CA, if set, verifies the server's certificate chain against these
	// roots and its name against the dialled host, instead of pinning.
	CA *x509.CertPool
}

// ClientConfig returns the TLS configuration for dialling the server at
// addr (HOST:PORT, as in the known hosts file).
func ClientConfig(addr string, o ClientOptions) (*tls.Config, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS13,
		ServerName: host,
		NextProtos: []string{"zx"},
	}
	if o.Key != nil {
		cert, err := SelfSigned(o.Key, "zx client")
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if o.CA != nil {
		cfg.RootCAs = o.CA
		return cfg, nil
	}
	if o.KnownHosts == nil {
		return nil, errors.New("no known hosts file and no CA: cannot check the server")
	}
	if o.Trust != "" && !ValidFingerprint(o.Trust) {
		return nil, fmt.Errorf("bad fingerprint %q: want SHA256: and 43 characters of base64, as zx serve prints it", o.Trust)
	}
	// Pinning replaces the certificate chain check: the certificate is
	// self-signed, and only its key matters.
	cfg.InsecureSkipVerify = true
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("server presented no certificate")
		}
		pub, ok := cs.PeerCertificates[0].PublicKey.(ed25519.PublicKey)
		if !ok {
			return fmt.Errorf("server key is %T, not ed25519: verify it with --ca", cs.PeerCertificates[0].PublicKey)
		}
		return verifyPinned(addr, Fingerprint(pub), o)
	}
	return cfg, nil
}

// verifyPinned checks fp against the key pinned for addr, pinning it if
// the user trusts it.
func verifyPinned(addr, fp string, o ClientOptions) error {
	kh := o.KnownHosts
	pinned, line, err := kh.Lookup(addr)
	if err != nil {
		return err
	}
	e := &HostKeyError{Addr: addr, Got: fp, Pinned: pinned, Trust: o.Trust, File: kh.Path, Line: line}
	switch {
	case pinned == fp:
		return nil
	case o.Trust != "" && o.Trust != fp:
		return e
	case o.Trust == fp:
		return kh.Add(addr, fp)
	case pinned != "":
		e.Changed = true
		return e
	case o.AcceptNew:
		return kh.Add(addr, fp)
	case o.Prompt != nil:
		ok, err := o.Prompt(addr, fp)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("key %s of the server at %s not accepted", fp, addr)
		}
		return kh.Add(addr, fp)
	}
	return e
}
