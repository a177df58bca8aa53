package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
)

func TestServeLimitFlags(t *testing.T) {
	// zx serve --max-conns 1: a second client is told why it is refused.
	dir := t.TempDir()
	writeFile(t, dir+"/f", []byte("x"))
	addr := serve(t, dir, "--max-conns", "1", "--request-rate", "0", "--idle-timeout", "0")
	ctx := context.Background()
	c, err := client.Dial(ctx, addr, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := zx.Stat(ctx, c.Tree(""), "/f"); err != nil {
		t.Fatal(err)
	}
	r := runZX(t, "", "stat", "zx://"+addr+"/f").want(t, 1, "stat beyond --max-conns")
	if !strings.Contains(r.stderr, "too many connections (limit 1)") {
		t.Errorf("stderr %q does not say which limit", r.stderr)
	}
	c.Close()
	// Once the server has noticed the first client left, there is room.
	for i := 0; ; i++ {
		r := runZX(t, "", "stat", "zx://"+addr+"/f")
		if r.code == 0 {
			break
		}
		if i == 50 {
			r.want(t, 0, "stat once the first client left")
		}
		time.Sleep(20 * time.Millisecond)
	}

	for _, bad := range [][]string{
		{"--max-conns", "0"},
		{"--max-memory", "lots"},
		{"--request-rate", "-1"},
		{"--keepalive", "0"},
		{"--write-timeout", "-1s"},
	} {
		r := runZX(t, "", append([]string{"serve", "--listen", "127.0.0.1:0"}, append(bad, dir)...)...).want(t, 2, "serve "+strings.Join(bad, " "))
		if r.stderr == "" {
			t.Errorf("serve %v: no message", bad)
		}
	}
}
