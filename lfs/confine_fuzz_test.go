package lfs

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
)

// FuzzConfined throws arbitrary paths at every request of a tree whose
// root holds links pointing out of it (to a directory and to a file
// outside, absolute and relative) and checks that nothing outside the root
// is ever read, written, created, removed or changed.
func FuzzConfined(f *testing.F) {
	top := f.TempDir()
	root := filepath.Join(top, "root")
	out := filepath.Join(top, "out")
	for _, d := range []string{root, out, filepath.Join(out, "d"), filepath.Join(root, "in")} {
		if err := os.Mkdir(d, 0755); err != nil {
			f.Fatal(err)
		}
	}
	const secret = "the secret outside the root"
	if err := os.WriteFile(filepath.Join(out, "secret"), []byte(secret), 0644); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "in", "f"), []byte("inside"), 0644); err != nil {
		f.Fatal(err)
	}
	for name, target := range map[string]string{
		"abs":   out,
		"fabs":  filepath.Join(out, "secret"),
		"rel":   "../out",
		"frel":  "../out/secret",
		"inrel": "in/../../out",
		"self":  ".",
	} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			f.Fatal(err)
		}
	}
	before := snapshot(f, out)
	tree, err := New(root, Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { tree.Close() })

	for _, p := range []string{
		"/abs/secret", "/fabs", "/rel/secret", "/frel", "/inrel/secret", "/self/abs/secret",
		"/abs/d/new", "/rel/d", "/../out/secret", "/in/../../out/secret", "/abs/", "/fabs/x",
		"/in/f", "/abs/secret\x00", "/" + TempPrefix + "x",
	} {
		for op := range byte(9) {
			f.Add(op, p, "/in/g")
			f.Add(op, "/in/f", p)
		}
	}
	f.Fuzz(func(t *testing.T, op byte, p, q string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var got []byte
		switch op % 9 {
		case 0:
			rep := <-tree.Stat(ctx, p)
			// No file inside has the secret's size: one that has is
			// the secret, whose metadata must not be seen.
			if rep.Err == nil && rep.Dir.Size() == int64(len(secret)) && rep.Dir.Type() == zx.TypeFile {
				t.Fatalf("stat %q reached the file outside the root: %v", p, rep.Dir)
			}
		case 1:
			var buf bytes.Buffer
			zx.Copy(&buf, tree.Get(ctx, p, 0, -1))
			got = buf.Bytes()
		case 2:
			<-tree.Put(ctx, p, zx.Dir{zx.AType: zx.TypeFile, zx.ASize: "0"}, 0, strings.NewReader("pwned"))
		case 3:
			<-tree.Put(ctx, p, nil, 0, strings.NewReader("pwned"))
		case 4:
			<-tree.Wstat(ctx, p, zx.Dir{zx.AMode: "0777", zx.ASize: "1", "color": "red"})
		case 5:
			<-tree.Move(ctx, p, q)
		case 6:
			<-tree.Remove(ctx, p)
		case 7:
			<-tree.RemoveAll(ctx, p)
		case 8:
			<-tree.Link(ctx, p, q)
			for it := range tree.FindGet(ctx, p, zx.FindOpts{}) {
				if it.Data != nil {
					got = append(got, it.Data...)
				}
			}
		}
		if bytes.Contains(got, []byte(secret)) {
			t.Fatalf("op %d on %q read the secret outside the root", op%9, p)
		}
		if now := snapshot(t, out); now != before {
			t.Fatalf("op %d on %q, %q changed what is outside the root:\nbefore %s\nafter  %s", op%9, p, q, before, now)
		}
	})
}

// snapshot describes every file under dir: names, modes, sizes, contents.
func snapshot(t testing.TB, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		b.WriteString(p + " " + fi.Mode().String())
		if fi.Mode().IsRegular() {
			fh, err := os.Open(p)
			if err != nil {
				return err
			}
			data, _ := io.ReadAll(fh)
			fh.Close()
			b.WriteString(" " + string(data))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
