package subtree

import (
	"context"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/pred"
)

// findFallback walks a subtree whose tree cannot find, through its own
// Stat and Get (which already rewrite paths).
func findFallback(ctx context.Context, t *Tree, p string, o zx.FindOpts) <-chan zx.Item {
	return pred.Find(ctx, struct{ zx.Tree }{t}, p, o)
}
