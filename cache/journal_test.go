package cache_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zxfs/zx/cache"
	"github.com/zxfs/zx/memfs"
	"github.com/zxfs/zx/zxtest"
)

// syncLog records what the journal's group commit fsyncs.
type syncLog struct {
	mu    sync.Mutex
	names []string
	dirs  chan string
}

func (s *syncLog) hook(name string) {
	s.mu.Lock()
	s.names = append(s.names, name)
	s.mu.Unlock()
	if fi, err := os.Stat(name); err == nil && fi.IsDir() && s.dirs != nil {
		s.dirs <- name
	}
}

func (s *syncLog) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.names
	s.names = nil
	return n
}

func recFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.rec"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func whole(data string) []cache.Op { return []cache.Op{{Whole: true, Len: int64(len(data))}} }

// TestJournalGroupCommit: a record written by Write (close) is not
// fsynced on the spot; the group commit fsyncs the records still in the
// journal (acknowledged ones are gone) and then the directory, once per
// batch; the background committer does it by itself.
func TestJournalGroupCommit(t *testing.T) {
	ctx := t.Context()
	fs := memfs.New()
	srv, addr := serveClosable(t, fs)
	conn := dial(t, addr)
	dir := t.TempDir()
	w, err := cache.NewWriteBack(dir, conn.Tree(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	sl := &syncLog{dirs: make(chan string, 100)}
	cache.SetJournalSyncHook(w, sl.hook)

	// Acknowledged records leave the journal; the committer then syncs
	// the directory (their removal) and no file.
	for i := range 3 {
		if err := w.Write(fmt.Sprintf("/f%d", i), whole("data"), []byte("data"), 4); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if m := recFiles(t, dir); len(m) != 0 {
		t.Fatalf("acknowledged records left in the journal: %v", m)
	}
	zxtest.CheckTree(t, fs, "/", "/f0:data", "/f1:data", "/f2:data")
	select {
	case d := <-sl.dirs:
		if d != dir {
			t.Fatalf("committer synced %s, want %s", d, dir)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the background group commit never ran")
	}
	// Records acknowledged before the commit are not synced (on a slow
	// machine some may still have been there).
	got := sl.take()
	for i, name := range got {
		if name != dir && !strings.HasPrefix(name, dir+"/0") || name == dir && i != len(got)-1 {
			t.Fatalf("commit synced %v, want records of %s, then it", got, dir)
		}
	}

	// With the server gone, records stay: Sync fails, keeps them, and
	// commits them (files, then the directory) before it returns.
	srv.Close()
	conn.Close()
	if err := w.Write("/g", whole("gone"), []byte("gone"), 4); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := w.Sync(sctx); err == nil {
		t.Fatal("sync with the server gone succeeded")
	}
	m := recFiles(t, dir)
	if len(m) != 1 {
		t.Fatalf("journal holds %v, want one record", m)
	}
	got = sl.take()
	if i := slices.Index(got, m[0]); i < 0 || !slices.Contains(got[i+1:], dir) {
		t.Fatalf("sync with records left synced %v, want %s then %s", got, m[0], dir)
	}
	// A large batch is committed with one syncfs: all its records, then
	// the directory, are reported durable.
	var want []string
	for i := range 40 {
		if err := w.Write(fmt.Sprintf("/h%d", i), whole("more"), []byte("more"), 4); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range recFiles(t, dir) {
		if name != m[0] {
			want = append(want, name)
		}
	}
	sctx, cancel = context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := w.Sync(sctx); err == nil {
		t.Fatal("sync with the server gone succeeded")
	}
	got = sl.take()
	if len(want) != 40 || len(got) == 0 || got[len(got)-1] != dir {
		t.Fatalf("large batch: %d records, synced %v", len(want), got)
	}
	for _, name := range want {
		if !slices.Contains(got, name) {
			t.Fatalf("large batch: %s not synced (synced %v)", name, got)
		}
	}
	// Nothing new: a commit does nothing.
	if err := cache.CommitJournal(w); err != nil {
		t.Fatal(err)
	}
	if got := sl.take(); len(got) != 0 {
		t.Fatalf("empty commit synced %v", got)
	}
}

// TestJournalTorn: records that a power loss caught before their commit
// (renamed into place, data never on the disk: empty, cut short, or
// garbage) fail their check at the next open and are moved to bad/; the
// intact ones are replayed.
func TestJournalTorn(t *testing.T) {
	ctx := t.Context()
	fs := memfs.New()
	_, addr := serveClosable(t, fs)
	dir := t.TempDir()

	// A journal with two records, left by a session that could not
	// reach the server.
	w, err := cache.NewWriteBack(dir, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	good := "00000000000000000001.rec"
	rec := func(seq int, path, data string) []byte {
		return []byte(fmt.Sprintf("zxjournal 1\n{\"seq\":%d,\"path\":%q,\"ops\":[{\"off\":0,\"len\":%d,\"whole\":true}],\"datalen\":%d,\"sum\":%q}\n%s",
			seq, path, len(data), len(data), sha(data), data))
	}
	full := rec(5, "/cut", "some data that the disk never got")
	files := map[string][]byte{
		good:                       rec(1, "/good", "hello"),
		"00000000000000000002.rec": nil,                                                     // empty
		"00000000000000000003.rec": full[:20],                                               // cut in the header
		"00000000000000000004.rec": append(rec(4, "/z", "12345")[:60], make([]byte, 20)...), // zeros
		"00000000000000000005.rec": full[:len(full)-4],                                      // cut in the data
		"00000000000000000006.rec": []byte(strings.Replace(string(rec(6, "/x", "abcdef")), "abcdef", "abcxef", 1)),
		"tmp-123":                  []byte("zxjournal 1\n"), // a crash while writing
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w, err = cache.NewWriteBack(dir, dial(t, addr).Tree(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if n := w.Leftover(); n != 1 {
		t.Fatalf("%d records to replay, want 1", n)
	}
	if n, err := w.Replay(ctx); n != 1 || err != nil {
		t.Fatalf("replay: %d, %v", n, err)
	}
	zxtest.CheckTree(t, fs, "/", "/good:hello")
	if m := recFiles(t, dir); len(m) != 0 {
		t.Fatalf("journal holds %v after the replay", m)
	}
	bad, err := os.ReadDir(filepath.Join(dir, "bad"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range bad {
		names = append(names, e.Name())
	}
	want := []string{"00000000000000000002.rec", "00000000000000000003.rec", "00000000000000000004.rec", "00000000000000000005.rec", "00000000000000000006.rec"}
	if !slices.Equal(names, want) {
		t.Fatalf("bad/ holds %v, want %v", names, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "tmp-123")); !os.IsNotExist(err) {
		t.Fatalf("temporary left: %v", err)
	}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
