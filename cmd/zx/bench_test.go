package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestBenchLoopback runs `zx bench --loopback` on a small tree: the rates
// come from a `zx serve` process of their own, one find rate per run.
func TestBenchLoopback(t *testing.T) {
	tree := t.TempDir()
	for i := range 20 {
		d := filepath.Join(tree, fmt.Sprintf("d%02d", i))
		if err := os.Mkdir(d, 0755); err != nil {
			t.Fatal(err)
		}
		for j := range 10 {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.go", j)), []byte("package p\n"), 0644); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := runZX(t, "", "bench", "--loopback", "-q", "--tree", tree).want(t, 0, "zx bench --loopback")
	if !strings.Contains(r.stdout, "server: `zx serve`, a process of its own") {
		t.Fatalf("the rates did not come from a zx serve process:\n%s", r.stdout)
	}
	m := regexp.MustCompile(`(?m)^find: ([0-9, ]+) entries/s \(median ([0-9]+), best ([0-9]+)\)$`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no find rates in:\n%s", r.stdout)
	}
	rates := strings.Split(m[1], ", ")
	if len(rates) != 11 {
		t.Fatalf("%d find rates, want 11: %s", len(rates), m[1])
	}
	for _, s := range append(rates, m[2], m[3]) {
		if v, err := strconv.ParseFloat(s, 64); err != nil || v <= 0 {
			t.Fatalf("find rate %q in:\n%s", s, r.stdout)
		}
	}
	if !regexp.MustCompile(`(?m)^findget \(FindGet\): [0-9]+, [0-9]+, [0-9]+ MB/s`).MatchString(r.stdout) {
		t.Fatalf("no findget rates in:\n%s", r.stdout)
	}
}
