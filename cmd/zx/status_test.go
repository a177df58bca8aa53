package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// status runs zx status --json on mnt.
func status(t *testing.T, mnt string) mountStatus {
	t.Helper()
	r := runZX(t, "", "status", "--json", mnt).want(t, 0, "zx status")
	var st mountStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("zx status --json: %q: %v", r.stdout, err)
	}
	return st
}

// TestStatus: zx status says the mount's location, mode, link, what it
// holds that the server does not have, and its delegations.
func TestStatus(t *testing.T) {
	canMount(t)
	addr := serve(t, t.TempDir())
	mnt := t.TempDir()
	zxMount(t, "--cache-dir", t.TempDir(), "--timeout", "30s", "zx://"+addr+"/", mnt)
	must(t, os.WriteFile(filepath.Join(mnt, "first"), nil, 0o644))
	must(t, os.Mkdir(filepath.Join(mnt, "D"), 0o755))
	waitFor(t, "the delegation of D", func() bool { return len(status(t, mnt).Delegations) == 1 })
	st := status(t, mnt)
	if st.Mode != "delegations" || st.Link != "up" || st.Pending != 0 || st.Delegations[0] != "/D" || !strings.HasPrefix(st.Location, "zx://") {
		t.Fatalf("status %+v", st)
	}
	runZX(t, "", "status", t.TempDir()).want(t, 1, "zx status of a directory that is not a mount")
}
