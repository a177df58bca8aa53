package client_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/lfs"
)

// BenchmarkFindGoSrc measures the server's find rate over loopback TCP:
// client, server and local disk, on Go's source tree.
func BenchmarkFindGoSrc(b *testing.B) {
	root := filepath.Join(runtime.GOROOT(), "src")
	if _, err := os.Stat(root); err != nil {
		b.Skipf("no Go source tree at %s", root)
	}
	fs, err := lfs.New(root, lfs.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer fs.Close()
	c := dial(b, serve(b, fs))
	t := c.Tree("")
	ctx := context.Background()
	n := 0
	cpu0, gc0 := cpuTime(), gcTime()
	b.ResetTimer()
	for range b.N {
		for it := range t.Find(ctx, "/", zx.FindOpts{}) {
			if it.Err != nil {
				b.Fatal(it.Err)
			}
			n++
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "entries/s")
	// On a shared machine the wall-clock rate depends on the load; the
	// CPU time spent per entry (client and server, this whole process)
	// much less.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(n), "cpu-ns/entry")
	// Garbage collection's share of it, which the memory a find holds
	// (entries read ahead, buffers) drives as much as what it allocates.
	b.ReportMetric(float64(gcTime()-gc0)/float64(n), "gc-cpu-ns/entry")
}

// gcTime returns the CPU time spent collecting garbage so far, as the
// runtime estimates it.
func gcTime() time.Duration {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	return time.Duration(s[0].Value.Float64() * 1e9)
}

// cpuTime returns the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
