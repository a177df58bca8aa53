package server

import (
	"context"
	"fmt"
	"github.com/zxfs/zx/deleg"
	"io"
	"log/slog"
	"sort"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
	"github.com/zxfs/zx/mux"
	"github.com/zxfs/zx/proto"
)

var _ ctl.Controller = (*Server)(nil)

// Status implements ctl.Controller: the server's section of /Ctl, with
// one "user" line per connection.
func (s *Server) Status(ctx context.Context) ctl.Section {
	s.mu.Lock()
	var addrs []string
	for l := range s.listeners {
		addrs = append(addrs, l.Addr().String())
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	in, out := s.bytesIn, s.bytesOut
	s.mu.Unlock()
	sort.Strings(addrs)
	sort.Slice(conns, func(i, j int) bool { return conns[i].since.Before(conns[j].since) })
	addr := "-"
	if len(addrs) > 0 {
		addr = addrs[0]
	}
	sec := ctl.Section{Kind: "server", Addr: addr}
	sec.Lines = append(sec.Lines, "since "+ctl.Since(s.since), fmt.Sprintf("connections %d", len(conns)))
	for _, c := range conns {
		st := c.mc.Stats()
		in += st.BytesIn
		out += st.BytesOut
		user := c.user
		if user == "" {
			user = "-"
		}
		sec.Lines = append(sec.Lines, fmt.Sprintf("user %s %s since %s rtt %s in %d out %d",
			user, c.remote, ctl.Since(c.since), c.mc.RTT().Round(time.Microsecond), st.BytesIn, st.BytesOut))
	}
	nw, lag := s.cb.counts()
	sec.Lines = append(sec.Lines, fmt.Sprintf("callbacks watches %d lagging %d breaks %d waits %d lagged %d",
		nw, lag, s.cb.breaks.Load(), s.cb.waits.Load(), s.cb.lagged.Load()))
	ds := s.delegs.Stats()
	sec.Lines = append(sec.Lines, fmt.Sprintf("delegations held %d granted %d refused %d recalls %d returned %d revoked %d",
		ds.Held, ds.Granted, ds.Refused, ds.Recalls, ds.Returned, ds.Revoked))
	m := s.Memory()
	sec.Lines = append(sec.Lines, s.reqs.Line(), fmt.Sprintf("bytes in %d out %d", in, out),
		fmt.Sprintf("memory used %d peak %d limit %d", m.Used(), m.Peak(), m.Limit()))
	sec.Lines = append(sec.Lines, s.flags.Lines()...)
	return sec
}

// Command implements ctl.Controller. The server keeps nothing back, so
// "sync" has nothing of its own to do.
func (s *Server) Command(ctx context.Context, cmd string) error {
	if ok, err := s.flags.Command(cmd); ok {
		s.applyLevel()
		return err
	}
	if cmd == "sync" {
		return nil
	}
	return ctl.Unknown("server", cmd)
}

// noteEnded adds the counters of a connection that ended to the totals.
func (s *Server) noteEnded(st mux.Stats) {
	s.mu.Lock()
	s.bytesIn += st.BytesIn
	s.bytesOut += st.BytesOut
	s.mu.Unlock()
}

// ctlRequest serves a request for /Ctl of tree t: the server's section,
// then t's control file. It reports false for requests it leaves to the
// tree.
// The request acts as the connection's caller (ctx), so the layers below
// see who passes commands on.
func (c *conn) ctlRequest(ctx context.Context, st *mux.Stream, req *proto.Request, t zx.Tree) bool {
	f := &ctl.File{C: c.srv, Below: t}
	switch req.Op {
	case proto.OpStat:
		go c.reply(st, f.Stat(ctx), nil)
	case proto.OpGet:
		go c.items(st, f.Get(ctx, req.Off, req.Count))
	case proto.OpPut:
		if g, ok := t.(*guard); ok && g.readOnly {
			// Commands are writes: a read-only key gives none, to the
			// server or to the tree.
			go c.fail(st, g.refuse("put", req.Path))
			return true
		}
		var data io.Reader
		if !st.RecvEnded() {
			data = &streamReader{ctx: ctx, st: st}
		}
		go c.reply(st, f.Put(ctx, req.Dir, req.Off, data), nil)
	case proto.OpFind, proto.OpFindGet:
		go c.items(st, f.Find(ctx, zx.FindOpts{Pred: req.Pred, Spref: req.Spref, Dpref: req.Dpref, Depth0: int(req.Depth)}))
	case proto.OpAllocate:
		if c.srv.cfg.NoAlloc {
			return false // answered as an unknown request
		}
		go c.fail(st, zx.E(zx.ErrNotSupp, "allocate", ctl.Path, "the control file has no storage"))
	default:
		return false
	}
	return true
}

// baseLevel is the level of the configured LogLevel, or info.
func (c Config) baseLevel() slog.Level {
	if c.LogLevel == nil {
		return slog.LevelInfo
	}
	return c.LogLevel.Level()
}

// applyLevel sets LogLevel from the flags: info or lower while "verbose" or
// "debug" is on, the configured level otherwise.
func (s *Server) applyLevel() {
	if s.cfg.LogLevel == nil {
		return
	}
	l := s.baseLevel
	if s.flags.On("verbose") || s.flags.On("debug") {
		l = min(l, slog.LevelInfo)
	}
	s.cfg.LogLevel.Set(l)
}

// DelegStats returns the counters of the server's delegations.
func (s *Server) DelegStats() deleg.Stats { return s.delegs.Stats() }
