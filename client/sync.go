package client

import (
	"context"
	"slices"
	"strings"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
	"github.com/zxfs/zx/proto"
)

var _ zx.Syncer = (*Tree)(nil)

// Sync implements zx.Syncer: it returns once what was written to path
// before it is on the server's disk (for "/", the whole tree), as
// fsync(2) does for a local file. Like any request it is sent at once and
// applied after the requests issued before it on overlapping paths, so a
// caller may issue its writes and the Sync without waiting, and then wait
// for all: making data durable costs no round trip of its own.
//
// A server older than the sync request (it does not offer
// proto.FeatureSync) is asked through its control file instead: a stat of
// path, sent at once, tells when the earlier writes on path are applied,
// and then "sync" is written to the server's /Ctl, which flushes the whole
// file system holding the tree (syncfs). That costs a second round trip.
func (t *Tree) Sync(ctx context.Context, path string) <-chan error {
	if t.local(path) {
		return errc(nil) // the client's own control file holds nothing
	}
	ok, err := t.c.offers(ctx, proto.FeatureSync)
	if err != nil {
		return errc(zx.Errorf("sync", path, err))
	}
	if ok {
		return t.status(ctx, &proto.Request{Op: proto.OpSync, Tree: t.name, Path: path})
	}
	sc := t.Stat(ctx, path)
	ec := make(chan error, 1)
	go func() {
		if r := <-sc; r.Err != nil {
			ec <- zx.Errorf("sync", path, r.Err)
			return
		}
		raw := &Tree{c: t.c, name: t.name, raw: true}
		r := <-raw.Put(ctx, ctl.Path, zx.Dir{}, 0, strings.NewReader("sync\n"))
		if r.Err != nil {
			r.Err = zx.Errorf("sync", path, r.Err)
		}
		ec <- r.Err
	}()
	return ec
}

// SyncsInOrder reports whether the server takes the sync request
// (proto.FeatureSync), so that Sync costs no round trip of its own; it
// waits for the server's hello if it has not arrived yet.
func (c *Conn) SyncsInOrder(ctx context.Context) (bool, error) {
	return c.offers(ctx, proto.FeatureSync)
}

// offers reports whether the server offered feature in its hello.
func (c *Conn) offers(ctx context.Context, feature string) (bool, error) {
	mc, err := c.current(ctx)
	if err != nil {
		return false, err
	}
	h, err := mc.PeerHello(ctx)
	if err != nil {
		return false, err
	}
	return slices.Contains(h.Features, feature), nil
}

func errc(err error) <-chan error {
	c := make(chan error, 1)
	c <- err
	return c
}
