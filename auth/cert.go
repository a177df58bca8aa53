package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// SelfSigned returns a TLS certificate for key, signed by key itself. Its
// name and dates mean nothing to zx, which trusts the key, not the
// certificate.
func SelfSigned(key ed25519.PrivateKey, name string) (tls.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(30, 0, 0),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// ServerIdentity is a server's certificate and the fingerprint clients pin.
type ServerIdentity struct {
	Cert        tls.Certificate
	Fingerprint string // of the certificate's ed25519 key; "" for other key types
	Created     bool   // the key was made by this call
}

// State directory file names.
const (
	ServerKeyFile  = "key.pem"
	ServerCertFile = "cert.pem"
)

// LoadServerIdentity returns the server identity kept in the state
// directory dir, creating the directory (mode 0700), an ed25519 key and a
// self-signed certificate (both mode 0600) on first use.
func LoadServerIdentity(dir string) (*ServerIdentity, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("server state directory: %v", err)
	}
	key, created, err := LoadOrCreateKey(filepath.Join(dir, ServerKeyFile))
	if err != nil {
		return nil, fmt.Errorf("server key: %v", err)
	}
	certPath := filepath.Join(dir, ServerCertFile)
	var cert tls.Certificate
	b, err := os.ReadFile(certPath)
	if err == nil && !created {
		cert, err = certWithKey(b, key)
		if err != nil {
			return nil, fmt.Errorf("%s: %v (remove it to make a new one)", certPath, err)
		}
	} else {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		os.Remove(certPath) // a key was just made: any old certificate is not for it
		if cert, err = SelfSigned(key, "zx server"); err != nil {
			return nil, err
		}
		b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
		if err := writeNew(certPath, b); err != nil {
			return nil, fmt.Errorf("server certificate: %v", err)
		}
	}
	return &ServerIdentity{Cert: cert, Fingerprint: Fingerprint(key.Public().(ed25519.PublicKey)), Created: created}, nil
}

// certWithKey parses a PEM certificate and checks that it is key's.
func certWithKey(b []byte, key ed25519.PrivateKey) (tls.Certificate, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "CERTIFICATE" {
		return tls.Certificate{}, errors.New("not a PEM certificate")
	}
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return tls.Certificate{}, err
	}
	pub, ok := leaf.PublicKey.(ed25519.PublicKey)
	if !ok || !equalKeys(pub, key.Public().(ed25519.PublicKey)) {
		return tls.Certificate{}, errors.New("certificate is not for the server's key")
	}
	return tls.Certificate{Certificate: [][]byte{blk.Bytes}, PrivateKey: key, Leaf: leaf}, nil
}

// LoadCertFiles loads a certificate chain and its key (PEM files), for a
// server whose certificate a CA signed. The key may be of any type TLS 1.3
// supports.
func LoadCertFiles(certFile, keyFile string) (*ServerIdentity, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	id := &ServerIdentity{Cert: cert}
	if pub, ok := cert.Leaf.PublicKey.(ed25519.PublicKey); ok {
		id.Fingerprint = Fingerprint(pub)
	}
	return id, nil
}

// LoadCA reads a file of PEM certificates into a pool.
func LoadCA(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, nil
}

// PeerKey returns the ed25519 key of a TLS peer's certificate.
func PeerKey(cs tls.ConnectionState) (ed25519.PublicKey, error) {
	if len(cs.PeerCertificates) == 0 {
		return nil, errors.New("no key presented")
	}
	pub, ok := cs.PeerCertificates[0].PublicKey.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("key of type %T presented; zx keys are ed25519 (make one with zx keygen)", cs.PeerCertificates[0].PublicKey)
	}
	return pub, nil
}

// ServerConfig returns the TLS configuration of a server presenting id:
// TLS 1.3 only, and clients are asked for a certificate, whose key the
// server then looks up in its authorized file. (Asked, not required, so
// that a client without one is told why it is refused, in the protocol,
// rather than by a bare TLS alert.)
func ServerConfig(id *ServerIdentity) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.Cert},
		ClientAuth:   tls.RequestClientCert, // a client without a key is told why it is refused
		NextProtos:   []string{"zx"},
	}
}
