package auth

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Access is what a key may do with a tree.
type Access uint8

// Access rights, weakest first.
const (
	NoAccess  Access = iota // the tree is hidden
	ReadOnly                // every request that writes fails with zx.ErrReadOnly
	ReadWrite               // every request
)

func (a Access) String() string {
	switch a {
	case ReadOnly:
		return "ro"
	case ReadWrite:
		return "rw"
	}
	return "none"
}

// AllTrees is the tree name in a grant that stands for every tree.
const AllTrees = "*"

// A Grant is one line of an authorized file: a key, the user it speaks for
// and what it may do.
type Grant struct {
	Fingerprint string
	User        string
	Trees       map[string]Access // by tree name; AllTrees for the others
	Uid, Gid    int               // the server ids the key acts as; -1 if not given
	Expires     time.Time         // zero: never
	MultiUser   bool              // requests may say which user they come from
	UidMap      map[uint32]uint32 // multi-user keys: client uid → server uid
	GidMap      map[uint32]uint32 // multi-user keys: client gid → server gid
	Line        int               // line in the file, for messages
}

// Access returns the key's rights on the named tree.
func (g *Grant) Access(tree string) Access {
	if a, ok := g.Trees[tree]; ok {
		return a
	}
	return g.Trees[AllTrees]
}

// Authorized is a server's file of authorized client keys (see
// docs/security.md for its format). It is read again when it changes, so
// keys can be added and revoked without restarting the server; a file that
// no longer parses refuses every key until it is fixed.
type Authorized struct {
	path string

	mu      sync.Mutex
	modTime time.Time
	size    int64
	grants  map[string]*Grant // by fingerprint
	err     error
}

// LoadAuthorized reads the authorized file at path.
func LoadAuthorized(path string) (*Authorized, error) {
	a := &Authorized{path: path}
	if err := a.reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// Path returns the file's name.
func (a *Authorized) Path() string { return a.path }

// reload reads the file again if it changed. a.mu is held or a is new.
func (a *Authorized) reload() error {
	st, err := os.Stat(a.path)
	if err != nil {
		a.err = err
		return err
	}
	if a.grants != nil && st.ModTime().Equal(a.modTime) && st.Size() == a.size {
		return a.err
	}
	b, err := os.ReadFile(a.path)
	if err == nil {
		var g map[string]*Grant
		if g, err = ParseAuthorized(b, a.path); err == nil {
			a.grants = g
		}
	}
	a.modTime, a.size, a.err = st.ModTime(), st.Size(), err
	return err
}

// AuthError is why a server refused a client key. Its message is meant for
// the client.
type AuthError struct{ Msg string }

func (e *AuthError) Error() string { return e.Msg }

// Lookup returns the grant of key at time now, or an *AuthError saying why
// the key may not connect.
func (a *Authorized) Lookup(key ed25519.PublicKey, now time.Time) (*Grant, error) {
	fp := Fingerprint(key)
	a.mu.Lock()
	err := a.reload()
	g := a.grants[fp]
	a.mu.Unlock()
	if err != nil {
		return nil, &AuthError{"the server cannot read its authorized keys file; tell its administrator"}
	}
	if g == nil {
		return nil, &AuthError{fmt.Sprintf("key %s is not authorized on this server: "+
			"send your public key (zx keygen prints it) to the server's administrator", fp)}
	}
	if !g.Expires.IsZero() && !now.Before(g.Expires) {
		return nil, &AuthError{fmt.Sprintf("key %s of user %s expired on %s: ask the server's administrator to renew it",
			fp, g.User, g.Expires.UTC().Format(time.RFC3339))}
	}
	return g, nil
}

// ParseAuthorized parses the contents of an authorized file; name is for
// error messages.
func ParseAuthorized(b []byte, name string) (map[string]*Grant, error) {
	grants := make(map[string]*Grant)
	sc := bufio.NewScanner(bytes.NewReader(b))
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		g, err := parseGrant(strings.Fields(line))
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", name, n, err)
		}
		g.Line = n
		if old := grants[g.Fingerprint]; old != nil {
			return nil, fmt.Errorf("%s:%d: key %s already granted on line %d", name, n, g.Fingerprint, old.Line)
		}
		grants[g.Fingerprint] = g
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %v", name, n+1, err)
	}
	return grants, nil
}

func parseGrant(f []string) (*Grant, error) {
	g := &Grant{Trees: map[string]Access{}, Uid: -1, Gid: -1}
	switch {
	case f[0] == KeyType:
		if len(f) < 2 {
			return nil, fmt.Errorf("%s without its key", KeyType)
		}
		pub, err := ParsePublicKey(f[0], f[1])
		if err != nil {
			return nil, err
		}
		g.Fingerprint = Fingerprint(pub)
		f = f[2:]
		// The comment zx keygen puts after the key, if the line was
		// pasted whole.
		if len(f) > 0 && !strings.Contains(f[0], "=") && f[0] != "multiuser" {
			f = f[1:]
		}
	case ValidFingerprint(f[0]):
		g.Fingerprint = f[0]
		f = f[1:]
	default:
		return nil, fmt.Errorf("%q is neither a key (%s BASE64) nor a fingerprint (SHA256:...)", f[0], KeyType)
	}
	for _, opt := range f {
		k, v, hasValue := strings.Cut(opt, "=")
		if !hasValue && k != "multiuser" {
			return nil, fmt.Errorf("option %q: want NAME=VALUE", opt)
		}
		var err error
		switch k {
		case "multiuser":
			g.MultiUser = true
		case "user":
			if v == "" || strings.ContainsAny(v, ":,") {
				err = fmt.Errorf("bad user name %q", v)
			}
			g.User = v
		case "tree":
			for _, t := range strings.Split(v, ",") {
				name, rights, _ := strings.Cut(t, ":")
				var a Access
				switch rights {
				case "ro":
					a = ReadOnly
				case "rw":
					a = ReadWrite
				default:
					return nil, fmt.Errorf("tree %q: want NAME:ro or NAME:rw", t)
				}
				if name == "" || strings.ContainsAny(name, "/@") {
					return nil, fmt.Errorf("bad tree name %q", name)
				}
				if _, dup := g.Trees[name]; dup {
					return nil, fmt.Errorf("tree %q granted twice", name)
				}
				g.Trees[name] = a
			}
		case "uid", "gid":
			id, perr := strconv.ParseUint(v, 10, 31)
			if perr != nil {
				return nil, fmt.Errorf("bad %s %q", k, v)
			}
			if k == "uid" {
				g.Uid = int(id)
			} else {
				g.Gid = int(id)
			}
		case "uidmap", "gidmap":
			m, perr := parseIDMap(v)
			if perr != nil {
				return nil, fmt.Errorf("%s: %v", k, perr)
			}
			if k == "uidmap" {
				g.UidMap = m
			} else {
				g.GidMap = m
			}
		case "expires":
			g.Expires, err = parseExpiry(v)
		default:
			err = fmt.Errorf("unknown option %q", k)
		}
		if err != nil {
			return nil, err
		}
	}
	switch {
	case g.User == "":
		return nil, fmt.Errorf("no user=NAME for key %s", g.Fingerprint)
	case len(g.Trees) == 0:
		return nil, fmt.Errorf("no tree=NAME:ro|rw for key %s (tree=*:ro grants every tree)", g.Fingerprint)
	case !g.MultiUser && (g.UidMap != nil || g.GidMap != nil):
		return nil, fmt.Errorf("uidmap and gidmap are for multiuser keys only")
	}
	return g, nil
}

// parseIDMap parses "C:S,C:S".
func parseIDMap(v string) (map[uint32]uint32, error) {
	m := make(map[uint32]uint32)
	for _, p := range strings.Split(v, ",") {
		c, s, ok := strings.Cut(p, ":")
		ci, err1 := strconv.ParseUint(c, 10, 31)
		si, err2 := strconv.ParseUint(s, 10, 31)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("bad mapping %q: want CLIENTID:SERVERID", p)
		}
		m[uint32(ci)] = uint32(si)
	}
	return m, nil
}

// parseExpiry parses a date (the key expires at its start, UTC) or an
// RFC 3339 time.
func parseExpiry(v string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("bad expires %q: want YYYY-MM-DD or an RFC 3339 time", v)
	}
	return t, nil
}

// Identity is who a request acts as on the server: ids to own what it
// creates and to check ownership changes against.
type Identity struct {
	User     string
	Uid, Gid int // -1: the server's own
}

// nobody is the id a multi-user key's root maps to unless mapped
// explicitly, as NFS's root_squash.
const nobody = 65534

// Identity returns who a request acts as. A request on a multi-user key
// may say which client user it comes from (cuid, cgid ≥ 0): its ids are
// mapped through the key's maps, and root becomes nobody unless the map
// says otherwise. Any other request acts as the key's own user.
func (g *Grant) Identity(cuid, cgid int64) Identity {
	id := Identity{User: g.User, Uid: g.Uid, Gid: g.Gid}
	if !g.MultiUser || cuid < 0 || cgid < 0 {
		return id
	}
	id.Uid, id.Gid = mapID(g.UidMap, cuid), mapID(g.GidMap, cgid)
	id.User = fmt.Sprintf("%s(uid %d)", g.User, cuid)
	return id
}

func mapID(m map[uint32]uint32, c int64) int {
	if s, ok := m[uint32(c)]; ok {
		return int(s)
	}
	if c == 0 {
		return nobody
	}
	return int(c)
}

// MapsIDs reports whether the key translates ids between its client and
// the server: a multi-user key with a uidmap or gidmap.
func (g *Grant) MapsIDs() bool { return g.MultiUser && (g.UidMap != nil || g.GidMap != nil) }

// ServerID returns the server id for the client id c ("uid" or "gid"
// attribute), as Identity maps it.
func (g *Grant) ServerID(attr string, c uint32) uint32 {
	m := g.UidMap
	if attr == "gid" {
		m = g.GidMap
	}
	return uint32(mapID(m, int64(c)))
}

// ClientID returns the client id that the server id s is mapped from, for
// entries sent to a multi-user client. Ids not mapped are the same on both
// sides; when several client ids map to s, the smallest is returned.
func (g *Grant) ClientID(attr string, s uint32) uint32 {
	m := g.UidMap
	if attr == "gid" {
		m = g.GidMap
	}
	best, found := s, false
	for c, sv := range m {
		if sv == s && (!found || c < best) {
			best, found = c, true
		}
	}
	return best
}
