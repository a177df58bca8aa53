package mux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/proto"
)

// A side that offers the dirs feature takes DIRS messages like any other,
// and counts the entries they hold as received (what a resumed listing
// counts on).
func TestDirsDelivered(t *testing.T) {
	ccfg := Config{Features: []string{proto.FeatureDirs}}
	cli, _ := pair2(t, ccfg, Config{}, func(st *Stream) {
		h, err := st.Conn().PeerHello(st.Context())
		if err != nil || !strings.Contains(fmt.Sprint(h.Features), proto.FeatureDirs) {
			st.Send(st.Context(), proto.FErr, proto.AppendError(nil, fmt.Errorf("peer features %v, %v", h, err)), true)
			return
		}
		for i := range 3 {
			ds := make([]zx.Dir, i+1)
			for j := range ds {
				ds[j] = zx.Dir{"path": fmt.Sprintf("/%d/%d", i, j)}
			}
			st.Send(st.Context(), proto.FDirs, proto.AppendDirs(nil, ds), false)
		}
		st.Send(st.Context(), proto.FDir, proto.AppendDir(nil, zx.Dir{"path": "/x"}), false)
		st.Send(st.Context(), proto.FData, nil, true)
	})
	ctx := context.Background()
	st, err := cli.Open(ctx, []byte("list"), 0)
	if err != nil {
		t.Fatal(err)
	}
	var types []uint8
	for {
		m, err := st.Recv(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Type == proto.FErr {
			e, _ := proto.ParseError(m.Data)
			t.Fatal(e)
		}
		types = append(types, m.Type)
	}
	if want := []uint8{proto.FDirs, proto.FDirs, proto.FDirs, proto.FDir, proto.FData}; fmt.Sprint(types) != fmt.Sprint(want) {
		t.Fatalf("messages %v, want %v", types, want)
	}
	if _, dirs := st.Received(); dirs != 1+2+3+1 {
		t.Fatalf("Received counts %d entries, want 7", dirs)
	}
}

// A DIRS frame to a side that did not offer the feature is a protocol
// violation: the connection ends with a goaway saying so.
func TestDirsNotOffered(t *testing.T) {
	f := proto.AppendFrame(nil, proto.Header{Type: proto.FReq, Stream: 1}, []byte("put"))
	f = proto.AppendFrame(f, proto.Header{Type: proto.FDirs, Stream: 1}, proto.AppendDirs(nil, []zx.Dir{{"a": "b"}}))
	e := refused(t, Config{}, f)
	if !errors.Is(e, zx.ErrProtocol) || !strings.Contains(e.Msg, "dirs") {
		t.Fatalf("goaway %v, want a protocol error about dirs", e)
	}
}
