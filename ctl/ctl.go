// Package ctl is the control-file layer: every tree of a zx stack (the
// local-disk tree, the server, the client, the cache, the FUSE mount) serves
// a synthetic file /Ctl at its root, as in the ZX paper (§2.8).
//
// Reading /Ctl gives the status of the layer, then the status of every
// layer below it, each section starting with a title line
//
//	== KIND ADDRESS
//
// followed by lines of the form "KEY VALUE ...", so grep finds them
// ("grep user /mnt/zx/Ctl", "grep debug /mnt/zx/Ctl").
//
// Writing a line to /Ctl runs a command:
//
//   - "NAME on", "NAME off": set a flag of this layer (debug, verbose ...);
//   - "pass CMD": hand CMD to the next layer down ("pass pass debug on"
//     reaches the third layer);
//   - "sync": flush this layer's write-behind state, then pass "sync" down,
//     so the write returns only when every layer below is flushed too.
//
// A layer implements Controller (its own section and commands) and keeps a
// File, which knows the tree below it; the layer's Stat, Get, Put and Find
// hand requests for /Ctl to the File (a hook of one line each), so the
// control file is never stored, never cached and never listed.
//
// # Hidden unless asked for
//
// /Ctl appears in no directory listing, and in no Find that starts above
// it: a find of the whole tree finds only real files. It is reached by
// name: Stat, Get and Put of /Ctl, and a Find (or FindGet) whose path is
// /Ctl. Its type is zx.TypeCtl ("C"), its size 0: readers read to the end
// (the FUSE mount opens it with direct I/O). The name /Ctl at the root of a
// tree is reserved: a real file of that name is shadowed.
package ctl

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/pred"
)

// Name is the name of the control file, at the root of a tree.
const Name = "Ctl"

// Path is the path of the control file.
const Path = "/" + Name

// Is reports whether the request path p names the control file.
func Is(p string) bool {
	if p == Path {
		return true
	}
	if !strings.Contains(p, Name) {
		return false
	}
	cp, err := zx.CleanPath(p)
	return err == nil && cp == Path
}

// Controller is implemented by a layer with a control file.
type Controller interface {
	// Status returns the layer's own section.
	Status(ctx context.Context) Section

	// Command runs one command on this layer alone. It must accept
	// "sync" (flushing what the layer holds back, returning once it is
	// written to the layer below; a layer with nothing held back just
	// returns nil). An unknown command is an error of kind
	// zx.ErrInvalid. "pass" never reaches it: File handles it.
	Command(ctx context.Context, cmd string) error
}

// Section is one layer's status.
type Section struct {
	Kind  string   // lfs, server, client, cache, mount ...
	Addr  string   // where the layer is: a directory, an address, a mount point
	Lines []string // "KEY VALUE ..." each
}

// Title returns the section's title line (without "== ").
func (s Section) Title() string { return s.Kind + " " + s.Addr }

// Get returns the words after KEY of the first line that starts with key,
// or nil.
func (s Section) Get(key string) []string {
	for _, l := range s.Lines {
		f := strings.Fields(l)
		if len(f) > 0 && f[0] == key {
			return f[1:]
		}
	}
	return nil
}

func (s Section) format(w *bytes.Buffer) {
	fmt.Fprintf(w, "== %s %s\n", s.Kind, s.Addr)
	for _, l := range s.Lines {
		w.WriteString(l)
		w.WriteByte('\n')
	}
}

// Parse splits the text of a control file into its sections.
func Parse(text []byte) []Section {
	var out []Section
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if t, ok := strings.CutPrefix(l, "== "); ok {
			kind, addr, _ := strings.Cut(t, " ")
			out = append(out, Section{Kind: kind, Addr: addr})
			continue
		}
		if len(out) > 0 && l != "" {
			out[len(out)-1].Lines = append(out[len(out)-1].Lines, l)
		}
	}
	return out
}

// File is the control file of one layer: its Controller and the tree
// below it (nil for the bottom layer).
type File struct {
	C     Controller
	Below zx.Tree
}

// Entry returns the control file's entry.
func (f *File) Entry() zx.Dir {
	d := zx.Dir{zx.AName: Name, zx.APath: Path, zx.AType: zx.TypeCtl, zx.ASize: "0", zx.AMode: "0644"}
	d.SetTime(zx.AMtime, time.Now())
	return d
}

// Read returns the status of the layer and of every layer below it.
func (f *File) Read(ctx context.Context) ([]byte, error) {
	var b bytes.Buffer
	f.C.Status(ctx).format(&b)
	if f.Below == nil {
		return b.Bytes(), nil
	}
	bctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		// The layers below get most of the time left, not all of it:
		// when one of them does not answer (a server gone), the
		// status of this layer, and of those that did answer, is
		// still returned in time, ending with why the rest is missing.
		var cancel context.CancelFunc
		bctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)*9/10))
		defer cancel()
	}
	below, err := zx.ReadFile(bctx, f.Below, Path)
	switch {
	case err == nil:
		b.Write(below)
	case absent(err):
		// The tree below has no control file (an in-memory tree, say).
	case zx.KindOf(err) == zx.ErrNotExist:
		// The tree itself is missing ("no tree named X"): the status
		// of a tree that is not there is an error, not a short file.
		return nil, err
	default:
		// One "error" line per line of the message, so that a
		// message of several lines (a server key that changed) reads
		// as it was written; BelowError puts it together again.
		b.WriteString("== below ?\n")
		msg := err.Error()
		if zx.KindOf(err) == zx.ErrTimeout {
			msg = "the layers below did not answer in time: " + msg
		}
		for l := range strings.SplitSeq(strings.TrimSpace(msg), "\n") {
			b.WriteString(strings.TrimRight("error "+l, " ") + "\n")
		}
	}
	return b.Bytes(), nil
}

// absent reports whether err says that the tree below has no control
// file: a not-found error about the control file itself. Any other
// not-found error (a server's "no tree named X", about the tree) is one to
// report, never to take for a layer without a control file.
func absent(err error) bool {
	var ze *zx.Error
	if errors.As(err, &ze) {
		return ze.Kind == zx.ErrNotExist && (ze.Path == Path || ze.Path == "")
	}
	return zx.KindOf(err) == zx.ErrNotExist
}

// BelowError returns the error that ended the status text (the layers
// below could not be read), or "".
func BelowError(secs []Section) string {
	var lines []string
	for _, s := range secs {
		if s.Kind != "below" {
			continue
		}
		for _, l := range s.Lines {
			if l == "error" {
				lines = append(lines, "")
			} else if m, ok := strings.CutPrefix(l, "error "); ok {
				lines = append(lines, m)
			}
		}
	}
	return strings.Join(lines, "\n")
}

// Write runs each line of text as a command, in order, and returns the
// first error (the lines after a failed one are not run).
func (f *File) Write(ctx context.Context, text []byte) error {
	for l := range strings.SplitSeq(string(text), "\n") {
		if err := f.Do(ctx, l); err != nil {
			return err
		}
	}
	return nil
}

// Do runs one command line. Blank lines and lines starting with # do
// nothing.
func (f *File) Do(ctx context.Context, line string) error {
	line = strings.TrimSpace(line)
	if line == "" || strings.HasPrefix(line, "#") {
		return nil
	}
	verb, rest, _ := strings.Cut(line, " ")
	rest = strings.TrimSpace(rest)
	switch verb {
	case "pass":
		if rest == "" {
			return zx.E(zx.ErrInvalid, "ctl", Path, "pass: no command to pass")
		}
		if f.Below == nil {
			return zx.E(zx.ErrInvalid, "ctl", Path, "pass: no layer below "+f.C.Status(ctx).Title())
		}
		return f.pass(ctx, rest)
	case "sync":
		if rest != "" {
			return zx.E(zx.ErrInvalid, "ctl", Path, "sync takes no argument")
		}
		if err := f.C.Command(ctx, "sync"); err != nil {
			return err
		}
		if f.Below == nil {
			return nil
		}
		err := f.pass(ctx, "sync")
		if absent(err) {
			return nil // nothing below keeps a control file, so nothing to sync
		}
		return err
	}
	return f.C.Command(ctx, line)
}

// pass writes cmd to the control file of the tree below.
func (f *File) pass(ctx context.Context, cmd string) error {
	r := <-f.Below.Put(ctx, Path, zx.Dir{}, 0, strings.NewReader(cmd+"\n"))
	return r.Err
}

// Stat answers a Stat of the control file.
func (f *File) Stat(ctx context.Context) <-chan zx.Reply {
	c := make(chan zx.Reply, 1)
	c <- zx.Reply{Dir: f.Entry()}
	return c
}

// Get answers a Get of the control file: the status, from off, at most
// count bytes (count < 0: all).
func (f *File) Get(ctx context.Context, off, count int64) <-chan zx.Item {
	c := make(chan zx.Item)
	go func() {
		defer close(c)
		text, err := f.Read(ctx)
		var its []zx.Item
		if err != nil {
			its = []zx.Item{{Err: zx.Errorf("get", Path, err)}}
		} else {
			off = min(max(off, 0), int64(len(text)))
			text = text[off:]
			if count >= 0 && count < int64(len(text)) {
				text = text[:count]
			}
			if len(text) > 0 {
				its = []zx.Item{{Data: text}}
			}
		}
		for _, it := range its {
			select {
			case c <- it:
			case <-ctx.Done():
				return
			}
		}
	}()
	return c
}

// Put answers a Put to the control file: data holds command lines,
// run in order; the reply waits for them all (a sync returns once every
// layer below is flushed). Attributes and the offset are ignored, so
// tools that create or truncate the file before writing work.
func (f *File) Put(ctx context.Context, d zx.Dir, off int64, data io.Reader) <-chan zx.Reply {
	c := make(chan zx.Reply, 1)
	go func() {
		var text []byte
		if data != nil {
			var err error
			text, err = io.ReadAll(io.LimitReader(data, 64<<10+1))
			if err == nil && len(text) > 64<<10 {
				err = zx.E(zx.ErrInvalid, "ctl", Path, "commands longer than 64 KiB")
			}
			if err != nil {
				c <- zx.Reply{Err: zx.Errorf("put", Path, err)}
				return
			}
		}
		if err := f.Write(ctx, text); err != nil {
			c <- zx.Reply{Err: err}
			return
		}
		c <- zx.Reply{Dir: f.Entry()}
	}()
	return c
}

// Find answers a Find or FindGet whose path is the control file: its
// entry, if the predicate matches it.
func (f *File) Find(ctx context.Context, o zx.FindOpts) <-chan zx.Item {
	c := make(chan zx.Item)
	go func() {
		defer close(c)
		send := func(it zx.Item) bool {
			select {
			case c <- it:
				return true
			case <-ctx.Done():
				return false
			}
		}
		p, err := pred.Parse(o.Pred)
		if err != nil {
			send(zx.Item{Err: &zx.Error{Kind: zx.ErrInvalid, Op: "find", Path: Path, Msg: err.Error(), Err: err}})
			return
		}
		pred.Walk(ctx, f.Entry(), p, o.Spref, o.Dpref, o.Depth0, nil, send)
	}()
	return c
}

// Flags is a set of named on/off flags, safe for concurrent use: what a
// layer reports as "NAME on|off" and sets with the command "NAME on|off".
type Flags struct {
	mu    sync.Mutex
	names []string
	on    map[string]bool
}

// NewFlags returns flags with the given names, all off.
func NewFlags(names ...string) *Flags {
	return &Flags{names: slices.Clone(names), on: make(map[string]bool)}
}

// On reports whether the flag is on.
func (f *Flags) On(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.on[name]
}

// Set sets a flag: Set("debug", true).
func (f *Flags) Set(name string, on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.on[name] = on
}

// Command runs cmd if it is "NAME on" or "NAME off" for one of the flags:
// ok reports whether it was a flag command.
func (f *Flags) Command(cmd string) (ok bool, err error) {
	w := strings.Fields(cmd)
	if len(w) == 0 || !slices.Contains(f.names, w[0]) {
		return false, nil
	}
	if len(w) != 2 || (w[1] != "on" && w[1] != "off") {
		return true, zx.E(zx.ErrInvalid, "ctl", Path, fmt.Sprintf("usage: %s on|off", w[0]))
	}
	f.Set(w[0], w[1] == "on")
	return true, nil
}

// Lines returns one "NAME on|off" line per flag.
func (f *Flags) Lines() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ls []string
	for _, n := range f.names {
		v := "off"
		if f.on[n] {
			v = "on"
		}
		ls = append(ls, n+" "+v)
	}
	return ls
}

// Unknown returns the error for a command a layer does not know.
func Unknown(kind, cmd string) error {
	return zx.E(zx.ErrInvalid, "ctl", Path, fmt.Sprintf("%s: unknown command %q (flags are set with NAME on|off; pass CMD; sync)", kind, cmd))
}

// Counts counts requests by type, safe for concurrent use.
type Counts struct {
	mu sync.Mutex
	n  map[string]int64
}

// Add counts one request of type op.
func (c *Counts) Add(op string) {
	c.mu.Lock()
	if c.n == nil {
		c.n = make(map[string]int64)
	}
	c.n[op]++
	c.mu.Unlock()
}

// Line returns "requests OP N OP N ...", ops sorted.
func (c *Counts) Line() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := make([]string, 0, len(c.n))
	for op := range c.n {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	var b strings.Builder
	b.WriteString("requests")
	var total int64
	for _, op := range ops {
		fmt.Fprintf(&b, " %s %d", op, c.n[op])
		total += c.n[op]
	}
	return fmt.Sprintf("%s total %d", b.String(), total)
}

// Since formats a time for status lines (UTC, seconds).
func Since(t time.Time) string { return t.UTC().Format(time.RFC3339) }
