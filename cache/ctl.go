package cache

import (
	"context"
	"fmt"

	"github.com/zxfs/zx/ctl"
)

var _ ctl.Controller = (*Cache)(nil)

// Status implements ctl.Controller: the cache's section of /Ctl.
func (c *Cache) Status(ctx context.Context) ctl.Section {
	st := c.Stats()
	addr := "-"
	if s, ok := c.remote.(fmt.Stringer); ok {
		addr = s.String()
	}
	rate := 0.0
	if n := st.Hits + st.Misses; n > 0 {
		rate = float64(st.Hits) / float64(n)
	}
	mode := "window " + c.Coherency().String()
	if c.Watching() {
		mode = "watch"
	}
	s := ctl.Section{Kind: "cache", Addr: addr}
	s.Lines = append(s.Lines,
		fmt.Sprintf("entries %d", st.Entries),
		fmt.Sprintf("data %d", st.DataBytes),
		fmt.Sprintf("hits %d misses %d rate %.3f", st.Hits, st.Misses, rate),
		fmt.Sprintf("events %d invalidations %d", st.Events, st.Invalidations),
		fmt.Sprintf("prefetch %d entries %d cut %d waits %d gaveup %d", st.Prefetches, st.Prefetched, st.PrefetchCuts, st.PrefetchWaits, st.PrefetchGiveUps),
		"coherence "+mode,
	)
	if c.disk != nil {
		s.Lines = append(s.Lines, fmt.Sprintf("disk %d files %d hits %d dir %s", st.DiskBytes, st.DiskFiles, st.DiskHits, c.opts.Dir))
	}
	s.Lines = append(s.Lines, fmt.Sprintf("siblings %d files %d bytes %d live %d", st.SiblingStreams, st.SiblingFiles, st.SiblingBytes, st.SiblingLive))
	if c.wb == nil {
		// Writes go through: nothing is held back.
		s.Lines = append(s.Lines, "dirty 0", "writeback 0")
	} else {
		// Data close() returned for, not yet acknowledged by the server.
		ws := c.wb.Stats()
		s.Lines = append(s.Lines,
			fmt.Sprintf("dirty %d", ws.PendingBytes),
			fmt.Sprintf("writeback %d stuck %d written %d conflicts %d rejected %d replayed %d", ws.Pending, ws.Stuck, ws.Written, ws.Conflicts, ws.Rejected, ws.Replayed),
			"journal "+ws.Journal,
		)
		// The latest conflicts of this session; zx conflicts lists
		// them all, from the journal's list.
		cs, _ := c.wb.Conflicts()
		for _, cf := range cs {
			line := "conflict " + cf.Op + " " + cf.Path
			if cf.Copy != "" {
				line += " -> " + cf.Copy
			}
			s.Lines = append(s.Lines, line)
		}
	}
	if ds := c.Delegations(); ds != nil {
		s.Lines = append(s.Lines, fmt.Sprintf("delegations held %d granted %d refused %d recalls %d", len(ds.Held), ds.Granted, ds.Refused, ds.Recalls))
		for _, p := range ds.Held {
			s.Lines = append(s.Lines, "delegated "+p)
		}
	}
	s.Lines = append(s.Lines, c.ctlFlags.Lines()...)
	return s
}

// Command implements ctl.Controller. "flush" drops everything cached.
// "sync" waits for the write-back queue (if any) to reach the server.
func (c *Cache) Command(ctx context.Context, cmd string) error {
	if ok, err := c.ctlFlags.Command(cmd); ok {
		return err
	}
	switch cmd {
	case "sync":
		if c.wb != nil {
			return c.wb.Sync(ctx)
		}
		return nil
	case "flush":
		c.Flush()
		return nil
	}
	return ctl.Unknown("cache", cmd)
}

// ctlFile returns the cache's control file, over the remote's. Requests
// for it are never cached.
func (c *Cache) ctlFile() *ctl.File { return &ctl.File{C: c, Below: c.remote} }
