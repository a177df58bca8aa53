package auth

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"os"
	"slices"
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
// keys can be added and revoked without restarting the server.
//
// A line that does not parse grants nothing, and every other line keeps
// working: a typo made while adding a key must not lock out everyone else.
// Such a line fails closed: the key it names, if it names one, is refused
// with a message saying which line is wrong, and a key on two lines is
// refused until one goes (which one was meant is a guess). Each bad line is
// logged, with its number and why, when the file is read (SetLogger). A
// file that cannot be read at all refuses every key until it can.
type Authorized struct {
	path string

	mu       sync.Mutex
	log      *slog.Logger
	modTime  time.Time
	size     int64
	read     bool
	grants   map[string]*Grant     // by fingerprint
	refused  map[string]*LineError // keys named on bad lines, by fingerprint
	problems []*LineError          // the bad lines, in order
	err      error                 // why the file cannot be read
}

// A LineError is a line of an authorized file that grants nothing, and why.
type LineError struct {
	File        string
	Line        int
	Fingerprint string // the key the line names, if it could be read
	Err         error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }

func (e *LineError) Unwrap() error { return e.Err }

// LoadAuthorized reads the authorized file at path. It fails only if the
// file cannot be read; lines that do not parse are in Problems.
func LoadAuthorized(path string) (*Authorized, error) {
	a := &Authorized{path: path, log: slog.New(slog.DiscardHandler)}
	if err := a.reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// Path returns the file's name.
func (a *Authorized) Path() string { return a.path }

// SetLogger sets where the lines that grant nothing are reported, each
// time the file is read, and reports those of the file as read now.
func (a *Authorized) SetLogger(l *slog.Logger) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.log = l
	a.report()
}

// Problems returns the lines of the file, as last read, that grant nothing.
func (a *Authorized) Problems() []*LineError {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reload()
	return slices.Clone(a.problems)
}

// reload reads the file again if it changed. a.mu is held or a is new.
func (a *Authorized) reload() error {
	st, err := os.Stat(a.path)
	if err == nil && a.read && st.ModTime().Equal(a.modTime) && st.Size() == a.size {
		return a.err
	}
	var b []byte
	if err == nil {
		b, err = os.ReadFile(a.path)
	}
	if err != nil {
		if a.err == nil || a.err.Error() != err.Error() {
			a.log.Error("cannot read the authorized keys file: every client key is refused until it can be read", "err", err)
		}
		a.err, a.read = err, false
		return err
	}
	a.grants, a.problems = ParseAuthorized(b, a.path)
	a.refused = make(map[string]*LineError)
	for _, p := range a.problems {
		if p.Fingerprint != "" {
			a.refused[p.Fingerprint] = p
		}
	}
	a.modTime, a.size, a.read, a.err = st.ModTime(), st.Size(), true, nil
	a.report()
	return nil
}

// report logs the bad lines. a.mu is held.
func (a *Authorized) report() {
	for _, p := range a.problems {
		a.log.Error("authorized keys file: a line grants nothing until it is fixed", "file", p.File, "line", p.Line, "why", p.Err)
	}
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
	g, bad := a.grants[fp], a.refused[fp]
	a.mu.Unlock()
	switch {
	case err != nil:
		return nil, &AuthError{"the server cannot read its authorized keys file; tell its administrator"}
	case bad != nil:
		return nil, &AuthError{fmt.Sprintf("key %s is on line %d of the server's authorized keys file, "+
			"which grants nothing until it is fixed (%v): tell the server's administrator", fp, bad.Line, bad.Err)}
	case g == nil:
		return nil, &AuthError{fmt.Sprintf("key %s is not authorized on this server: "+
			"send your public key (zx keygen prints it) to the server's administrator", fp)}
	case !g.Expires.IsZero() && !now.Before(g.Expires):
		return nil, &AuthError{fmt.Sprintf("key %s of user %s expired on %s: ask the server's administrator to renew it",
			fp, g.User, g.Expires.UTC().Format(time.RFC3339))}
	}
	return g, nil
}

// ParseAuthorized parses the contents of an authorized file; name is for
// messages. It returns the grants of the lines that parse, and the lines
// that grant nothing: those that do not parse, and every line of a key
// that is on more than one (the first of them is reported).
func ParseAuthorized(b []byte, name string) (map[string]*Grant, []*LineError) {
	grants := make(map[string]*Grant)
	var problems []*LineError
	first := make(map[string]int) // the first line of each key
	for i, text := range strings.Split(string(b), "\n") {
		n := i + 1
		line := strings.TrimSpace(text)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		g, err := parseGrant(strings.Fields(line))
		fp := g.Fingerprint
		if fp != "" {
			if l, ok := first[fp]; ok {
				// Which line was meant is a guess: neither grants.
				delete(grants, fp)
				if err == nil {
					err = fmt.Errorf("key %s is also on line %d: a key may be on one line only, so neither line grants anything", fp, l)
				} else {
					err = fmt.Errorf("%v (and key %s is also on line %d: neither line grants anything)", err, fp, l)
				}
			} else {
				first[fp] = n
			}
		}
		if err != nil {
			problems = append(problems, &LineError{File: name, Line: n, Fingerprint: fp, Err: err})
			continue
		}
		if l := first[fp]; l == n {
			g.Line = n
			grants[fp] = g
		}
	}
	return grants, problems
}

// parseGrant parses the fields of a line. On error, the grant returned
// holds the line's key's fingerprint, if it got that far.
func parseGrant(f []string) (*Grant, error) {
	g := &Grant{Trees: map[string]Access{}, Uid: -1, Gid: -1}
	return g, parseGrantFields(g, f)
}

func parseGrantFields(g *Grant, f []string) error {
	switch {
	case f[0] == KeyType:
		if len(f) < 2 {
			return fmt.Errorf("%s without its key", KeyType)
		}
		pub, err := ParsePublicKey(f[0], f[1])
		if err != nil {
			return err
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
		return fmt.Errorf("%q is neither a key (%s BASE64) nor a fingerprint (SHA256:...)", f[0], KeyType)
	}
	for _, opt := range f {
		k, v, hasValue := strings.Cut(opt, "=")
		if !hasValue && k != "multiuser" {
			return fmt.Errorf("option %q: want NAME=VALUE", opt)
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
					return fmt.Errorf("tree %q: want NAME:ro or NAME:rw", t)
				}
				if name == "" || strings.ContainsAny(name, "/@") {
					return fmt.Errorf("bad tree name %q", name)
				}
				if _, dup := g.Trees[name]; dup {
					return fmt.Errorf("tree %q granted twice", name)
				}
				g.Trees[name] = a
			}
		case "uid", "gid":
			id, perr := strconv.ParseUint(v, 10, 31)
			if perr != nil {
				return fmt.Errorf("bad %s %q", k, v)
			}
			if k == "uid" {
				g.Uid = int(id)
			} else {
				g.Gid = int(id)
			}
		case "uidmap", "gidmap":
			m, perr := parseIDMap(v)
			if perr != nil {
				return fmt.Errorf("%s: %v", k, perr)
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
			return err
		}
	}
	switch {
	case g.User == "":
		return fmt.Errorf("no user=NAME for key %s", g.Fingerprint)
	case len(g.Trees) == 0:
		return fmt.Errorf("no tree=NAME:ro|rw for key %s (tree=*:ro grants every tree)", g.Fingerprint)
	case !g.MultiUser && (g.UidMap != nil || g.GidMap != nil):
		return fmt.Errorf("uidmap and gidmap are for multiuser keys only")
	}
	return nil
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
