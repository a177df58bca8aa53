package mount_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/mount"
	"github.com/zxfs/zx/wan"
)

// TestDelegatedUntar: in the default mode, a directory the mount makes is
// delegated to it, and unpacking files into it waits for a constant number
// of round trips, not one per file (close returns once the file is
// journaled). Another mount that reads the files right after (no sleep,
// no polling) sees every byte: its lookups make the server recall the
// delegation, which the holder gives back after sending what it had.
func TestDelegatedUntar(t *testing.T) {
	const files = 30
	when := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	e := wbMount(t, wbSetup{copts: cache.Options{Journal: t.TempDir(), Delegate: true}})
	other := mnt(t, setup{addr: e.addr})
	must(t, os.WriteFile(e.p("first"), nil, 0o644)) // a first change, waited for
	must(t, e.m.Sync(context.Background()))
	waitFor(t, "the recalls stream", func() bool { return e.c.Delegations() != nil })
	e.proxy.SetConfig(wan.Config{RTT: 100 * time.Millisecond})
	rt := e.conn.Stats().RoundTrips
	untar(t, e.p("x"), files, when)
	n := e.conn.Stats().RoundTrips - rt
	t.Logf("tar -x of a directory and %d files at 100 ms RTT under a delegation: %d round trips", files, n)
	if n > 5 {
		t.Errorf("took %d round trips, want a constant (at most 5), not one per file", n)
	}
	if ds := e.c.Delegations(); ds == nil || len(ds.Held) != 1 || ds.Held[0] != "/x" {
		t.Fatalf("delegations %+v, want /x held", ds)
	}
	// The other mount reads at once what close returned for.
	for i := range files {
		name := fmt.Sprintf("x/f%d", i)
		if got := readFile(t, other.p(name)); got != fmt.Sprintf("data of f%d", i) {
			t.Fatalf("the other mount reads %s as %q right after the holder's close", name, got)
		}
	}
	if ds := e.c.Delegations(); ds.Recalls != 1 || len(ds.Held) != 0 {
		t.Errorf("delegations after the other mount looked: %+v, want /x recalled", ds)
	}
	checkUntar(t, filepath.Join(e.srvDir, "x"), files, when)
	// Given back, the holder's changes wait for the server again.
	rt = e.conn.Stats().RoundTrips
	must(t, os.WriteFile(e.p("x/after"), []byte("after the recall"), 0o644))
	if n := e.conn.Stats().RoundTrips - rt; n < 1 {
		t.Errorf("a close after the recall waited %d round trips, want at least 1", n)
	}
	if got := readFile(t, other.p("x/after")); got != "after the recall" {
		t.Errorf("the other mount reads %q", got)
	}
}

// TestDelegatedRenames: as git does, files written under a lock name and
// renamed over their final name, and scratch files unlinked, in a
// delegated directory: a constant number of round trips, and the other
// mount sees the final state at once.
func TestDelegatedRenames(t *testing.T) {
	const files = 60
	e := wbMount(t, wbSetup{copts: cache.Options{Journal: t.TempDir(), Delegate: true}})
	other := mnt(t, setup{addr: e.addr})
	must(t, os.WriteFile(e.p("first"), nil, 0o644))
	must(t, e.m.Sync(context.Background()))
	waitFor(t, "the recalls stream", func() bool { return e.c.Delegations() != nil })
	must(t, os.Mkdir(e.p("repo"), 0o755))
	waitFor(t, "the delegation", func() bool { return len(e.c.Delegations().Held) == 1 })
	e.proxy.SetConfig(wan.Config{RTT: 100 * time.Millisecond})
	rt := e.conn.Stats().RoundTrips
	start := time.Now()
	for i := range files {
		final := e.p(fmt.Sprintf("repo/obj%d", i))
		for round := range 2 { // written, then replaced
			lock := final + ".lock"
			must(t, os.WriteFile(lock, []byte(fmt.Sprintf("object %d round %d", i, round)), 0o644))
			must(t, os.Rename(lock, final))
		}
		scratch := e.p(fmt.Sprintf("repo/tmp%d", i))
		must(t, os.WriteFile(scratch, []byte("scratch"), 0o600))
		must(t, os.Remove(scratch))
	}
	n := e.conn.Stats().RoundTrips - rt
	t.Logf("%d files written twice under lock names and renamed, %d scratch files, at 100 ms RTT: %d round trips, %v", files, files, n, time.Since(start))
	if n > 3 {
		t.Errorf("took %d round trips, want a constant (at most 3)", n)
	}
	if s := e.m.Surprises(); s != 0 {
		t.Errorf("%d surprises", s)
	}
	ents, err := os.ReadDir(other.p("repo"))
	must(t, err)
	if len(ents) != files {
		t.Errorf("the other mount lists %d entries in repo, want %d", len(ents), files)
	}
	for i := range files {
		want := fmt.Sprintf("object %d round 1", i)
		if got := readFile(t, other.p(fmt.Sprintf("repo/obj%d", i))); got != want {
			t.Fatalf("the other mount reads obj%d as %q, want %q", i, got, want)
		}
		if got := e.server(t, fmt.Sprintf("repo/obj%d", i)); got != want {
			t.Fatalf("the server has obj%d as %q", i, got)
		}
	}
}

// TestDelegatedFsync: under a delegation, fsync of a file costs one
// round trip, whatever else is pending, and the file is then on the
// server's disk; with FsyncLocal it costs none.
func TestDelegatedFsync(t *testing.T) {
	for _, local := range []bool{false, true} {
		t.Run(fmt.Sprintf("local=%v", local), func(t *testing.T) {
			e := wbMount(t, wbSetup{copts: cache.Options{Journal: t.TempDir(), Delegate: true}, opts: mount.Options{FsyncLocal: local}})
			must(t, os.WriteFile(e.p("first"), nil, 0o644))
			must(t, e.m.Sync(context.Background()))
			waitFor(t, "the recalls stream", func() bool { return e.c.Delegations() != nil })
			must(t, os.Mkdir(e.p("db"), 0o755))
			waitFor(t, "the delegation", func() bool { return len(e.c.Delegations().Held) == 1 })
			e.proxy.SetConfig(wan.Config{RTT: 100 * time.Millisecond})
			for i := range 10 {
				must(t, os.WriteFile(e.p(fmt.Sprintf("db/other%d", i)), []byte("pending"), 0o644))
			}
			f, err := os.OpenFile(e.p("db/journal"), os.O_RDWR|os.O_CREATE, 0o644)
			must(t, err)
			defer f.Close()
			// What was sent in the background is in: the count
			// below is of what fsync waits for. (Requests in
			// flight when a program starts waiting hide its wait.)
			must(t, e.m.Sync(context.Background()))
			const commits = 10
			rt := e.conn.Stats().RoundTrips
			for i := range commits {
				_, err := f.WriteAt([]byte(fmt.Sprintf("commit %02d\n", i)), int64(i*10))
				must(t, err)
				must(t, f.Sync())
			}
			n := e.conn.Stats().RoundTrips - rt
			t.Logf("%d writes each followed by fsync, at 100 ms RTT: %d round trips", commits, n)
			want := int64(commits)
			if local {
				want = 0
			}
			if n > want || !local && n < want {
				t.Errorf("%d round trips, want %d (one per fsync)", n, want)
			}
			if !local {
				if got := e.server(t, "db/journal"); len(got) != commits*10 {
					t.Errorf("after the last fsync the server has %q", got)
				}
			}
		})
	}
}

// TestDelegatedWriteError: a write the server refuses after close()
// returned under a delegation (the server's disk is full) is reported by
// the next fsync of the file, with the server's error, and by zx sync;
// the data is kept on the client (the server has no room for a conflict
// copy either) and listed as a conflict.
func TestDelegatedWriteError(t *testing.T) {
	canMount(t)
	if os.Getuid() != 0 {
		t.Skip("!!! SKIPPING: the test mounts a small tmpfs as the server's disk, which needs root !!!")
	}
	disk := t.TempDir()
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=512k"); err != nil {
		t.Fatalf("mounting a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(disk, syscall.MNT_DETACH) })
	tr, err := lfs.New(disk, lfs.Options{})
	must(t, err)
	journal := t.TempDir()
	e := wbMount(t, wbSetup{srvDir: disk, addr: serve(t, tr), copts: cache.Options{Journal: journal, Delegate: true}})
	must(t, os.WriteFile(e.p("first"), nil, 0o644))
	must(t, e.m.Sync(context.Background()))
	waitFor(t, "the recalls stream", func() bool { return e.c.Delegations() != nil })
	must(t, os.Mkdir(e.p("D"), 0o755))
	waitFor(t, "the delegation", func() bool { return len(e.c.Delegations().Held) == 1 })
	big := make([]byte, 2<<20)
	for i := range big {
		big[i] = byte(i)
	}
	// close returns: the data is journaled; the server refuses it later.
	must(t, os.WriteFile(e.p("D/big"), big, 0o644))
	f, err := os.OpenFile(e.p("D/big"), os.O_WRONLY, 0)
	must(t, err)
	defer f.Close()
	if err := f.Sync(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("fsync after the server refused the data: %v, want ENOSPC", err)
	}
	if err := e.m.Sync(context.Background()); err == nil {
		t.Error("sync of the mount reports nothing")
	}
	cs, err := cache.ReadConflicts(journal)
	if err != nil || len(cs) != 1 || cs[0].Path != "/D/big" || !strings.HasPrefix(cs[0].Copy, "client:") {
		t.Fatalf("conflicts %+v %v, want /D/big kept on the client", cs, err)
	}
	kept, err := os.ReadFile(strings.TrimPrefix(cs[0].Copy, "client:"))
	if err != nil || !bytes.Contains(kept, big[:4096]) {
		t.Errorf("the data kept on the client: %d bytes, %v", len(kept), err)
	}
}

// TestDelegatedRecallMidWrite: a recall that comes while the holder has
// a file open and half written: the holder gives the delegation back
// (what it had closed goes first), and the close that follows waits for
// the server as without a delegation, so the other mount reads the whole
// file right after it.
func TestDelegatedRecallMidWrite(t *testing.T) {
	e := wbMount(t, wbSetup{copts: cache.Options{Journal: t.TempDir(), Delegate: true}})
	other := mnt(t, setup{addr: e.addr})
	must(t, os.WriteFile(e.p("first"), nil, 0o644))
	must(t, e.m.Sync(context.Background()))
	waitFor(t, "the recalls stream", func() bool { return e.c.Delegations() != nil })
	must(t, os.Mkdir(e.p("D"), 0o755))
	waitFor(t, "the delegation", func() bool { return len(e.c.Delegations().Held) == 1 })
	e.proxy.SetConfig(wan.Config{RTT: 50 * time.Millisecond})
	must(t, os.WriteFile(e.p("D/closed"), []byte("closed before the recall"), 0o644))
	f, err := os.Create(e.p("D/open"))
	must(t, err)
	defer f.Close()
	_, err = f.WriteString("part one, ")
	must(t, err)
	// The other mount looks: the recall comes mid-write.
	if got := readFile(t, other.p("D/closed")); got != "closed before the recall" {
		t.Fatalf("the other mount reads %q", got)
	}
	if ds := e.c.Delegations(); len(ds.Held) != 0 || ds.Recalls != 1 {
		t.Fatalf("delegations after the other mount looked: %+v", ds)
	}
	_, err = f.WriteString("part two")
	must(t, err)
	must(t, f.Close())
	if got := readFile(t, other.p("D/open")); got != "part one, part two" {
		t.Fatalf("the other mount reads %q right after close", got)
	}
}

// TestDelegatedExistingDir: changes in a directory the mount did not make
// (git's index, refs and logs): the first asks for a delegation of the
// directory and waits; once it is granted, writing a lock file and
// renaming it over the existing file costs nothing, and another mount
// still reads the last version at once.
func TestDelegatedExistingDir(t *testing.T) {
	const rounds = 20
	e := wbMount(t, wbSetup{copts: cache.Options{Journal: t.TempDir(), Delegate: true}})
	other := mnt(t, setup{addr: e.addr})
	must(t, os.Mkdir(filepath.Join(e.srvDir, "repo"), 0o755))
	must(t, os.WriteFile(filepath.Join(e.srvDir, "repo/index"), []byte("made on the server"), 0o644))
	must(t, os.WriteFile(e.p("first"), nil, 0o644))
	must(t, e.m.Sync(context.Background()))
	waitFor(t, "the recalls stream", func() bool { return e.c.Delegations() != nil })
	waitFor(t, "the server's notice of repo", func() bool { _, err := os.ReadDir(e.p("repo")); return err == nil })
	e.proxy.SetConfig(wan.Config{RTT: 100 * time.Millisecond})
	rt := e.conn.Stats().RoundTrips
	for i := range rounds {
		must(t, os.WriteFile(e.p("repo/index.lock"), []byte(fmt.Sprintf("index version %d", i)), 0o644))
		must(t, os.Rename(e.p("repo/index.lock"), e.p("repo/index")))
	}
	n := e.conn.Stats().RoundTrips - rt
	t.Logf("%d lock-write-rename rounds in an existing directory at 100 ms RTT: %d round trips", rounds, n)
	if n > 4 {
		t.Errorf("%d round trips, want a few for the first change, none after", n)
	}
	if ds := e.c.Delegations(); len(ds.Held) != 1 || ds.Held[0] != "/repo" {
		t.Errorf("delegations %+v, want /repo held", ds)
	}
	want := fmt.Sprintf("index version %d", rounds-1)
	if got := readFile(t, other.p("repo/index")); got != want {
		t.Errorf("the other mount reads %q, want %q", got, want)
	}
	if got := e.server(t, "repo/index"); got != want {
		t.Errorf("the server has %q", got)
	}
}
