package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/client"
)

// The zx side of each workload: the Go API over one connection. Each
// function returns how many items (entries, files or bytes) it saw and a
// description of the method, for the report.

// zxFind looks for a missing name with one Find.
func zxFind(ctx context.Context, t *client.Tree, root, pred string) (n int64, method string, err error) {
	method = fmt.Sprintf("Find(%q, %q)", root, pred)
	for it := range t.Find(ctx, root, zx.FindOpts{Pred: pred}) {
		if it.Err != nil {
			if it.Dir == nil {
				return n, method, it.Err
			}
			continue // an error about one entry
		}
		n++
	}
	return n, method, ctx.Err()
}

// scanner looks for a string in the data of a stream of files, across chunk
// boundaries.
type scanner struct {
	pat     []byte
	tail    []byte // last len(pat)-1 bytes of the current file
	matches int64
	files   int64
	bytes   int64
}

func (s *scanner) file() { s.tail = s.tail[:0]; s.files++ }

func (s *scanner) data(b []byte) {
	s.bytes += int64(len(b))
	k := len(s.pat) - 1
	if len(s.tail) > 0 {
		j := append(s.tail, b[:min(k, len(b))]...)
		if bytes.Contains(j, s.pat) {
			s.matches++
		}
	}
	if bytes.Contains(b, s.pat) {
		s.matches++
	}
	if len(b) >= k {
		s.tail = append(s.tail[:0], b[len(b)-k:]...)
	} else {
		s.tail = append(s.tail, b...)
		if len(s.tail) > k {
			s.tail = s.tail[len(s.tail)-k:]
		}
	}
}

// zxGrep scans every regular file under root for a string with one
// FindGet, as zx grep does. When the tree cannot FindGet (ErrNotSupp), it
// falls back to one Find and Gets pipelined as the entries arrive, and says
// so in the method.
func zxGrep(ctx context.Context, t *client.Tree, root, pat string) (files int64, method string, err error) {
	s := &scanner{pat: []byte(pat)}
	method = fmt.Sprintf("FindGet(%q, \"type=-\") scanning the data", root)
	first := true
	for it := range t.FindGet(ctx, root, zx.FindOpts{Pred: "type=-"}) {
		if it.Err != nil {
			if first && errors.Is(it.Err, zx.ErrNotSupp) {
				return zxGrepFallback(ctx, t, root, pat)
			}
			if it.Dir == nil {
				return s.files, method, it.Err
			}
			continue
		}
		first = false
		if it.Dir != nil {
			s.file()
		}
		if len(it.Data) > 0 {
			s.data(it.Data)
		}
	}
	if s.matches > 0 {
		return s.files, method, fmt.Errorf("found %q %d times: not a missing string", pat, s.matches)
	}
	return s.files, method, ctx.Err()
}

func zxGrepFallback(ctx context.Context, t *client.Tree, root, pat string) (int64, string, error) {
	method := fmt.Sprintf("Find(%q, \"type=-\") + pipelined Gets (the server's tree has no FindGet)", root)
	s := &scanner{pat: []byte(pat)}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gets := make(chan (<-chan zx.Item), 512)
	var ferr error
	go func() {
		defer close(gets)
		for it := range t.Find(ctx, root, zx.FindOpts{Pred: "type=-"}) {
			if it.Err != nil {
				if it.Dir == nil {
					ferr = it.Err
					return
				}
				continue
			}
			select {
			case gets <- t.Get(ctx, it.Dir[zx.APath], 0, -1):
			case <-ctx.Done():
				return
			}
		}
	}()
	var err error
	for c := range gets {
		s.file()
		for it := range c {
			if it.Err != nil && err == nil {
				err = it.Err
			}
			if len(it.Data) > 0 {
				s.data(it.Data)
			}
		}
	}
	if err == nil {
		err = ferr
	}
	if err == nil && s.matches > 0 {
		err = fmt.Errorf("found %q %d times: not a missing string", pat, s.matches)
	}
	if err == nil {
		err = ctx.Err()
	}
	return s.files, method, err
}

// zxRmFind removes root with one Find and pipelined Removes: files as the
// entries stream in, then directories deepest first (the reverse of the
// find order, in which a directory comes before its contents). The
// server applies requests on the same paths in the order sent, so nothing
// waits for a reply until the end.
func zxRmFind(ctx context.Context, t *client.Tree, root string) (int64, string, error) {
	method := fmt.Sprintf("Find(%q) + pipelined Removes, directories deepest first", root)
	var dirs []string
	var errcs []<-chan error
	var n int64
	for it := range t.Find(ctx, root, zx.FindOpts{}) {
		if it.Err != nil {
			if it.Dir == nil {
				return n, method, it.Err
			}
			continue
		}
		n++
		p := it.Dir[zx.APath]
		if it.Dir.IsDir() {
			dirs = append(dirs, p)
			continue
		}
		errcs = append(errcs, t.Remove(ctx, p))
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		errcs = append(errcs, t.Remove(ctx, dirs[i]))
	}
	var first error
	nerr := 0
	for _, c := range errcs {
		if err := <-c; err != nil {
			nerr++
			if first == nil {
				first = err
			}
		}
	}
	if first != nil {
		return n, method, fmt.Errorf("%d removes failed, the first: %w", nerr, first)
	}
	return n, method, nil
}

// zxRmAll removes root with one RemoveAll.
func zxRmAll(ctx context.Context, t *client.Tree, root string) (int64, string, error) {
	return 1, fmt.Sprintf("RemoveAll(%q)", root), <-t.RemoveAll(ctx, root)
}

// zxWrite creates the file with data in one Put.
func zxWrite(ctx context.Context, t *client.Tree, p string, data []byte) (int64, string, error) {
	method := fmt.Sprintf("Put(%q, type=- size=0, %d bytes streamed)", p, len(data))
	r := <-t.Put(ctx, p, zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, bytes.NewReader(data))
	if r.Err != nil {
		return 0, method, r.Err
	}
	if r.Dir[zx.ASize] != fmt.Sprint(len(data)) {
		return 0, method, fmt.Errorf("put returned size %s, want %d", r.Dir[zx.ASize], len(data))
	}
	return int64(len(data)), method, nil
}

// zxRead reads the file with one Get and checks it against want.
func zxRead(ctx context.Context, t *client.Tree, p string, want []byte) (int64, string, error) {
	method := fmt.Sprintf("Get(%q, 0, -1)", p)
	var off int64
	var err error
	for it := range t.Get(ctx, p, 0, -1) {
		if it.Err != nil {
			if err == nil {
				err = it.Err
			}
			continue
		}
		d := it.Data
		if err == nil && (off+int64(len(d)) > int64(len(want)) || !bytes.Equal(d, want[off:off+int64(len(d))])) {
			err = fmt.Errorf("data differs near offset %d", off)
		}
		off += int64(len(d))
	}
	if err == nil && off != int64(len(want)) {
		err = fmt.Errorf("got %d bytes, want %d", off, len(want))
	}
	if err == nil {
		err = ctx.Err()
	}
	return off, method, err
}

// zxLoopbackFind measures the server's raw find rate without the
// emulator: entries/s over the whole tree in each of runs runs, each over a
// fresh connection, and the entries received in all.
func zxLoopbackFind(ctx context.Context, addr string, runs int) (rates []float64, entries int64, err error) {
	for range runs {
		c, err := client.Dial(ctx, addr, client.Options{})
		if err != nil {
			return nil, 0, err
		}
		t := c.Tree("")
		if _, err := c.Ping(ctx); err != nil {
			c.Close()
			return nil, 0, err
		}
		t0 := time.Now()
		n, _, err := zxFind(ctx, t, "/tree", "")
		el := time.Since(t0)
		c.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("loopback find: %v", err)
		}
		rates = append(rates, float64(n)/el.Seconds())
		entries += n
	}
	return rates, entries, nil
}

// zxLoopbackFindGet measures the server's raw findget rate without the
// emulator: MB/s of the tree's regular files in each of runs runs, each
// over a fresh connection, and how they were read.
func zxLoopbackFindGet(ctx context.Context, addr string, runs int) (findget []float64, fgMethod string, err error) {
	for range runs {
		c, err := client.Dial(ctx, addr, client.Options{})
		if err != nil {
			return nil, "", err
		}
		t := c.Tree("")
		if _, err := c.Ping(ctx); err != nil {
			c.Close()
			return nil, "", err
		}
		s := &scanner{pat: []byte(missingBytes)}
		fgMethod = "FindGet"
		t0 := time.Now()
		var fgErr error
		for it := range t.FindGet(ctx, "/tree", zx.FindOpts{Pred: "type=-"}) {
			if it.Err != nil {
				if it.Dir == nil {
					fgErr = it.Err
				}
				continue
			}
			if len(it.Data) > 0 {
				s.data(it.Data)
			}
		}
		if errors.Is(fgErr, zx.ErrNotSupp) {
			fgMethod = "Find + pipelined Gets (no FindGet)"
			s = &scanner{pat: []byte(missingBytes)}
			t0 = time.Now()
			// zxGrepFallback counts files; count bytes via the proxy-free
			// connection's counters instead.
			before := c.Stats().BytesIn
			_, _, fgErr = zxGrepFallback(ctx, t, "/tree", missingBytes)
			s.bytes = c.Stats().BytesIn - before
		}
		el := time.Since(t0)
		c.Close()
		if fgErr != nil {
			return nil, "", fmt.Errorf("loopback findget: %v", fgErr)
		}
		findget = append(findget, float64(s.bytes)/1e6/el.Seconds())
	}
	return findget, fgMethod, nil
}
