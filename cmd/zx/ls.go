package main

import (
	"context"
	"fmt"
	"io"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/zxfs/zx"
)

func lsCommand() command {
	return command{
		name:    "ls",
		args:    "[-l] [-n] [-d] [--json] [--stats] [--timeout D] zx://HOST/PATH...",
		summary: "list directories",
		help: "Ls lists each directory given, with one request for the whole listing, sent together " +
			"with the stat of the path so that listing costs one round trip. Plain output is one name " +
			"per line; -l prints mode, links, owner, group, size, modification time and name, and the target " +
			"of symbolic links, as ls -l does: owners and groups by name, looked up on this machine as ls -l " +
			"does for an NFS mount (the number when this machine has no such id); -n prints them as the " +
			"server's numbers (and implies -l). -d lists the entries themselves rather than their " +
			"contents. With --json it prints one JSON object of attributes per entry (numeric ids).",
		example: "zx ls -l zx://127.0.0.1/src",
		run:     runLs,
	}
}

func runLs(args []string) int {
	c := lsCommand()
	var opts commonFlags
	fs := newFlagSet(c)
	long := fs.Bool("l", false, "long listing: mode, links, owner, group, size, mtime, name")
	numeric := fs.Bool("n", false, "long listing with numeric owners and groups")
	self := fs.Bool("d", false, "list the entries themselves, not directory contents")
	opts.register(fs)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) == 0 {
		return usageError(c, "want at least one zx:// location")
	}
	var own *owners
	if *numeric {
		*long = true
	} else {
		own = newOwners()
	}
	s := newSession(c.name, opts)
	// Issue every request first; read the replies in order.
	lists := make([]*listReq, len(rest))
	for i, arg := range rest {
		loc, err := s.parse(arg)
		if err != nil {
			s.errorf("%v", err)
			return s.close(exitUsage)
		}
		t, err := s.tree(loc)
		if err != nil {
			return s.close(s.fail(err))
		}
		lists[i] = startList(s.ctx, t, loc.Path, !*self)
	}
	code = exitOK
	var files []zx.Dir // non-directories given, listed first, as ls does
	type dirList struct {
		d       zx.Dir
		entries []zx.Dir
	}
	var dirs []dirList
	for _, l := range lists {
		d, entries, err := l.wait()
		if err != nil {
			code = s.fail(err)
			continue
		}
		if *self || !d.IsDir() {
			files = append(files, d)
			continue
		}
		dirs = append(dirs, dirList{d, entries})
	}
	if len(files) > 0 {
		s.printList(files, *long, true, own)
	}
	for i, dl := range dirs {
		if len(rest) > 1 && !s.opts.json {
			if i > 0 || len(files) > 0 {
				s.println()
			}
			s.printf("%s:\n", dl.d.Path())
		}
		s.printList(dl.entries, *long, false, own)
	}
	return s.close(code)
}

// A listReq is a listing in flight: a Stat and, unless only the entry is
// wanted, a Get of the same path, issued together.
type listReq struct {
	ctx    context.Context
	cancel context.CancelFunc
	stat   <-chan zx.Reply
	get    <-chan zx.Item
}

func startList(ctx context.Context, t zx.Tree, path string, contents bool) *listReq {
	ctx, cancel := context.WithCancel(ctx)
	l := &listReq{ctx: ctx, cancel: cancel, stat: t.Stat(ctx, path)}
	if contents {
		l.get = t.Get(ctx, path, 0, -1)
	}
	return l
}

// wait returns the entry and, for a directory, its entries sorted by name.
func (l *listReq) wait() (zx.Dir, []zx.Dir, error) {
	defer l.cancel()
	r := <-l.stat
	if r.Err != nil || l.get == nil || !r.Dir.IsDir() {
		// Not a directory: the Get is streaming file data; cancelling
		// the context ends it.
		return r.Dir, nil, r.Err
	}
	var entries []zx.Dir
	for it := range l.get {
		if it.Err != nil {
			return r.Dir, entries, it.Err
		}
		if it.Dir != nil {
			entries = append(entries, it.Dir)
		}
	}
	if err := l.ctx.Err(); err != nil {
		return r.Dir, entries, zx.Errorf("get", r.Dir.Path(), err)
	}
	slices.SortFunc(entries, func(a, b zx.Dir) int { return strings.Compare(a.Name(), b.Name()) })
	return r.Dir, entries, nil
}

// printList prints entries, by path when byPath (entries given on the
// command line), else by name; a long listing names owners with own (nil:
// numbers).
func (s *session) printList(entries []zx.Dir, long, byPath bool, own *owners) {
	if s.opts.json {
		for _, d := range entries {
			s.emit(d)
		}
		return
	}
	name := zx.Dir.Name
	if byPath {
		name = zx.Dir.Path
	}
	if !long {
		for _, d := range entries {
			s.println(name(d))
		}
		return
	}
	writeLong(s.out, entries, name, time.Now(), own)
}

// owners names the numeric owners and groups of entries, as ls -l does:
// by the names this machine gives the ids (the server's ids may name
// other users here, as with NFS), the number when it has none. Each id is
// looked up once.
type owners struct {
	users, groups map[string]string
}

func newOwners() *owners {
	return &owners{users: make(map[string]string), groups: make(map[string]string)}
}

// name returns the name of the id of an entry's attribute attr (uid or
// gid); the id itself if o is nil or the id has no name here.
func (o *owners) name(attr, id string) string {
	if o == nil || id == "-" {
		return id
	}
	cache, look := o.users, func(id string) (string, error) {
		u, err := user.LookupId(id)
		if err != nil {
			return "", err
		}
		return u.Username, nil
	}
	if attr == zx.AGid {
		cache, look = o.groups, func(id string) (string, error) {
			g, err := user.LookupGroupId(id)
			if err != nil {
				return "", err
			}
			return g.Name, nil
		}
	}
	if n, ok := cache[id]; ok {
		return n
	}
	n, err := look(id)
	if err != nil || n == "" {
		n = id
	}
	cache[id] = n
	return n
}

// writeLong writes entries as ls -l does, with aligned columns, naming
// owners with own (nil: numbers).
func writeLong(w io.Writer, entries []zx.Dir, name func(zx.Dir) string, now time.Time, own *owners) {
	var wl, wu, wg, ws int
	uid := func(d zx.Dir) string { return own.name(zx.AUid, attrOr(d, zx.AUid, "-")) }
	gid := func(d zx.Dir) string { return own.name(zx.AGid, attrOr(d, zx.AGid, "-")) }
	for _, d := range entries {
		wl = max(wl, len(attrOr(d, zx.ANlink, "1")))
		wu = max(wu, len(uid(d)))
		wg = max(wg, len(gid(d)))
		ws = max(ws, len(attrOr(d, zx.ASize, "0")))
	}
	for _, d := range entries {
		line := fmt.Sprintf("%s %*s %-*s %-*s %*s %s %s", modeString(d),
			wl, attrOr(d, zx.ANlink, "1"), wu, uid(d), wg, gid(d),
			ws, attrOr(d, zx.ASize, "0"), lsTime(d.Mtime(), now), name(d))
		if d.Type() == zx.TypeLink {
			line += " -> " + d[zx.ATarget]
		}
		fmt.Fprintln(w, line)
	}
}

func attrOr(d zx.Dir, k, def string) string {
	if v, ok := d[k]; ok && v != "" {
		return v
	}
	return def
}

// modeString formats an entry's type and mode as ls -l does: "drwxr-xr-x",
// "lrwxrwxrwx", "-rwsr-xr-x".
func modeString(d zx.Dir) string {
	fm := d.FileMode()
	b := []byte(fm.Perm().String()) // "-rwxrwxrwx"
	t := d.Type()
	if t == "" || t == zx.TypeCtl {
		t = "?"
	}
	b[0] = t[0]
	special := func(i int, on bool, x, nox byte) {
		if !on {
			return
		}
		if b[i] == 'x' {
			b[i] = x
		} else {
			b[i] = nox
		}
	}
	m := d.Mode()
	special(3, m&04000 != 0, 's', 'S')
	special(6, m&02000 != 0, 's', 'S')
	special(9, m&01000 != 0, 't', 'T')
	return string(b)
}

// lsTime formats a modification time as ls -l does: the time of day for
// the last six months, the year otherwise.
func lsTime(t, now time.Time) string {
	if t.IsZero() {
		return "           -"
	}
	if t.After(now.AddDate(0, -6, 0)) && t.Before(now.Add(time.Hour)) {
		return t.Format("Jan _2 15:04")
	}
	return t.Format("Jan _2  2006")
}
