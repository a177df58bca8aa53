package client

import (
	"context"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
	"github.com/zxfs/zx/proto"
)

var _ zx.Allocator = (*Tree)(nil)

// Allocate implements zx.Allocator with the allocate request. A server
// that does not offer proto.FeatureAlloc (older than the request) is
// never sent one: the call fails with zx.ErrNotSupp, as fallocate(2) does
// on a disk that cannot, and costs no round trip.
func (t *Tree) Allocate(ctx context.Context, path string, mode zx.AllocMode, off, n int64) <-chan zx.Reply {
	if t.local(path) {
		return replyc(zx.E(zx.ErrNotSupp, "allocate", ctl.Path, "the control file has no storage"))
	}
	ok, err := t.c.offers(ctx, proto.FeatureAlloc)
	if err != nil {
		return replyc(zx.Errorf("allocate", path, err))
	}
	if !ok {
		return replyc(zx.E(zx.ErrNotSupp, "allocate", path, "the server cannot allocate file space (it is older than the allocate request)"))
	}
	return t.call(ctx, &proto.Request{Op: proto.OpAllocate, Tree: t.name, Path: path, Mode: uint32(mode), Off: off, Count: n})
}

func replyc(err error) <-chan zx.Reply {
	c := make(chan zx.Reply, 1)
	c <- zx.Reply{Err: err}
	return c
}
