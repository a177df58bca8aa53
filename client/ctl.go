package client

import (
	"context"
	"fmt"
	"time"

	"github.com/zxfs/zx/ctl"
)

var _ ctl.Controller = (*Tree)(nil)

// Status implements ctl.Controller: the client's section of /Ctl, about
// its connection.
func (t *Tree) Status(ctx context.Context) ctl.Section {
	c := t.c
	st := c.Stats()
	s := ctl.Section{Kind: "client", Addr: t.String()}
	link := "link up"
	c.mu.Lock()
	if !c.downSince.IsZero() {
		link = "link down since " + ctl.Since(c.downSince)
		if c.redialErr != nil {
			link += ": " + c.redialErr.Error()
		}
	}
	c.mu.Unlock()
	s.Lines = append(s.Lines,
		"since "+ctl.Since(c.since),
		link,
		fmt.Sprintf("rtt %s", c.RTT().Round(time.Microsecond)),
		fmt.Sprintf("roundtrips %d", st.RoundTrips),
		c.reqs.Line(),
		fmt.Sprintf("bytes in %d out %d", st.BytesIn, st.BytesOut),
	)
	if c.reconnects() {
		// Connections re-established, and calls that waited for one.
		s.Lines = append(s.Lines, fmt.Sprintf("reconnects %d waits %d", c.Reconnects(), c.ReconnectWaits()))
	}
	s.Lines = append(s.Lines, c.flags.Lines()...)
	return s
}

// Command implements ctl.Controller. The client keeps nothing back:
// every request is sent when it is made, so "sync" has nothing to do
// here (the layers below flush their own).
func (t *Tree) Command(ctx context.Context, cmd string) error {
	if ok, err := t.c.flags.Command(cmd); ok {
		return err
	}
	if cmd == "sync" {
		return nil
	}
	return ctl.Unknown("client", cmd)
}

// ctlFile returns the client's control file, over the server's.
func (t *Tree) ctlFile() *ctl.File {
	return &ctl.File{C: t, Below: &Tree{c: t.c, name: t.name, raw: true}}
}

// local reports whether a request for path is for the client's own
// control file.
func (t *Tree) local(path string) bool { return !t.raw && ctl.Is(path) }

// String returns the tree's location, zx://HOST:PORT/ or
// zx://HOST:PORT/@TREE/.
func (t *Tree) String() string {
	s := "zx://" + t.c.addr + "/"
	if t.name != "" {
		s += "@" + t.name + "/"
	}
	return s
}
