package server_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/server"
)

// lockedBuffer is a log sink safe for the server's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestVerboseFlag checks that "verbose on" passed to the server's /Ctl makes a server
// logging at warn log its connections, and "verbose off" quiets it again;
// "debug on" logs every request.
func TestVerboseFlag(t *testing.T) {
	var out lockedBuffer
	level := new(slog.LevelVar)
	level.Set(slog.LevelWarn)
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: level}))
	_, addr := serve(t, memfs.New(), server.Config{Logger: log, LogLevel: level})
	ctx := t.Context()
	setFlag := func(cmd string) {
		t.Helper()
		c := dial(t, addr)
		if _, err := zx.WriteFile(ctx, c.Tree(""), "/Ctl", nil, []byte("pass "+cmd+"\n")); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		c.Close()
	}
	connections := func() int { return strings.Count(out.String(), `msg=connection remote`) }

	c := dial(t, addr)
	if _, err := zx.Stat(ctx, c.Tree(""), "/"); err != nil {
		t.Fatal(err)
	}
	if n := connections(); n != 0 {
		t.Fatalf("quiet server logged %d connections:\n%s", n, out.String())
	}
	setFlag("verbose on")
	if level.Level() != slog.LevelInfo {
		t.Fatalf("verbose on: level %v, want info", level.Level())
	}
	dial(t, addr)
	eventually(t, "a logged connection", func() bool { return connections() >= 1 })

	setFlag("debug on")
	c = dial(t, addr)
	zx.Stat(ctx, c.Tree(""), "/some/where")
	eventually(t, "a logged request", func() bool { return strings.Contains(out.String(), "path=/some/where") })

	setFlag("debug off")
	setFlag("verbose off")
	if level.Level() != slog.LevelWarn {
		t.Fatalf("flags off: level %v, want warn", level.Level())
	}
	before := connections()
	c = dial(t, addr)
	zx.Stat(ctx, c.Tree(""), "/")
	if n := connections(); n != before {
		t.Fatalf("verbose off: %d more connections logged", n-before)
	}
}
