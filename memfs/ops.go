package memfs

import (
	"context"
	"io"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/order"
)

// chunkSize is the size of the Data Items a Get sends.
const chunkSize = 64 << 10

// enter registers a request and waits for its turn in a goroutine: it
// returns a function that the request's goroutine calls first, which
// reports whether the request may run (false: ctx was cancelled).
func (fs *FS) enter(ctx context.Context, write bool, paths ...string) (*order.Op, func() bool) {
	o := fs.q.Enter(write, paths...)
	return o, func() bool {
		return o.Wait(ctx) == nil && ctx.Err() == nil
	}
}

// Stat implements zx.Tree.
func (fs *FS) Stat(ctx context.Context, p string) <-chan zx.Reply {
	p, err := zx.CleanPath(p)
	if err != nil {
		return reply(zx.Reply{Err: zx.Errorf("stat", p, err)})
	}
	c := make(chan zx.Reply, 1)
	o, wait := fs.enter(ctx, false, p)
	go func() {
		defer close(c)
		defer o.Done()
		if !wait() {
			c <- zx.Reply{Err: canceled("stat", p)}
			return
		}
		fs.mu.RLock()
		defer fs.mu.RUnlock()
		n, err := fs.lookup(p)
		if err != nil {
			c <- zx.Reply{Err: fail("stat", p, err)}
			return
		}
		c <- zx.Reply{Dir: n.dir(p)}
	}()
	return c
}

// Get implements zx.Tree. It takes a snapshot of the file or directory
// when its turn comes, and streams from it.
func (fs *FS) Get(ctx context.Context, p string, off, count int64) <-chan zx.Item {
	p, err := zx.CleanPath(p)
	if err != nil {
		return fs.errStream(ctx, "get", p, zx.Errorf("get", p, err))
	}
	if off < 0 {
		return fs.errStream(ctx, "get", p, zx.E(zx.ErrInvalid, "get", p, "negative offset"))
	}
	s := fs.newStream(ctx, "get", p)
	o, wait := fs.enter(ctx, false, p)
	go func() {
		if !wait() {
			o.Done()
			s.cutOff = true
			s.end(nil)
			return
		}
		fs.mu.RLock()
		n, err := fs.lookup(p)
		var snap *data
		var ents []zx.Dir
		if err == nil {
			switch n.typ {
			case zx.TypeFile:
				snap = n.data.clone()
			case zx.TypeDir:
				names := n.sortedNames()
				if off > int64(len(names)) {
					off = int64(len(names))
				}
				names = names[off:]
				if count >= 0 && count < int64(len(names)) {
					names = names[:count]
				}
				for _, name := range names {
					ents = append(ents, n.children[name].dir(zx.Join(p, name)))
				}
			default:
				err = zx.E(zx.ErrInvalid, "get", p, "not a file or directory")
			}
		}
		fs.mu.RUnlock()
		o.Done()
		if err != nil {
			s.end(fail("get", p, err))
			return
		}
		for _, d := range ents {
			if !s.send(zx.Item{Dir: d}) {
				break
			}
		}
		if snap != nil {
			sendData(s, snap, off, count)
		}
		s.end(nil)
	}()
	return s.c
}

// sendData streams count bytes (all if < 0) of d from off.
func sendData(s *stream, d *data, off, count int64) bool {
	end := d.size
	if count >= 0 && off+count < end {
		end = off + count
	}
	for off < end {
		b := make([]byte, min(chunkSize, end-off))
		d.readAt(b, off)
		if !s.send(zx.Item{Data: b}) {
			return false
		}
		off += int64(len(b))
	}
	return true
}

// Put implements zx.Tree.
func (fs *FS) Put(ctx context.Context, p string, d zx.Dir, off int64, r io.Reader) <-chan zx.Reply {
	p, err := zx.CleanPath(p)
	if err != nil {
		return reply(zx.Reply{Err: zx.Errorf("put", p, err)})
	}
	d = d.Clone()
	c := make(chan zx.Reply, 1)
	o, wait := fs.enter(ctx, true, p)
	go func() {
		defer close(c)
		defer o.Done()
		if !wait() {
			c <- zx.Reply{Err: canceled("put", p)}
			return
		}
		nd, err := fs.put(ctx, p, d, off, r)
		c <- zx.Reply{Dir: nd, Err: err}
	}()
	return c
}

func (fs *FS) put(ctx context.Context, p string, d zx.Dir, off int64, r io.Reader) (zx.Dir, error) {
	a, err := parseAttrs("put", p, d)
	if err != nil {
		return nil, err
	}
	if off > maxSize {
		return nil, zx.E(zx.ErrTooBig, "put", p, "offset too large")
	}
	hasData := r != nil
	fs.mu.Lock()
	parent, n, err := fs.walk(p)
	if err == nil {
		err = checkPut(n, a, hasData)
	}
	if err != nil {
		fs.mu.Unlock()
		return nil, fail("put", p, err)
	}
	t := now()
	if n == nil && a.typ != zx.TypeFile || n != nil && n.typ != zx.TypeFile {
		// No data: all in one step.
		ev := zx.Changed
		if n == nil {
			ev = zx.Created
			n = fs.newNode(a.typ, t)
			if a.target != nil {
				n.target = *a.target
			}
			if a.rdev != nil {
				n.rdev = *a.rdev
			}
			_, name := zx.Split(p)
			parent.children[name] = n
			parent.mtime, parent.ctime = t, t
		}
		a.setMeta(n)
		a.setTimes(n, ev == zx.Created, t)
		nd := n.dir(p)
		fs.notify(zx.Event{Kind: ev, Dir: nd})
		fs.mu.Unlock()
		return nd, nil
	}

	if n != nil && a.size < 0 {
		// Write in place.
		a.setMeta(n)
		n.ctime = t
		if off < 0 {
			off = n.data.size
		}
		fs.mu.Unlock()
		err := fs.copyIn(ctx, p, r, off, func(b []byte, off int64) {
			fs.mu.Lock()
			n.data.writeAt(b, off)
			fs.mu.Unlock()
		})
		fs.mu.Lock()
		defer fs.mu.Unlock()
		a.setTimes(n, hasData, now())
		nd := n.dir(p)
		fs.notify(zx.Event{Kind: zx.Changed, Dir: nd})
		if err != nil {
			return nil, err
		}
		return nd, nil
	}

	// Create or resize: build the new file aside and install it at the end.
	var nn *node
	if n == nil {
		nn = fs.newNode(zx.TypeFile, t)
	} else {
		c := *n
		nn = &c
		nn.data = n.data.clone()
		if nn.user != nil {
			nn.user = make(map[string]string, len(n.user))
			for k, v := range n.user {
				nn.user[k] = v
			}
		}
	}
	a.setMeta(nn)
	if a.size >= 0 {
		nn.data.truncate(a.size)
	}
	if off < 0 {
		off = nn.data.size
	}
	fs.mu.Unlock()
	err = fs.copyIn(ctx, p, r, off, nn.data.writeAt)
	if err == nil && ctx.Err() != nil {
		err = canceled("put", p)
	}
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	parent, old, err := fs.walk(p)
	if err == nil && parent == nil {
		err = zx.ErrIsDir
	}
	if err != nil {
		return nil, fail("put", p, err)
	}
	t = now()
	a.setTimes(nn, true, t)
	ev := zx.Changed
	if old == nil {
		_, name := zx.Split(p)
		parent.children[name] = nn
		parent.mtime, parent.ctime = t, t
		ev = zx.Created
	} else {
		nlink := old.nlink // links made or removed meanwhile count
		*old = *nn
		old.nlink = nlink
		nn = old
	}
	nd := nn.dir(p)
	fs.notify(zx.Event{Kind: ev, Dir: nd})
	return nd, nil
}

// checkPut checks a Put of a on the existing node n (nil if none).
func checkPut(n *node, a *attrs, hasData bool) error {
	if n == nil {
		switch {
		case a.typ == "":
			return zx.ErrNotExist
		case a.typ == zx.TypeDir && (hasData || a.size >= 0):
			return zx.ErrIsDir
		case a.typ == zx.TypeLink && (a.target == nil || *a.target == ""):
			return zx.E(zx.ErrInvalid, "", "", "link without target")
		case a.typ != zx.TypeFile && a.typ != zx.TypeDir && (hasData || a.size >= 0):
			return zx.E(zx.ErrInvalid, "", "", "data for a "+a.typ+" entry")
		}
		return nil
	}
	switch {
	case a.excl:
		return zx.ErrExist
	case n.typ == zx.TypeDir && (a.typ != "" && a.typ != zx.TypeDir || hasData || a.size >= 0):
		return zx.ErrIsDir
	case a.typ != "" && a.typ != n.typ:
		return zx.ErrExist
	case n.typ == zx.TypeLink && a.typ == zx.TypeLink && a.target != nil && *a.target != n.target:
		return zx.ErrExist
	case n.typ != zx.TypeFile && n.typ != zx.TypeDir && (hasData || a.size >= 0):
		return zx.E(zx.ErrInvalid, "", "", "data for a "+n.typ+" entry")
	}
	return nil
}

type chunk struct {
	b   []byte
	err error
}

// copyIn reads r to its end and writes what it reads with write, from off
// on. It stops when ctx is cancelled, even if r blocks: r is then left to a
// goroutine that ends when its Read returns.
func (fs *FS) copyIn(ctx context.Context, p string, r io.Reader, off int64, write func([]byte, int64)) error {
	if r == nil {
		return nil
	}
	stop := make(chan struct{})
	defer close(stop)
	c := make(chan chunk)
	go func() {
		defer close(c)
		for {
			b := make([]byte, chunkSize)
			n, err := r.Read(b)
			if n > 0 {
				select {
				case c <- chunk{b: b[:n]}:
				case <-stop:
					return
				}
			}
			if err != nil {
				if err != io.EOF {
					select {
					case c <- chunk{err: err}:
					case <-stop:
					}
				}
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return canceled("put", p)
		case ch, ok := <-c:
			if !ok {
				return nil
			}
			if ch.err != nil {
				return zx.Errorf("put", p, ch.err)
			}
			if off+int64(len(ch.b)) > maxSize {
				return zx.E(zx.ErrTooBig, "put", p, "file too large")
			}
			write(ch.b, off)
			off += int64(len(ch.b))
		}
	}
}

// Wstat implements zx.Tree.
func (fs *FS) Wstat(ctx context.Context, p string, d zx.Dir) <-chan zx.Reply {
	p, err := zx.CleanPath(p)
	if err != nil {
		return reply(zx.Reply{Err: zx.Errorf("wstat", p, err)})
	}
	d = d.Clone()
	c := make(chan zx.Reply, 1)
	o, wait := fs.enter(ctx, true, p)
	go func() {
		defer close(c)
		defer o.Done()
		if !wait() {
			c <- zx.Reply{Err: canceled("wstat", p)}
			return
		}
		nd, err := fs.wstat(p, d)
		c <- zx.Reply{Dir: nd, Err: err}
	}()
	return c
}

func (fs *FS) wstat(p string, d zx.Dir) (zx.Dir, error) {
	a, err := parseAttrs("wstat", p, d)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n, err := fs.lookup(p)
	if err != nil {
		return nil, fail("wstat", p, err)
	}
	cur := n.dir(p)
	immutable := func(k string, v *string) error {
		if v != nil && *v != cur[k] {
			return zx.E(zx.ErrInvalid, "wstat", p, "cannot change "+k)
		}
		return nil
	}
	typ := a.typ
	if err := immutable(zx.AName, a.name); err != nil {
		return nil, err
	}
	if err := immutable(zx.APath, a.path); err != nil {
		return nil, err
	}
	if err := immutable(zx.AType, &typ); typ != "" && err != nil {
		return nil, err
	}
	if err := immutable(zx.ATarget, a.target); err != nil {
		return nil, err
	}
	if err := immutable(zx.ARdev, a.rdev); err != nil {
		return nil, err
	}
	if a.size >= 0 && n.typ != zx.TypeFile && a.size != n.size() {
		if n.typ == zx.TypeDir {
			return nil, zx.E(zx.ErrIsDir, "wstat", p, "cannot resize a directory")
		}
		return nil, zx.E(zx.ErrInvalid, "wstat", p, "cannot resize a "+n.typ+" entry")
	}
	t := now()
	a.setMeta(n)
	resized := false
	if a.size >= 0 && n.typ == zx.TypeFile && a.size != n.data.size {
		n.data.truncate(a.size)
		resized = true
	}
	a.setTimes(n, resized, t)
	nd := n.dir(p)
	fs.notify(zx.Event{Kind: zx.Changed, Dir: nd})
	return nd, nil
}

// Move implements zx.Tree.
func (fs *FS) Move(ctx context.Context, from, to string) <-chan error {
	from, err := zx.CleanPath(from)
	if err != nil {
		return errc(zx.Errorf("move", from, err))
	}
	to, err = zx.CleanPath(to)
	if err != nil {
		return errc(zx.Errorf("move", to, err))
	}
	c := make(chan error, 1)
	o, wait := fs.enter(ctx, true, from, to)
	go func() {
		defer close(c)
		defer o.Done()
		if !wait() {
			c <- canceled("move", from)
			return
		}
		c <- fs.move(from, to)
	}()
	return c
}

func (fs *FS) move(from, to string) error {
	switch {
	case from == "/" || to == "/":
		return zx.E(zx.ErrInvalid, "move", from, "cannot move the root")
	case from != to && zx.HasPrefix(to, from):
		return zx.E(zx.ErrInvalid, "move", from, "cannot move "+from+" into itself")
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fp, fn, err := fs.walk(from)
	if err == nil && fn == nil {
		err = zx.ErrNotExist
	}
	if err != nil {
		return fail("move", from, err)
	}
	tp, tn, err := fs.walk(to)
	if err != nil {
		return fail("move", to, err)
	}
	if from == to {
		return nil
	}
	if zx.HasPrefix(from, to) {
		return zx.E(zx.ErrNotEmpty, "move", to, "")
	}
	if tn == fn {
		return nil // two names of one file: rename(2) does nothing
	}
	if tn != nil {
		switch {
		case tn.typ == zx.TypeDir && fn.typ != zx.TypeDir:
			return zx.E(zx.ErrIsDir, "move", to, "")
		case tn.typ == zx.TypeDir && len(tn.children) > 0:
			return zx.E(zx.ErrNotEmpty, "move", to, "")
		case tn.typ != zx.TypeDir && fn.typ == zx.TypeDir:
			return zx.E(zx.ErrNotDir, "move", to, "")
		}
	}
	_, fname := zx.Split(from)
	_, tname := zx.Split(to)
	t := now()
	if tn != nil {
		unlinked(tn)
	}
	delete(fp.children, fname)
	tp.children[tname] = fn
	fp.mtime, fp.ctime = t, t
	tp.mtime, tp.ctime = t, t
	fn.ctime = t
	fs.notifyMove(from, to, fn)
	return nil
}

// Remove implements zx.Tree.
func (fs *FS) Remove(ctx context.Context, p string) <-chan error {
	return fs.remove(ctx, "remove", p, false)
}

// RemoveAll implements zx.Tree.
func (fs *FS) RemoveAll(ctx context.Context, p string) <-chan error {
	return fs.remove(ctx, "removeall", p, true)
}

func (fs *FS) remove(ctx context.Context, op, p string, all bool) <-chan error {
	p, err := zx.CleanPath(p)
	if err != nil {
		return errc(zx.Errorf(op, p, err))
	}
	if p == "/" {
		return errc(zx.E(zx.ErrInvalid, op, p, "cannot remove the root"))
	}
	c := make(chan error, 1)
	o, wait := fs.enter(ctx, true, p)
	go func() {
		defer close(c)
		defer o.Done()
		if !wait() {
			c <- canceled(op, p)
			return
		}
		fs.mu.Lock()
		defer fs.mu.Unlock()
		parent, n, err := fs.walk(p)
		if err == nil && n == nil {
			err = zx.ErrNotExist
		}
		if err != nil {
			c <- fail(op, p, err)
			return
		}
		if !all && n.typ == zx.TypeDir && len(n.children) > 0 {
			c <- zx.E(zx.ErrNotEmpty, op, p, "")
			return
		}
		_, name := zx.Split(p)
		delete(parent.children, name)
		unlinked(n)
		t := now()
		parent.mtime, parent.ctime = t, t
		n.ctime = t
		fs.notifyRemove(p, n)
		c <- nil
	}()
	return c
}
