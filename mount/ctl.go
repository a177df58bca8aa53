package mount

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
)

// The mount's control file is /Ctl at the root of the mount: the mount's
// own section, then the tree's control file (the cache's, which goes on
// down the stack). It is a node of its own, never in a listing, opened
// with direct I/O so that the kernel caches none of it: each open reads
// the status afresh, and each line written is a command run before the
// write returns (so "echo sync > Ctl" returns once every layer below is
// flushed).

var _ ctl.Controller = (*FS)(nil)

// Status implements ctl.Controller: the mount's section of /Ctl.
func (m *FS) Status(ctx context.Context) ctl.Section {
	open, dirty, dirtyBytes := 0, 0, int64(0)
	m.eachNode(func(n *node) {
		n.mu.Lock()
		if n.ws != nil {
			open += n.ws.refs
		}
		n.mu.Unlock()
		if sz, ok := n.dirtySize(); ok {
			dirty++
			dirtyBytes += sz
		}
	})
	mode := fmt.Sprintf("window %s", m.opts.Coherency)
	if m.watching() {
		mode = fmt.Sprintf("watch %s", m.opts.Long)
	}
	writes := "strict"
	switch {
	case m.opts.WriteBack:
		writes = "writeback"
	case m.dl != nil:
		writes = "delegations"
	}
	s := ctl.Section{Kind: "mount", Addr: m.dir}
	s.Lines = append(s.Lines,
		"since "+ctl.Since(m.since),
		// What close and changes wait for (docs/cache.md).
		"mode "+writes,
		fmt.Sprintf("handles %d", open),
		// Writes are held in open handles until close or fsync: the
		// files with writes not yet sent, and their sizes.
		fmt.Sprintf("dirty %d", dirtyBytes),
		fmt.Sprintf("writeback %d", dirty),
		// Changes answered without waiting, not journaled, whose
		// replies have not come: held only in this process.
		fmt.Sprintf("pipelined %d", m.unsent.Load()),
		fmt.Sprintf("surprises %d", m.surprises.Load()),
		"coherence "+mode,
		fmt.Sprintf("timeout %s", m.opts.Timeout),
		fmt.Sprintf("readonly %v", m.opts.ReadOnly),
	)
	s.Lines = append(s.Lines, m.flags.Lines()...)
	return s
}

// Command implements ctl.Controller. "sync" sends the writes held in
// every open handle, and waits for their replies and for the requests
// the mount pipelined (see Sync).
func (m *FS) Command(ctx context.Context, cmd string) error {
	if ok, err := m.flags.Command(cmd); ok {
		return err
	}
	if cmd != "sync" {
		return ctl.Unknown("mount", cmd)
	}
	var first syscall.Errno
	m.eachNode(func(n *node) {
		if e := n.flushAll(ctx); e != 0 && first == 0 {
			first = e
		}
	})
	if first != 0 {
		return zx.Errorf("sync", "/", first)
	}
	// Then the requests the mount pipelined (and its write-back queue):
	// the layers below flush their own when sync is passed on.
	return m.Sync(ctx)
}

// eachNode calls f for every node the kernel knows.
func (m *FS) eachNode(f func(*node)) {
	seen := map[*fs.Inode]bool{}
	var walk func(in *fs.Inode)
	walk = func(in *fs.Inode) {
		if seen[in] {
			return
		}
		seen[in] = true
		if n, ok := in.Operations().(*node); ok {
			f(n)
		}
		for _, c := range in.Children() {
			walk(c)
		}
	}
	walk(m.root.EmbeddedInode())
}

// ctlFile returns the mount's control file, over the tree's.
func (m *FS) ctlFile() *ctl.File { return &ctl.File{C: m, Below: m.t} }

// ctlLookup answers the lookup of Ctl in the root.
func (n *node) ctlLookup(ctx context.Context, out *fuse.EntryOut) *fs.Inode {
	m := n.m
	d := m.ctlFile().Entry()
	ino := m.ino(d, ctl.Path)
	in := n.NewInode(ctx, &ctlNode{m: m}, fs.StableAttr{Mode: syscall.S_IFREG, Ino: ino})
	m.fill(d, ino, &out.Attr)
	out.SetEntryTimeout(m.timeout())
	out.SetAttrTimeout(0)
	return in
}

// ctlNode is the control file.
type ctlNode struct {
	fs.Inode
	m *FS
}

var (
	_ fs.NodeGetattrer = (*ctlNode)(nil)
	_ fs.NodeSetattrer = (*ctlNode)(nil)
	_ fs.NodeOpener    = (*ctlNode)(nil)
)

// Getattr implements fs.NodeGetattrer: size 0, never cached.
func (c *ctlNode) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	c.m.fill(c.m.ctlFile().Entry(), c.StableAttr().Ino, &out.Attr)
	out.SetTimeout(0)
	return 0
}

// Setattr implements fs.NodeSetattrer: truncation (as by "echo cmd >
// Ctl") is accepted and does nothing; nothing else may change.
func (c *ctlNode) Setattr(ctx context.Context, f fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if _, ok := in.GetSize(); !ok || in.Valid&^(fuse.FATTR_SIZE|fuse.FATTR_FH|fuse.FATTR_LOCKOWNER|fuse.FATTR_MTIME|fuse.FATTR_MTIME_NOW|fuse.FATTR_ATIME|fuse.FATTR_ATIME_NOW|fuse.FATTR_CTIME) != 0 {
		return syscall.EPERM
	}
	return c.Getattr(ctx, f, out)
}

// Open implements fs.NodeOpener, with direct I/O: the kernel keeps no
// pages of it and ignores its size.
func (c *ctlNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return &ctlHandle{m: c.m}, fuse.FOPEN_DIRECT_IO, 0
}

// ctlHandle is an open control file. Reads see the status as it was at
// the first read (or the last read at offset 0), so that a reader
// reading in pieces gets one consistent text.
type ctlHandle struct {
	m *FS

	mu   sync.Mutex
	text []byte // the status, read
	line []byte // a command line written but not yet ended
}

var (
	_ fs.FileReader  = (*ctlHandle)(nil)
	_ fs.FileWriter  = (*ctlHandle)(nil)
	_ fs.FileFlusher = (*ctlHandle)(nil)
)

// Read implements fs.FileReader.
func (h *ctlHandle) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.text == nil || off == 0 {
		rctx, cancel := h.m.rctx(ctx)
		text, err := h.m.ctlFile().Read(rctx)
		cancel()
		if err != nil {
			return nil, errno(err)
		}
		h.text = text
	}
	if off >= int64(len(h.text)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h.text[off:min(off+int64(len(dest)), int64(len(h.text)))]), 0
}

// Write implements fs.FileWriter: each complete line is run before the
// write returns; a failed command fails the write.
func (h *ctlHandle) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.line = append(h.line, data...)
	i := bytes.LastIndexByte(h.line, '\n')
	if i < 0 {
		return uint32(len(data)), 0
	}
	cmds := string(h.line[:i])
	h.line = append([]byte(nil), h.line[i+1:]...)
	if e := h.run(ctx, cmds); e != 0 {
		return 0, e
	}
	return uint32(len(data)), 0
}

// Flush implements fs.FileFlusher: a last line without a newline is run
// at close.
func (h *ctlHandle) Flush(ctx context.Context) syscall.Errno {
	h.mu.Lock()
	defer h.mu.Unlock()
	cmds := string(h.line)
	h.line = nil
	return h.run(ctx, cmds)
}

func (h *ctlHandle) run(ctx context.Context, cmds string) syscall.Errno {
	if strings.TrimSpace(cmds) == "" {
		return 0
	}
	if h.m.flags.On("debug") {
		h.m.log.Info("mount: control", "commands", cmds)
	}
	rctx, cancel := h.m.rctx(ctx)
	defer cancel()
	if err := h.m.ctlFile().Write(rctx, []byte(cmds)); err != nil {
		h.m.log.Warn("mount: control command failed", "commands", cmds, "err", err)
		return errno(err)
	}
	return 0
}
