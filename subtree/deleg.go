package subtree

import (
	"context"

	"github.com/zxfs/zx"
)

var _ zx.Delegator = (*Tree)(nil)

// Recalls implements zx.Delegator: recalls of paths outside the subtree
// (delegations the owner holds through another view of the tree) are
// not shown.
func (t *Tree) Recalls(ctx context.Context, owner string) <-chan zx.Recall {
	out := make(chan zx.Recall)
	d, ok := t.T.(zx.Delegator)
	if !ok {
		go func() {
			defer close(out)
			select {
			case out <- zx.Recall{Err: zx.E(zx.ErrNotSupp, "recalls", "/", "the tree cannot delegate")}:
			case <-ctx.Done():
			}
		}()
		return out
	}
	in := d.Recalls(ctx, owner)
	go func() {
		defer close(out)
		for r := range in {
			if r.Path != "" {
				if r.Path != t.Prefix && !zx.HasPrefix(r.Path, t.Prefix) {
					continue
				}
				r.Path = t.back(r.Path)
			}
			select {
			case out <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// Delegate implements zx.Delegator.
func (t *Tree) Delegate(ctx context.Context, p string) <-chan zx.Grant {
	out := make(chan zx.Grant, 1)
	d, ok := t.T.(zx.Delegator)
	if !ok {
		out <- zx.Grant{Err: <-notSupp("delegate", p)}
		return out
	}
	in := d.Delegate(ctx, t.real(p))
	go func() {
		g := <-in
		var touched []string
		for _, q := range g.Touched {
			if q == t.Prefix || zx.HasPrefix(q, t.Prefix) {
				touched = append(touched, t.back(q))
			} else if zx.HasPrefix(t.Prefix, q) {
				touched = append(touched, "/")
			}
		}
		g.Touched = touched
		out <- g
	}()
	return out
}

// Return implements zx.Delegator.
func (t *Tree) Return(ctx context.Context, p string) <-chan error {
	if d, ok := t.T.(zx.Delegator); ok {
		return d.Return(ctx, t.real(p))
	}
	return notSupp("return", p)
}

func notSupp(op, p string) <-chan error {
	c := make(chan error, 1)
	c <- zx.E(zx.ErrNotSupp, op, p, "the tree cannot delegate")
	return c
}
