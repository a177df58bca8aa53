// Package auth holds what zx needs to authenticate both ends of a
// connection: ed25519 keys and their fingerprints, the self-signed TLS
// certificates made from them, the client's pinned server keys
// (known_hosts), and the server's file of authorized client keys, which maps
// each key to a user, the trees it may use and its rights.
//
// Both ends speak TLS 1.3 and both present a certificate. Certificates are
// only envelopes for keys: a server key is trusted because the client pinned
// it (or because a CA the user named signed it), and a client key because
// the server's authorized file lists it. Nothing relies on the system's
// certificate pool or on host names in certificates.
package auth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeyType is the first field of a public key written as text.
const KeyType = "zx-ed25519"

// Fingerprint returns the SHA-256 fingerprint of a public key, written as
// ssh writes its own: "SHA256:" and the unpadded base64 of the hash (here,
// of the raw 32-byte key).
func Fingerprint(pub ed25519.PublicKey) string {
	h := sha256.Sum256(pub)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(h[:])
}

// FormatPublicKey returns pub as one line of text: "zx-ed25519 BASE64",
// and the comment if there is one.
func FormatPublicKey(pub ed25519.PublicKey, comment string) string {
	s := KeyType + " " + base64.StdEncoding.EncodeToString(pub)
	if comment != "" {
		s += " " + comment
	}
	return s
}

// ParsePublicKey parses the two first fields of a public key line
// ("zx-ed25519 BASE64").
func ParsePublicKey(typ, b64 string) (ed25519.PublicKey, error) {
	if typ != KeyType {
		return nil, fmt.Errorf("unknown key type %q (want %s)", typ, KeyType)
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("bad %s key %q: not base64 (%v); paste the whole line zx keygen printed", KeyType, b64, err)
	}
	if len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("bad %s key %q: %d bytes, want %d; paste the whole line zx keygen printed", KeyType, b64, len(b), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// ValidFingerprint reports whether s looks like a fingerprint made by
// Fingerprint.
func ValidFingerprint(s string) bool {
	b64, ok := strings.CutPrefix(s, "SHA256:")
	if !ok {
		return false
	}
	b, err := base64.RawStdEncoding.DecodeString(b64)
	return err == nil && len(b) == sha256.Size
}

// GenerateKey returns a new ed25519 private key.
func GenerateKey() (ed25519.PrivateKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	return priv, err
}

// WriteKey writes key to path as a PEM "PRIVATE KEY" (PKCS #8) with mode
// 0600, creating its directory (mode 0700) if needed. It never overwrites
// an existing file.
func WriteKey(path string, key ed25519.PrivateKey) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return writeNew(path, b)
}

// writeNew creates path with mode 0600 and contents b, failing if it
// exists. A partial file is removed.
func writeNew(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// LoadKey reads an ed25519 private key written by WriteKey. It refuses a
// key file that others may read, as ssh does.
func LoadKey(path string) (ed25519.PrivateKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("key file %s has mode %#o: others may read it; chmod 600 %s", path, st.Mode().Perm(), path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseKey(b, path)
}

// ParseKey parses a PEM PKCS #8 ed25519 private key; name is for errors.
func ParseKey(b []byte, name string) (ed25519.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PRIVATE KEY" {
		return nil, fmt.Errorf("%s: not a PEM private key", name)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ed25519 key (zx uses ed25519 keys: make one with zx keygen)", name)
	}
	return ek, nil
}

// LoadOrCreateKey loads the key at path, or creates one there if there is
// none. It reports whether it created it.
func LoadOrCreateKey(path string) (ed25519.PrivateKey, bool, error) {
	k, err := LoadKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, false, err
	}
	k, err = GenerateKey()
	if err != nil {
		return nil, false, err
	}
	if err := WriteKey(path, k); err != nil {
		if errors.Is(err, fs.ErrExist) {
			// Another process made it first: use theirs.
			k, err = LoadKey(path)
			return k, false, err
		}
		return nil, false, err
	}
	return k, true, nil
}

// ConfigDir returns the user's zx configuration directory:
// $XDG_CONFIG_HOME/zx, or ~/.config/zx.
func ConfigDir() (string, error) {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "zx"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no configuration directory: %v (set XDG_CONFIG_HOME or HOME)", err)
	}
	return filepath.Join(home, ".config", "zx"), nil
}

// equalKeys reports whether two public keys are the same.
func equalKeys(a, b ed25519.PublicKey) bool { return bytes.Equal(a, b) }
