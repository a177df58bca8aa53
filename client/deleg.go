package client

import (
	"context"
	"io"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/proto"
)

var _ zx.Delegator = (*Tree)(nil)

// Delegates reports whether the server grants delegations
// (proto.FeatureDeleg).
func (c *Conn) Delegates(ctx context.Context) (bool, error) {
	return c.offers(ctx, proto.FeatureDeleg)
}

// Recalls implements zx.Delegator. The stream is opened again after a
// lost connection (the server keeps the owner's delegations for its lease
// meanwhile): it then sends Ready again, and recalls sent while the
// connection was down are sent again. It is not counted as a round trip.
func (t *Tree) Recalls(ctx context.Context, owner string) <-chan zx.Recall {
	rc := make(chan zx.Recall)
	go func() {
		defer close(rc)
		send := func(r zx.Recall) bool {
			select {
			case rc <- r:
				return true
			case <-ctx.Done():
				return false
			}
		}
		if ok, err := t.c.offers(ctx, proto.FeatureDeleg); err != nil || !ok {
			if err == nil {
				err = zx.E(zx.ErrNotSupp, "recalls", "/", "the server grants no delegations")
			}
			send(zx.Recall{Err: err})
			return
		}
		p, st, err := t.begin(ctx, &proto.Request{Op: proto.OpRecalls, Tree: t.name, Path: "/", Owner: owner}, mux.Uncounted, plainRetry)
		if err != nil {
			send(zx.Recall{Err: err})
			return
		}
		defer t.c.finish(p)
		for {
			m, err := st.Recv(ctx)
			if err == io.EOF {
				return
			}
			if err != nil {
				if st2, err2 := t.c.resume(ctx, p, err); err2 == nil {
					st = st2
					continue
				} else {
					err = err2
				}
				send(zx.Recall{Err: zx.Errorf("recalls", "/", err)})
				return
			}
			var r zx.Recall
			switch m.Type {
			case proto.FEvent:
				ev, perr := proto.ParseEvent(m.Data)
				switch {
				case perr != nil:
					r.Err = perr
				case ev.Kind == uint8(zx.Ready):
					r.Ready = true
				case ev.Kind == proto.EventRecall:
					r.Path = ev.Dir.Path()
				default:
					continue
				}
			case proto.FErr:
				r.Err = replyErr("recalls", "/", m)
			default:
				continue
			}
			if !send(r) || r.Err != nil {
				st.Cancel(ctx.Err())
				return
			}
		}
	}()
	return rc
}

// Delegate implements zx.Delegator.
func (t *Tree) Delegate(ctx context.Context, path string) <-chan zx.Grant {
	gc := make(chan zx.Grant, 1)
	if ok, err := t.c.offers(ctx, proto.FeatureDeleg); err != nil || !ok {
		if err == nil {
			err = zx.E(zx.ErrNotSupp, "delegate", path, "the server grants no delegations")
		}
		gc <- zx.Grant{Err: err}
		return gc
	}
	req := &proto.Request{Op: proto.OpDelegate, Tree: t.name, Path: path}
	p, st, err := t.begin(ctx, req, 0, retryFor(req))
	if err != nil {
		gc <- zx.Grant{Err: err}
		return gc
	}
	go func() {
		defer t.c.finish(p)
		var g zx.Grant
		for {
			m, err := st.Recv(ctx)
			if err == io.EOF {
				break
			}
			if err != nil {
				if st2, err2 := t.c.resume(ctx, p, err); err2 == nil {
					st = st2
					continue
				} else {
					err = err2
				}
				g.Err = zx.Errorf("delegate", path, err)
				break
			}
			switch m.Type {
			case proto.FErr:
				g.Err = replyErr("delegate", path, m)
			case proto.FData:
				pg, perr := proto.ParseGrant(m.Data)
				if perr != nil {
					g.Err = zx.Errorf("delegate", path, perr)
					break
				}
				g.Held, g.Revoked, g.All, g.Touched = pg.Held, pg.Revoked, pg.All, pg.Touched
				if pg.Refused {
					g.Err = zx.E(zx.ErrBusy, "delegate", path, "another client holds it or used it lately")
				}
			}
		}
		gc <- g
	}()
	return gc
}

// Return implements zx.Delegator.
func (t *Tree) Return(ctx context.Context, path string) <-chan error {
	return t.delegReq(ctx, proto.OpReturn, path)
}

func (t *Tree) delegReq(ctx context.Context, op uint8, path string) <-chan error {
	if ok, err := t.c.offers(ctx, proto.FeatureDeleg); err != nil || !ok {
		if err == nil {
			err = zx.E(zx.ErrNotSupp, proto.OpName(op), path, "the server grants no delegations")
		}
		return errc(err)
	}
	return t.status(ctx, &proto.Request{Op: op, Tree: t.name, Path: path})
}
