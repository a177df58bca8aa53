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

	"github.com/zxfs/zx"
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

// segFiles returns the journal's log segments.
func segFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// pending returns the paths of the records the journal in dir holds.
func pending(t *testing.T, dir string) []string {
	t.Helper()
	ps, err := cache.JournalPending(dir)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func whole(data string) []cache.Op { return []cache.Op{{Whole: true, Len: int64(len(data))}} }

// deadWriteBack returns a write-back queue journaling in dir whose server
// is gone: its records stay in the journal.
func deadWriteBack(t *testing.T, dir string) *cache.WriteBack {
	t.Helper()
	// The connection is closed; the server stays until the test ends
	// (closing it at once races with its Serve starting).
	conn := dial(t, serve(t, memfs.New()))
	conn.Close()
	w, err := cache.NewWriteBack(dir, conn.Tree(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestJournalGroupCommit: a record written by Write (close) is appended
// to the log and not fsynced on the spot; the group commit fdatasyncs the
// segment once for the whole batch (and the directory when a segment was
// made); the background committer does it by itself.
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

	// Acknowledged records are not pending; the committer then syncs
	// the segment and the directory (the segment is new).
	for i := range 3 {
		if err := w.Write(cache.Origin{}, fmt.Sprintf("/f%d", i), whole("data"), []byte("data"), 4); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if p := pending(t, dir); len(p) != 0 {
		t.Fatalf("acknowledged records pending in the journal: %v", p)
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
	segs := segFiles(t, dir)
	if len(segs) != 1 {
		t.Fatalf("journal segments %v, want one", segs)
	}
	if got := sl.take(); !slices.Equal(got, []string{segs[0], dir}) {
		t.Fatalf("commit synced %v, want %s then %s", got, segs[0], dir)
	}

	// With the server gone, records stay: Sync fails, keeps them, and
	// commits them before it returns.
	srv.Close()
	conn.Close()
	if err := w.Write(cache.Origin{}, "/g", whole("gone"), []byte("gone"), 4); err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := w.Sync(sctx); err == nil {
		t.Fatal("sync with the server gone succeeded")
	}
	if p := pending(t, dir); !slices.Equal(p, []string{"/g"}) {
		t.Fatalf("journal holds %v, want /g", p)
	}
	if got := sl.take(); !slices.Contains(got, segs[0]) {
		t.Fatalf("sync with records left synced %v, want %s", got, segs[0])
	}
	// A batch of 40 records costs one fdatasync of the segment.
	for i := range 40 {
		if err := w.Write(cache.Origin{}, fmt.Sprintf("/h%d", i), whole("more"), []byte("more"), 4); err != nil {
			t.Fatal(err)
		}
	}
	sctx, cancel = context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := w.Sync(sctx); err == nil {
		t.Fatal("sync with the server gone succeeded")
	}
	if p := pending(t, dir); len(p) != 41 {
		t.Fatalf("journal holds %d records, want 41", len(p))
	}
	if got := sl.take(); len(got) == 0 || len(got) > 2 || got[0] != segs[0] {
		// The committer may have run in between: two at most.
		t.Fatalf("large batch synced %v, want %s once or twice", got, segs[0])
	}
	// Nothing new: a commit does nothing.
	if err := cache.CommitJournal(w); err != nil {
		t.Fatal(err)
	}
	if got := sl.take(); len(got) != 0 {
		t.Fatalf("empty commit synced %v", got)
	}
}

// TestJournalTorn: what a power loss leaves of the log's tail (a record
// cut short, garbage, zeros past the end, an empty segment) fails its
// check at the next open: the log is read up to it and the rest is moved
// to bad/; the whole records before it are replayed. Records of an
// earlier version's journal (one file each) are replayed or moved to bad/
// the same way.
func TestJournalTorn(t *testing.T) {
	ctx := t.Context()
	// A journal with three records, left by a session that could not
	// reach the server.
	orig := t.TempDir()
	w := deadWriteBack(t, orig)
	for _, f := range []string{"a", "bb", "ccc"} {
		data := strings.Repeat(f, 100)
		if err := w.Write(cache.Origin{}, "/"+f, whole(data), []byte(data), int64(len(data))); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	segs := segFiles(t, orig)
	if len(segs) != 1 {
		t.Fatalf("segments %v, want one", segs)
	}
	log, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	seg := filepath.Base(segs[0])
	bIdx := strings.Index(string(log), strings.Repeat("bb", 100))

	for _, tc := range []struct {
		name  string
		files map[string][]byte
		tree  []string // what the replay leaves on the server
		bad   int      // files moved to bad/
	}{
		{"whole", map[string][]byte{seg: log}, []string{"/a", "/bb", "/ccc"}, 0},
		{"cut-in-data", map[string][]byte{seg: log[:len(log)-3]}, []string{"/a", "/bb"}, 1},
		{"cut-in-frame", map[string][]byte{seg: log[:len(log)-300-10]}, []string{"/a", "/bb"}, 1},
		{"garbage", map[string][]byte{seg: []byte(string(log[:bIdx]) + "x" + string(log[bIdx+1:]))}, []string{"/a"}, 1},
		{"zeros-after", map[string][]byte{seg: append(slices.Clone(log), make([]byte, 4096)...)}, []string{"/a", "/bb", "/ccc"}, 1},
		{"empty-segment", map[string][]byte{seg: log, "00000000000000000009.log": nil}, []string{"/a", "/bb", "/ccc"}, 0},
		{"v1", map[string][]byte{
			"00000000000000000011.rec": v1rec(11, "/good", "hello"),
			"00000000000000000012.rec": nil,                                                                               // empty
			"00000000000000000013.rec": v1rec(13, "/cut", "some data")[:20],                                               // cut in the header
			"00000000000000000014.rec": []byte(strings.Replace(string(v1rec(14, "/x", "abcdef")), "abcdef", "abcxef", 1)), // garbage
			"tmp-123":                  []byte("zxjournal 1\n"),                                                           // a crash while writing
		}, []string{"/good"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, b := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			fs := memfs.New()
			w, err := cache.NewWriteBack(dir, dial(t, serve(t, fs)).Tree(""), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			if n := w.Leftover(); n != len(tc.tree) {
				t.Fatalf("%d records to replay, want %d", n, len(tc.tree))
			}
			if n, err := w.Replay(ctx); n != len(tc.tree) || err != nil {
				t.Fatalf("replay: %d, %v", n, err)
			}
			var want []string
			for _, p := range tc.tree {
				data := strings.Repeat(p[1:], 100)
				if p == "/good" {
					data = "hello"
				}
				want = append(want, p+":"+data)
			}
			zxtest.CheckTree(t, fs, "/", want...)
			if p := pending(t, dir); len(p) != 0 {
				t.Fatalf("journal holds %v after the replay", p)
			}
			bad, err := os.ReadDir(filepath.Join(dir, "bad"))
			if err != nil {
				t.Fatal(err)
			}
			if len(bad) != tc.bad {
				t.Fatalf("bad/ holds %v, want %d files", bad, tc.bad)
			}
			if tmp, _ := filepath.Glob(filepath.Join(dir, "tmp-*")); len(tmp) != 0 {
				t.Fatalf("temporary left: %v", tmp)
			}
			// What was cut off is gone from the log: a second open
			// finds nothing more to move aside or replay.
			w.Close()
			w2, err := cache.NewWriteBack(dir, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer w2.Close()
			if n := w2.Leftover(); n != 0 {
				t.Fatalf("second open: %d records to replay", n)
			}
			if bad2, _ := os.ReadDir(filepath.Join(dir, "bad")); len(bad2) != tc.bad {
				t.Fatalf("second open: bad/ holds %v", bad2)
			}
		})
	}
}

// TestJournalCrash: the client dies (the queue is never closed) with one
// record acknowledged and one not: the next session replays only the one
// not acknowledged, numbers its own records past both, and after another
// crash replays only its own unacknowledged record.
func TestJournalCrash(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	fs := memfs.New()
	srv, addr := serveClosable(t, fs)
	conn := dial(t, addr)
	w, err := cache.NewWriteBack(dir, conn.Tree(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(cache.Origin{}, "/x", whole("x1"), []byte("x1"), 2); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	conn.Close()
	if err := w.Write(cache.Origin{}, "/y", whole("y1"), []byte("y1"), 2); err != nil {
		t.Fatal(err)
	}
	// The crash: w is abandoned, its records in the page cache only.
	if p := pending(t, dir); !slices.Equal(p, []string{"/y"}) {
		t.Fatalf("after the crash the journal holds %v, want /y", p)
	}

	fs2 := memfs.New()
	w2, err := cache.NewWriteBack(dir, dial(t, serve(t, fs2)).Tree(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w2.Replay(ctx); n != 1 || err != nil {
		t.Fatalf("replay: %d, %v", n, err)
	}
	zxtest.CheckTree(t, fs2, "/", "/y:y1")
	if err := w2.Write(cache.Origin{}, "/z", whole("z1"), []byte("z1"), 2); err != nil {
		t.Fatal(err)
	}
	if err := w2.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	zxtest.CheckTree(t, fs2, "/", "/y:y1", "/z:z1")
	// A record cut off from the server, then a second crash.
	w2.Close()
	w3 := deadWriteBack(t, dir)
	if err := w3.Write(cache.Origin{}, "/w", whole("w1"), []byte("w1"), 2); err != nil {
		t.Fatal(err)
	}
	if p := pending(t, dir); !slices.Equal(p, []string{"/w"}) {
		t.Fatalf("after the second crash the journal holds %v, want /w", p)
	}
	fs4 := memfs.New()
	w4, err := cache.NewWriteBack(dir, dial(t, serve(t, fs4)).Tree(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w4.Close()
	if n, err := w4.Replay(ctx); n != 1 || err != nil {
		t.Fatalf("second replay: %d, %v", n, err)
	}
	zxtest.CheckTree(t, fs4, "/", "/w:w1")
}

// TestJournalSegments: the log starts a new segment when the current one
// is large, and removes the old ones once all their records are
// acknowledged, so the journal stays small under a stream of writes.
func TestJournalSegments(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	fs := memfs.New()
	w, err := cache.NewWriteBack(dir, dial(t, serve(t, fs)).Tree(""), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	data := make([]byte, 3<<20)
	for i := range data {
		data[i] = byte(i % 251)
	}
	maxSegs := 0
	for i := range 8 {
		p := fmt.Sprintf("/big%d", i)
		if err := w.Write(cache.Origin{}, p, whole(string(data)), data, int64(len(data))); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		maxSegs = max(maxSegs, len(segFiles(t, dir)))
	}
	if maxSegs > 2 {
		t.Fatalf("the journal grew to %d segments for 24 MiB of acknowledged records", maxSegs)
	}
	var size int64
	for _, s := range segFiles(t, dir) {
		fi, err := os.Stat(s)
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
	}
	if size > 16<<20 {
		t.Fatalf("journal holds %d bytes after all was acknowledged", size)
	}
	if p := pending(t, dir); len(p) != 0 {
		t.Fatalf("pending: %v", p)
	}
	got, err := zx.ReadFile(ctx, fs, "/big7")
	if err != nil || string(got) != string(data) {
		t.Fatalf("the server has %d bytes of /big7 (%v)", len(got), err)
	}
	// Closed with everything acknowledged: the journal is empty.
	w.Close()
	if s := segFiles(t, dir); len(s) != 0 {
		t.Fatalf("segments left after close: %v", s)
	}
}

func v1rec(seq int, path, data string) []byte {
	return []byte(fmt.Sprintf("zxjournal 1\n{\"seq\":%d,\"path\":%q,\"ops\":[{\"off\":0,\"len\":%d,\"whole\":true}],\"datalen\":%d,\"sum\":%q}\n%s",
		seq, path, len(data), len(data), sha(data), data))
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
