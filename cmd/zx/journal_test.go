package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/wan"
)

// crashedMount mounts the server at srvDir with --writeback through a
// link, runs before (with the link up), stalls the link, runs during, kills
// the mount process with SIGKILL, runs after (on the server's disk, with
// the mount dead and the link still stalled), lets the link come back and
// mounts again, which replays the journal. It returns the mount point and
// the cache directory.
func crashedMount(t *testing.T, srvDir string, before, during, after func(t *testing.T, mnt string)) (string, string) {
	t.Helper()
	addr := serve(t, srvDir)
	p, err := wan.Listen("127.0.0.1:0", addr, wan.Config{})
	must(t, err)
	t.Cleanup(func() { p.Close() })
	mnt, cdir := t.TempDir(), t.TempDir()
	loc := "zx://" + p.Addr() + "/"
	zxMount(t, "--writeback", "--cache-dir", cdir, loc, mnt)
	before(t, mnt)
	runZX(t, "", "sync", mnt).want(t, 0, "zx sync")
	// The link stalls: what the mount sends from now on stays in the
	// link, and the crash loses it.
	p.Stall(-1)
	during(t, mnt)
	pid := daemonPid(mnt)
	must(t, syscall.Kill(pid, syscall.SIGKILL))
	for i := 0; i < 100 && processAlive(pid); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	runZX(t, "", "umount", mnt).want(t, 0, "zx umount of a dead mount")
	// Whatever the dead client had sent into the stalled link is lost
	// with its connection.
	p.Cut()
	p.Resume()
	after(t, mnt)
	zxMount(t, "--writeback", "--cache-dir", cdir, loc, mnt)
	return mnt, cdir
}

// TestMountCrashDepends: with the link stalled, changes a program was
// told succeeded without the server (a directory made, a file renamed)
// and a file written after them and closed, then the mount process is
// killed: the next mount replays them all, in order, and every byte is on
// the server. Before, only the file's data was journaled: its replay
// failed (its directory, or its name, was never made) and was set aside.
func TestMountCrashDepends(t *testing.T) {
	canMount(t)
	for _, c := range []struct {
		name           string
		before, during func(t *testing.T, mnt string)
		want           map[string]string // on the server after the replay; "" must not exist
	}{{
		name:   "mkdir",
		before: func(t *testing.T, mnt string) { lsDir(t, mnt) },
		during: func(t *testing.T, mnt string) {
			must(t, os.Mkdir(filepath.Join(mnt, "D"), 0o755))
			must(t, os.WriteFile(filepath.Join(mnt, "D/file"), []byte("in a new directory"), 0o644))
		},
		want: map[string]string{"D/file": "in a new directory"},
	}, {
		name: "mkdir-p",
		before: func(t *testing.T, mnt string) {
			lsDir(t, mnt)
		},
		during: func(t *testing.T, mnt string) {
			must(t, os.MkdirAll(filepath.Join(mnt, "a/b/c"), 0o755))
			must(t, os.WriteFile(filepath.Join(mnt, "a/b/c/f"), []byte("three levels down"), 0o644))
			must(t, os.WriteFile(filepath.Join(mnt, "a/top"), []byte("one level down"), 0o644))
		},
		want: map[string]string{"a/b/c/f": "three levels down", "a/top": "one level down"},
	}, {
		name: "rename",
		before: func(t *testing.T, mnt string) {
			must(t, os.WriteFile(filepath.Join(mnt, "x"), []byte("old contents"), 0o644))
			lsDir(t, mnt)
		},
		during: func(t *testing.T, mnt string) {
			// Renamed without waiting (the mount knows how it turns
			// out), then a file written in a new directory.
			must(t, os.Rename(filepath.Join(mnt, "x"), filepath.Join(mnt, "y")))
			must(t, os.Mkdir(filepath.Join(mnt, "E"), 0o755))
			must(t, os.WriteFile(filepath.Join(mnt, "E/z"), []byte("after the rename"), 0o644))
		},
		want: map[string]string{"y": "old contents", "x": "", "E/z": "after the rename"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			srvDir := t.TempDir()
			mnt, cdir := crashedMount(t, srvDir, c.before, c.during, func(*testing.T, string) {})
			for name, want := range c.want {
				b, err := os.ReadFile(filepath.Join(srvDir, name))
				switch {
				case want == "" && !os.IsNotExist(err):
					t.Errorf("%s on the server after the replay: %q %v, want none", name, b, err)
				case want != "" && (err != nil || string(b) != want):
					t.Errorf("%s on the server after the replay: %q %v, want %q", name, b, err, want)
				}
				if want != "" {
					if b, err := os.ReadFile(filepath.Join(mnt, name)); err != nil || string(b) != want {
						t.Errorf("%s through the mount: %q %v", name, b, err)
					}
				}
			}
			if recs := journalPending(t, filepath.Join(cdir, "*", "journal")); len(recs) != 0 {
				t.Errorf("journal after the replay: %v", recs)
			}
			if r := runZX(t, "", "conflicts", "--json", mnt).want(t, 0, "zx conflicts"); r.stdout != "" {
				t.Errorf("conflicts after a clean replay:\n%s", r.stdout)
			}
		})
	}
}

// TestMountCrashConflict: records that cannot be applied as they were
// made, because the server changed meanwhile, keep every byte on the
// server and are listed as conflicts: a file whose directory was removed
// is written into the directory made again; one whose directory became a
// file goes to a conflict copy in the nearest directory that takes it.
func TestMountCrashConflict(t *testing.T) {
	canMount(t)
	srvDir := t.TempDir()
	mnt, _ := crashedMount(t, srvDir,
		func(t *testing.T, mnt string) {
			for _, d := range []string{"gone", "clash"} {
				must(t, os.Mkdir(filepath.Join(mnt, d), 0o755))
				must(t, os.WriteFile(filepath.Join(mnt, d, "f"), []byte("old"), 0o644))
			}
		},
		func(t *testing.T, mnt string) {
			for _, d := range []string{"gone", "clash"} {
				must(t, os.WriteFile(filepath.Join(mnt, d, "f"), []byte("written in "+d), 0o644))
			}
		},
		func(t *testing.T, _ string) {
			// Meanwhile, on the server.
			must(t, os.RemoveAll(filepath.Join(srvDir, "gone")))
			must(t, os.RemoveAll(filepath.Join(srvDir, "clash")))
			must(t, os.WriteFile(filepath.Join(srvDir, "clash"), []byte("a file now"), 0o644))
		})
	if b, err := os.ReadFile(filepath.Join(srvDir, "gone/f")); err != nil || string(b) != "written in gone" {
		t.Errorf("gone/f on the server: %q %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(srvDir, "clash")); string(b) != "a file now" {
		t.Errorf("the server's file clash was changed: %q", b)
	}
	copies, _ := filepath.Glob(filepath.Join(srvDir, "f.zx-conflict-*"))
	if len(copies) != 1 {
		t.Fatalf("conflict copies at the top: %v, want one", copies)
	}
	if b, _ := os.ReadFile(copies[0]); string(b) != "written in clash" {
		t.Errorf("the conflict copy holds %q", b)
	}
	r := runZX(t, "", "conflicts", "--json", mnt).want(t, 0, "zx conflicts")
	var got []cache.Conflict
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var cf cache.Conflict
		if err := json.Unmarshal([]byte(l), &cf); err != nil {
			t.Fatalf("zx conflicts --json: %q: %v", l, err)
		}
		got = append(got, cf)
	}
	if len(got) != 2 {
		t.Fatalf("zx conflicts lists %+v, want two", got)
	}
	for _, cf := range got {
		switch cf.Path {
		case "/gone/f":
			if cf.Copy != "" || !strings.Contains(cf.Reason, "made again") {
				t.Errorf("conflict %+v", cf)
			}
		case "/clash/f":
			if "/"+filepath.Base(copies[0]) != cf.Copy {
				t.Errorf("conflict %+v, want the copy %s", cf, copies[0])
			}
		default:
			t.Errorf("conflict %+v", cf)
		}
	}
	if r := runZX(t, "", "conflicts", mnt).want(t, 0, "zx conflicts"); !strings.Contains(r.stdout, "/clash/f") {
		t.Errorf("zx conflicts says:\n%s", r.stdout)
	}
	if ctl, _ := os.ReadFile(filepath.Join(mnt, "Ctl")); !strings.Contains(string(ctl), "conflicts 2 ") {
		t.Errorf("Ctl does not count the conflicts:\n%s", ctl)
	}
}

// lsDir writes a file in dir and lists it, so that the mount knows its
// names and may make changes in it without waiting.
func lsDir(t *testing.T, dir string) {
	t.Helper()
	// A first change that waited for the server shows the mount may
	// change the tree: until then it makes none without waiting.
	must(t, os.WriteFile(filepath.Join(dir, "first"), nil, 0o644))
	if _, err := os.ReadDir(dir); err != nil {
		t.Fatal(err)
	}
}
