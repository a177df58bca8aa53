package server_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/server"
)

// Load test parameters: 200 clients for a bounded time, against one server.
const (
	loadClients  = 200
	loadFiles    = 6 // per client
	loadDuration = 8 * time.Second
	// The server's memory budget: connections may take half of it.
	loadMemory = 2 * loadClients * server.ConnCost
)

// loadContent is a file's content: a header naming its writer and version,
// random bytes, and the SHA-256 of all that, so any read can be checked for
// being one whole version.
func loadContent(rng *rand.Rand, src *rand.ChaCha8, who string, version int) []byte {
	n := 512 + rng.IntN(32<<10)
	if rng.IntN(10) == 0 {
		n = 128<<10 + rng.IntN(128<<10) // now and then a larger one
	}
	b := fmt.Appendf(nil, "%s v%d\n", who, version)
	body := make([]byte, n)
	src.Read(body)
	b = append(b, body...)
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// wholeVersion reports whether b is one loadContent.
func wholeVersion(b []byte) bool {
	if len(b) < sha256.Size {
		return false
	}
	sum := sha256.Sum256(b[:len(b)-sha256.Size])
	return bytes.Equal(sum[:], b[len(b)-sha256.Size:])
}

type opStats struct {
	name string
	lat  []time.Duration
	errs int
}

func TestLoad(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := lfs.New(dir, lfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	srv, addr := serve(t, fs, server.Config{MaxMemory: loadMemory})

	// Sample the server's accounted buffers and the heap while it runs.
	var heapPeak atomic.Uint64
	stopSample := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > heapPeak.Load() {
				heapPeak.Store(ms.HeapInuse)
			}
			select {
			case <-stopSample:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	type fileState struct {
		sum    [32]byte
		exists bool
	}
	var (
		mu       sync.Mutex
		stats    = map[string]*opStats{}
		expected = map[string]fileState{} // path -> what the last acknowledged write left
		limited  atomic.Int64
		torn     atomic.Int64
	)
	record := func(local map[string]*opStats) {
		mu.Lock()
		defer mu.Unlock()
		for k, v := range local {
			s := stats[k]
			if s == nil {
				s = &opStats{name: k}
				stats[k] = s
			}
			s.lat = append(s.lat, v.lat...)
			s.errs += v.errs
		}
	}
	deadline := time.Now().Add(loadDuration)
	var wg sync.WaitGroup
	var failed atomic.Value
	for ci := range loadClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fail := func(err error) { failed.CompareAndSwap(nil, err) }
			c, err := client.Dial(ctx, addr, client.Options{})
			if err != nil {
				fail(err)
				return
			}
			defer c.Close()
			tr := c.Tree("")
			rng := rand.New(rand.NewPCG(uint64(ci), 42))
			src := rand.NewChaCha8([32]byte{byte(ci), byte(ci >> 8)})
			who := fmt.Sprintf("c%03d", ci)
			mine := "/" + who
			if _, err := zx.Mkdir(ctx, tr, mine, 0755); err != nil {
				fail(err)
				return
			}
			local := map[string]*opStats{}
			timed := func(op string, f func() error) error {
				s := local[op]
				if s == nil {
					s = &opStats{name: op}
					local[op] = s
				}
				t0 := time.Now()
				err := f()
				s.lat = append(s.lat, time.Since(t0))
				if err != nil {
					s.errs++
				}
				return err
			}
			state := map[string]fileState{}
			version := 0
			for time.Now().Before(deadline) {
				f := fmt.Sprintf("%s/f%d", mine, rng.IntN(loadFiles))
				switch k := rng.IntN(100); {
				case k < 35: // write one of mine, whole
					version++
					data := loadContent(rng, src, who, version)
					err := timed("put", func() error {
						r := <-tr.Put(ctx, f, zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, bytes.NewReader(data))
						return r.Err
					})
					switch {
					case err == nil:
						state[f] = fileState{sha256.Sum256(data), true}
					case errors.Is(err, zx.ErrLimit):
						limited.Add(1) // refused, so not applied: the old file stays
					default:
						fail(fmt.Errorf("put %s: %w", f, err))
						return
					}
				case k < 70: // read anyone's file: always one whole version
					other := fmt.Sprintf("/c%03d/f%d", rng.IntN(loadClients), rng.IntN(loadFiles))
					var got []byte
					err := timed("get", func() error {
						var err error
						got, err = zx.ReadFile(ctx, tr, other)
						if errors.Is(err, zx.ErrNotExist) {
							return nil // not written yet, or removed
						}
						return err
					})
					if err != nil {
						fail(fmt.Errorf("get %s: %w", other, err))
						return
					}
					if got != nil && !wholeVersion(got) {
						torn.Add(1)
					}
				case k < 80: // stat
					timed("stat", func() error {
						_, err := zx.Stat(ctx, tr, f)
						if errors.Is(err, zx.ErrNotExist) {
							return nil
						}
						return err
					})
				case k < 92: // find in someone's directory
					other := fmt.Sprintf("/c%03d", rng.IntN(loadClients))
					err := timed("find", func() error {
						for it := range tr.Find(ctx, other, zx.FindOpts{Pred: "size>1000"}) {
							if it.Err != nil && !errors.Is(it.Err, zx.ErrNotExist) {
								return it.Err
							}
						}
						return nil
					})
					if err != nil {
						fail(fmt.Errorf("find %s: %w", other, err))
						return
					}
				default: // remove one of mine
					err := timed("remove", func() error {
						err := <-tr.Remove(ctx, f)
						if errors.Is(err, zx.ErrNotExist) {
							return nil
						}
						return err
					})
					if err != nil {
						fail(fmt.Errorf("remove %s: %w", f, err))
						return
					}
					state[f] = fileState{}
				}
			}
			record(local)
			mu.Lock()
			for k, v := range state {
				expected[k] = v
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(stopSample)
	<-sampled
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}

	// Every acknowledged write is there, whole; every removed file is gone;
	// no temporary is left behind.
	var files, missing, wrong int
	for p, want := range expected {
		b, err := os.ReadFile(filepath.Join(dir, p))
		switch {
		case !want.exists && errors.Is(err, os.ErrNotExist):
		case !want.exists:
			t.Errorf("%s: removed, but there (%v)", p, err)
		case err != nil:
			missing++
			t.Errorf("%s: lost: %v", p, err)
		case sha256.Sum256(b) != want.sum:
			wrong++
			t.Errorf("%s: content is not the last acknowledged write", p)
		default:
			files++
		}
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), lfs.TempPrefix) {
			t.Errorf("temporary left behind: %s", p)
		}
		return nil
	})
	if n := torn.Load(); n > 0 {
		t.Errorf("%d reads returned a mix of versions", n)
	}

	// The report.
	var total int
	var names []string
	for k, s := range stats {
		total += len(s.lat)
		names = append(names, k)
	}
	slices.Sort(names)
	mem := srv.Memory()
	t.Logf("%d clients for %v over lfs: %d ops, %.0f ops/s; %d files verified by checksum (%d lost, %d wrong); %d puts refused by the memory limit",
		loadClients, loadDuration, total, float64(total)/loadDuration.Seconds(), files, missing, wrong, limited.Load())
	t.Logf("server memory: peak %.1f MiB of a %d MiB budget; heap in use (server and 200 clients in one process): peak %.0f MiB",
		float64(mem.Peak())/(1<<20), loadMemory>>20, float64(heapPeak.Load())/(1<<20))
	t.Logf("| op | count | errors | p50 | p90 | p99 | max |")
	t.Logf("|---|---:|---:|---:|---:|---:|---:|")
	for _, k := range names {
		s := stats[k]
		slices.Sort(s.lat)
		pct := func(p float64) time.Duration {
			return s.lat[min(len(s.lat)-1, int(p*float64(len(s.lat))))].Round(10 * time.Microsecond)
		}
		t.Logf("| %s | %d | %d | %v | %v | %v | %v |", k, len(s.lat), s.errs, pct(.5), pct(.9), pct(.99), s.lat[len(s.lat)-1].Round(10*time.Microsecond))
	}
	if mem.Peak() > loadMemory {
		t.Errorf("server buffered %d bytes, over its %d budget", mem.Peak(), loadMemory)
	}
	for i := 0; mem.Used() != 0; i++ {
		if i == 100 {
			t.Errorf("server still accounts %d bytes 5s after every client left", mem.Used())
			break
		}
		time.Sleep(50 * time.Millisecond) // for the server to see them leave
	}
	// A sanity bound on the whole process: the server's budget, plus what
	// 200 clients and their requests may hold.
	if h := heapPeak.Load(); h > 1<<30 {
		t.Errorf("heap in use peaked at %d MiB", h>>20)
	}
	if total < loadClients {
		t.Errorf("only %d operations", total)
	}
	if files < loadClients {
		t.Errorf("only %d files verified by checksum, fewer than one per client", files)
	}
}
