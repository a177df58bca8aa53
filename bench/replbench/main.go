// Command replbench measures `zx repl` against rsync over ssh, both through
// the same emulated link (package wan, as zx lag): the first sync of a
// tree to an empty remote directory, a sync with nothing changed, and one
// after editing a few files. It prints a Markdown table (see
// docs/bench/repl.md).
//
//	go build -o /tmp/zx ./cmd/zx
//	go run ./bench/replbench --zx /tmp/zx --rtt 50ms --src $(go env GOROOT)/src
//
// It needs rsync, ssh and sshd (it starts a private sshd, package sshd).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/zxfs/zx/bench/internal/testbed"
	"github.com/zxfs/zx/lfs"
	"github.com/zxfs/zx/server"
	"github.com/zxfs/zx/sshd"
	"github.com/zxfs/zx/wan"
)

func main() {
	zxBin := flag.String("zx", "zx", "the zx binary")
	src := flag.String("src", "", "the tree to sync (default: $(go env GOROOT)/src)")
	rtt := flag.Duration("rtt", 50*time.Millisecond, "round-trip time added by the emulated link")
	edits := flag.Int("edits", 10, "files edited between the runs")
	flag.Parse()
	log.SetFlags(0)
	var err error
	if *src == "" {
		if *src, err = testbed.GoSource(); err != nil {
			log.Fatal(err)
		}
	}
	tmp, err := os.MkdirTemp("", "replbench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	local := filepath.Join(tmp, "local")
	if out, err := exec.Command("cp", "-a", *src, local).CombinedOutput(); err != nil {
		log.Fatalf("cp: %v: %s", err, out)
	}
	files, bytes := count(local)
	fmt.Printf("tree: %s, %d files, %.1f MiB; link: +%v RTT\n\n", *src, files, float64(bytes)/(1<<20), *rtt)

	// zx: a server over an empty directory, behind the emulated link.
	zxRemote := filepath.Join(tmp, "zx-remote")
	os.Mkdir(zxRemote, 0o755)
	srv, err := testbed.Serve(zxRemote, lfs.Options{}, server.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	zp, err := wan.Listen("127.0.0.1:0", srv.Addr, wan.Config{RTT: *rtt})
	if err != nil {
		log.Fatal(err)
	}
	defer zp.Close()

	// rsync: a private sshd behind another emulated link of the same RTT.
	sdir := filepath.Join(tmp, "sshd")
	os.Mkdir(sdir, 0o700)
	sd, err := sshd.Start(context.Background(), sdir)
	if err != nil {
		log.Fatal(err)
	}
	defer sd.Close()
	sp, err := wan.Listen("127.0.0.1:0", sd.Addr(), wan.Config{RTT: *rtt})
	if err != nil {
		log.Fatal(err)
	}
	defer sp.Close()
	_, sport, _ := net.SplitHostPort(sp.Addr())
	rsRemote := filepath.Join(tmp, "rsync-remote")
	os.Mkdir(rsRemote, 0o755)
	sshCmd := fmt.Sprintf("ssh -F %s -p %s -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null", sd.Config, sport)

	type result struct {
		what string
		t    time.Duration
		info string
	}
	var rows []result
	repl := func(what string) {
		t0 := time.Now()
		cmd := exec.Command(*zxBin, "repl", "--json", "--stats", local, "zx://"+zp.Addr()+"/")
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			log.Fatalf("zx repl: %v\n%s%s", err, tail(out.String()), errb.String())
		}
		el := time.Since(t0)
		var st struct {
			Stats struct {
				RoundTrips int64 `json:"roundTrips"`
				Requests   int64 `json:"requests"`
				BytesIn    int64 `json:"bytesIn"`
				BytesOut   int64 `json:"bytesOut"`
			} `json:"stats"`
		}
		for l := range strings.SplitSeq(errb.String(), "\n") {
			if strings.HasPrefix(l, `{"stats"`) {
				json.Unmarshal([]byte(l), &st)
			}
		}
		var sum string
		for l := range strings.SplitSeq(out.String(), "\n") {
			if strings.HasPrefix(l, `{"summary"`) {
				sum = l
			}
		}
		var s struct {
			Summary struct {
				Copied int   `json:"copied"`
				Bytes  int64 `json:"bytes"`
			} `json:"summary"`
		}
		json.Unmarshal([]byte(sum), &s)
		rows = append(rows, result{"zx repl: " + what, el, fmt.Sprintf("%d entries copied; %d round trips, %d requests, %.2f MiB out, %.2f MiB in",
			s.Summary.Copied, st.Stats.RoundTrips, st.Stats.Requests, mib(st.Stats.BytesOut), mib(st.Stats.BytesIn))})
		fmt.Fprintf(os.Stderr, "%s: %v\n", rows[len(rows)-1].what, el)
	}
	rsync := func(what, remote string, extra ...string) {
		t0 := time.Now()
		args := append([]string{"-a", "--delete", "--stats", "--exclude=/.zx-repl", "-e", sshCmd}, extra...)
		cmd := exec.Command("rsync", append(args, local+"/", "127.0.0.1:"+remote+"/")...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			log.Fatalf("rsync: %v\n%s", err, out)
		}
		el := time.Since(t0)
		var sent, recv, n string
		for l := range strings.SplitSeq(string(out), "\n") {
			if v, ok := strings.CutPrefix(l, "Total bytes sent: "); ok {
				sent = v
			}
			if v, ok := strings.CutPrefix(l, "Total bytes received: "); ok {
				recv = v
			}
			if v, ok := strings.CutPrefix(l, "Number of regular files transferred: "); ok {
				n = v
			}
		}
		rows = append(rows, result{strings.Join(append([]string{"rsync -a"}, extra...), " ") + " over ssh: " + what, el, fmt.Sprintf("%s files copied; %.2f MiB out, %.2f MiB in", n, mib(atoi(sent)), mib(atoi(recv)))})
		fmt.Fprintf(os.Stderr, "%s: %v\n", rows[len(rows)-1].what, el)
	}

	// zx's lfs fsyncs every file it writes (a put is durable when it
	// replies); rsync does not unless told to, so it runs both ways.
	rsFsync := filepath.Join(tmp, "rsync-fsync-remote")
	os.Mkdir(rsFsync, 0o755)
	repl("initial")
	rsync("initial", rsRemote)
	rsync("initial", rsFsync, "--fsync")
	repl("nothing changed")
	rsync("nothing changed", rsRemote)
	edit(local, *edits)
	repl(fmt.Sprintf("%d files edited", *edits))
	rsync(fmt.Sprintf("%d files edited", *edits), rsRemote)
	if err := same(local, zxRemote); err != nil {
		log.Fatalf("zx remote differs: %v", err)
	}
	if err := same(local, rsRemote); err != nil {
		log.Fatalf("rsync remote differs: %v", err)
	}

	fmt.Printf("| run | time | what moved |\n|---|---|---|\n")
	for _, r := range rows {
		fmt.Printf("| %s | %.2f s | %s |\n", r.what, r.t.Seconds(), r.info)
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(strings.ReplaceAll(strings.Fields(s + " x")[0], ",", ""), 10, 64)
	return n
}

func tail(s string) string {
	if len(s) > 2000 {
		return s[len(s)-2000:]
	}
	return s
}

func count(dir string) (n int, size int64) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			fi, _ := d.Info()
			n++
			size += fi.Size()
		}
		return nil
	})
	return
}

// edit appends a line to n .go files spread over the tree, a second
// later than now so that their mtimes change.
func edit(dir string, n int) {
	var gos []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && strings.HasSuffix(p, ".go") {
			gos = append(gos, p)
		}
		return nil
	})
	later := time.Now().Add(time.Second)
	for i := range n {
		p := gos[i*len(gos)/n]
		b, err := os.ReadFile(p)
		if err != nil {
			log.Fatal(err)
		}
		if err := os.WriteFile(p, append(b, []byte("// edited by replbench\n")...), 0o644); err != nil {
			log.Fatal(err)
		}
		os.Chtimes(p, later, later)
	}
}

// same checks that b holds a's regular files with the same bytes and
// mtimes (the state directory of zx repl aside).
func same(a, b string) error {
	return filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		if rel == ".zx-repl" {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fa, _ := d.Info()
		fb, err := os.Stat(filepath.Join(b, rel))
		if err != nil {
			return err
		}
		if fa.Size() != fb.Size() || !fa.ModTime().Equal(fb.ModTime()) || fa.Mode() != fb.Mode() {
			return fmt.Errorf("%s: %v %v %v, remote %v %v %v", rel, fa.Size(), fa.ModTime(), fa.Mode(), fb.Size(), fb.ModTime(), fb.Mode())
		}
		if fa.Size() < 1<<20 {
			da, _ := os.ReadFile(p)
			db, _ := os.ReadFile(filepath.Join(b, rel))
			if !bytes.Equal(da, db) {
				return fmt.Errorf("%s: contents differ", rel)
			}
		}
		return nil
	})
}
