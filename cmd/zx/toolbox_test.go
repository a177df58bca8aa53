package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCtlCommand(t *testing.T) {
	dir := t.TempDir()
	addr := serve(t, dir)
	loc := "zx://" + addr + "/"
	r := runZX(t, "", "ctl", loc).want(t, 0, "zx ctl")
	var kinds []string
	for l := range strings.SplitSeq(r.stdout, "\n") {
		if k, ok := strings.CutPrefix(l, "== "); ok {
			kinds = append(kinds, strings.Fields(k)[0])
		}
	}
	if !slices.Equal(kinds, []string{"client", "server", "lfs"}) {
		t.Fatalf("zx ctl sections %v, want client, server, lfs:\n%s", kinds, r.stdout)
	}
	if !strings.Contains(r.stdout, "\nuser - 127.0.0.1:") || !strings.Contains(r.stdout, "== server "+addr+"\n") {
		t.Errorf("zx ctl: no user line or server title:\n%s", r.stdout)
	}

	// Flags, passed down; each run is a new client, so read the
	// server's and the tree's flags with --json.
	runZX(t, "", "ctl", loc, "pass", "debug", "on").want(t, 0, "zx ctl pass debug on")
	runZX(t, "", "ctl", loc, "pass pass debug on").want(t, 0, "zx ctl 'pass pass debug on'")
	r = runZX(t, "", "ctl", "--json", loc).want(t, 0, "zx ctl --json")
	n := 0
	for l := range strings.SplitSeq(strings.TrimSpace(r.stdout), "\n") {
		var sec struct {
			Kind  string   `json:"kind"`
			Addr  string   `json:"addr"`
			Lines []string `json:"lines"`
		}
		if err := json.Unmarshal([]byte(l), &sec); err != nil {
			t.Fatalf("zx ctl --json: %v: %q", err, l)
		}
		n++
		want := "debug off"
		if sec.Kind == "server" || sec.Kind == "lfs" {
			want = "debug on"
		}
		if !slices.Contains(sec.Lines, want) {
			t.Errorf("%s: want %q in %q", sec.Kind, want, sec.Lines)
		}
	}
	if n != 3 {
		t.Errorf("zx ctl --json printed %d sections, want 3", n)
	}
	runZX(t, "", "ctl", loc, "sync").want(t, 0, "zx ctl sync")
	r = runZX(t, "", "ctl", loc, "pass", "frobnicate").want(t, 1, "zx ctl pass frobnicate")
	if !strings.Contains(r.stderr, "unknown command") {
		t.Errorf("zx ctl pass frobnicate: %s", r.stderr)
	}
	r = runZX(t, "", "ctl", loc, "pass pass pass debug on").want(t, 1, "pass below the bottom")
	if !strings.Contains(r.stderr, "no layer below lfs") {
		t.Errorf("pass below the bottom: %s", r.stderr)
	}
	runZX(t, "", "ctl").want(t, 2, "zx ctl with no location")
	// A tree that is not there is an error, whatever is asked of it.
	for _, args := range [][]string{{}, {"sync"}, {"debug", "on"}, {"pass", "debug", "on"}, {"--json"}} {
		r := runZX(t, "", append([]string{"ctl", loc + "@nosuchtree/"}, args...)...).want(t, 1, fmt.Sprintf("zx ctl %v of a missing tree", args))
		if !strings.Contains(r.stderr, "no tree named nosuchtree") || r.stdout != "" {
			t.Errorf("zx ctl %v of a missing tree printed %q, stderr %q", args, r.stdout, r.stderr)
		}
	}
	// Not in listings.
	r = runZX(t, "", "ls", loc).want(t, 0, "ls /")
	if strings.Contains(r.stdout, "Ctl") {
		t.Errorf("ls / lists Ctl: %s", r.stdout)
	}
}

// treeState describes the files of a tree (bytes, modes, mtimes),
// directories and links, leaving out the repl state directory.
func treeState(t *testing.T, root string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == ".zx-repl" {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			m[rel] = "link " + target
		case d.IsDir():
			m[rel] = fmt.Sprintf("dir %v", fi.Mode().Perm())
		default:
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = fmt.Sprintf("file %v %d %q", fi.Mode().Perm(), fi.ModTime().UnixNano(), data)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func sameState(t *testing.T, a, b string) {
	t.Helper()
	ma, mb := treeState(t, a), treeState(t, b)
	for k, v := range ma {
		if mb[k] != v {
			t.Errorf("%s: %.80s in %s, %.80s in %s", k, v, a, mb[k], b)
		}
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			t.Errorf("%s: only in %s", k, b)
		}
	}
}

func TestReplCommand(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(a, "src/main.go"), []byte("package main\n"))
	writeFile(t, filepath.Join(a, "src/lib/lib.go"), []byte("package lib\n"))
	writeFile(t, filepath.Join(a, "README"), []byte("read me\n"))
	os.Chmod(filepath.Join(a, "README"), 0o600)
	if err := os.Symlink("src/main.go", filepath.Join(a, "main")); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(b, "notes.txt"), []byte("from b\n"))
	addr := serve(t, b)
	loc := "zx://" + addr + "/"

	// A dry run does nothing, and says what it would do.
	r := runZX(t, "", "repl", "--dry-run", a, loc).want(t, 0, "repl --dry-run")
	if !strings.Contains(r.stdout, "copy a→b /src/main.go") || !strings.Contains(r.stdout, "copy b→a /notes.txt") {
		t.Errorf("dry run printed:\n%s", r.stdout)
	}
	if _, err := os.Stat(filepath.Join(b, "README")); err == nil {
		t.Fatal("the dry run copied README")
	}
	if _, err := os.Stat(filepath.Join(a, ".zx-repl")); err == nil {
		t.Error("the dry run wrote a state file")
	}

	r = runZX(t, "", "repl", "--json", a, loc).want(t, 0, "first repl")
	if !strings.Contains(r.stdout, `"summary":{`) || !strings.Contains(r.stdout, `"inSync":true`) {
		t.Errorf("repl --json:\n%s", r.stdout)
	}
	sameState(t, a, b)
	states, _ := filepath.Glob(filepath.Join(a, ".zx-repl", "*.json"))
	if len(states) != 1 {
		t.Fatalf("state files %v, want one", states)
	}
	var st struct {
		A, B    string
		Entries map[string]json.RawMessage
	}
	data, _ := os.ReadFile(states[0])
	if err := json.Unmarshal(data, &st); err != nil || st.A != a || st.B != strings.TrimSuffix(loc, "/") && st.B != loc {
		t.Errorf("state file: %v %q %q", err, st.A, st.B)
	}
	if _, ok := st.Entries["/src/lib/lib.go"]; !ok {
		t.Errorf("state file has no /src/lib/lib.go: %s", data)
	}
	r = runZX(t, "", "repl", a, loc).want(t, 0, "repl with nothing to do")
	if !strings.Contains(r.stderr, "zx repl: in sync") {
		t.Errorf("second repl: %s", r.stderr)
	}

	// Changes on both sides, and one conflict.
	later := time.Now().Add(time.Minute)
	writeFile(t, filepath.Join(a, "src/main.go"), []byte("package main // edited in a\n"))
	writeFile(t, filepath.Join(b, "src/lib/lib.go"), []byte("package lib // edited in b\n"))
	os.Remove(filepath.Join(b, "notes.txt"))
	writeFile(t, filepath.Join(a, "README"), []byte("a's readme\n"))
	writeFile(t, filepath.Join(b, "README"), []byte("b's readme\n"))
	os.Chtimes(filepath.Join(b, "README"), later, later)
	r = runZX(t, "", "repl", "-v", a, loc).want(t, 1, "repl with a conflict")
	if !strings.Contains(r.stdout, "conflict /README") || !strings.Contains(r.stdout, "copy a→b /src/main.go") || !strings.Contains(r.stdout, "remove a /notes.txt") {
		t.Errorf("repl -v printed:\n%s", r.stdout)
	}
	sameState(t, a, b)
	if b, _ := os.ReadFile(filepath.Join(a, "README")); string(b) != "b's readme\n" {
		t.Errorf("README after the conflict: %q, want b's (the newer)", b)
	}
	kept, _ := filepath.Glob(filepath.Join(a, "README.conflict-a-*"))
	if len(kept) != 1 {
		t.Fatalf("conflict copies %v, want one README.conflict-a-*", kept)
	} else if b, _ := os.ReadFile(kept[0]); string(b) != "a's readme\n" {
		t.Errorf("the conflict copy holds %q", b)
	}
	runZX(t, "", "repl", a, loc).want(t, 0, "repl after the conflict")

	// Two zx trees need --state; a state file for another pair is refused.
	runZX(t, "", "repl", loc, loc).want(t, 2, "repl of two zx trees without --state")
	other := t.TempDir()
	r = runZX(t, "", "repl", "--state", states[0], other, loc).want(t, 2, "repl with another pair's state")
	if !strings.Contains(r.stderr, "records side a as") {
		t.Errorf("repl with another pair's state: %s", r.stderr)
	}
	runZX(t, "", "repl", a).want(t, 2, "repl of one tree")
	runZX(t, "", "repl", "--exclude", "(bad", a, loc).want(t, 1, "repl with a bad exclude")
}

func TestDumpHistCommands(t *testing.T) {
	dir := t.TempDir()
	store := t.TempDir()
	writeFile(t, filepath.Join(dir, "proj/main.go"), []byte("package main\n\nfunc main() {}\n"))
	writeFile(t, filepath.Join(dir, "proj/data.bin"), []byte("\x00\x01\x02"))
	writeFile(t, filepath.Join(dir, "proj/.git/HEAD"), []byte("ref: main\n"))
	addr := serve(t, dir)
	loc := "zx://" + addr + "/proj"

	r := runZX(t, "", "dump", "--store", store, "--exclude", "name=.git", "--json", loc).want(t, 0, "first dump")
	var s1 struct {
		Snapshot string `json:"snapshot"`
		Files    int    `json:"files"`
		NewBlobs int    `json:"newBlobs"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s1); err != nil {
		t.Fatalf("dump --json: %v: %s", err, r.stdout)
	}
	today := time.Now().Format("2006/0102")
	if s1.Snapshot != "proj/"+today || s1.Files != 2 || s1.NewBlobs != 2 {
		t.Errorf("first dump: %+v, want proj/%s with 2 files, 2 blobs", s1, today)
	}
	writeFile(t, filepath.Join(dir, "proj/main.go"), []byte("package main\n\nfunc main() { println(1) }\n"))
	r = runZX(t, "", "dump", "--store", store, "--exclude", "name=.git", loc).want(t, 0, "second dump")
	if !strings.HasPrefix(r.stdout, "proj/"+today+".1: 2 files") {
		t.Errorf("second dump: %s", r.stdout)
	}
	runZX(t, "", "dump", "--store", store, "--name", ".bad", loc).want(t, 2, "dump with a bad name")
	runZX(t, "", "dump", "--store", store, "--name", "proj", t.TempDir()).want(t, 1, "dump of another source into proj")

	// hist lists both versions of main.go, one of data.bin.
	r = runZX(t, "", "hist", "--store", store, loc+"/main.go").want(t, 0, "hist main.go")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], today+" ") || !strings.HasPrefix(lines[1], today+".1 ") {
		t.Errorf("hist main.go:\n%s", r.stdout)
	}
	r = runZX(t, "", "hist", "--store", store, "--name", "proj", "/data.bin").want(t, 0, "hist --name proj /data.bin")
	if lines := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(lines) != 1 || !strings.Contains(lines[0], " - 0644           3 ") {
		t.Errorf("hist data.bin:\n%s", r.stdout)
	}
	runZX(t, "", "hist", "--store", store, loc+"/.git/HEAD").want(t, 1, "hist of an excluded file")

	// diff from the first version to the live file.
	r = runZX(t, "", "hist", "--store", store, "--diff", "-2", loc+"/main.go").want(t, 0, "hist --diff")
	want := "--- proj/" + today + "/main.go\n+++ " + loc + "/main.go\n@@ -1,3 +1,3 @@\n package main\n \n-func main() {}\n+func main() { println(1) }\n"
	if r.stdout != want {
		t.Errorf("hist --diff printed:\n%s\nwant:\n%s", r.stdout, want)
	}

	// restore the first version elsewhere, then in place.
	out := filepath.Join(t.TempDir(), "old.go")
	runZX(t, "", "hist", "--store", store, "--restore", today, "--to", out, loc+"/main.go").want(t, 0, "hist --restore --to")
	if b, _ := os.ReadFile(out); string(b) != "package main\n\nfunc main() {}\n" {
		t.Errorf("restored %q", b)
	}
	runZX(t, "", "hist", "--store", store, "--restore", "-2", loc+"/main.go").want(t, 0, "hist --restore in place")
	if b, _ := os.ReadFile(filepath.Join(dir, "proj/main.go")); string(b) != "package main\n\nfunc main() {}\n" {
		t.Errorf("restored in place: %q", b)
	}
	// A whole directory.
	tdir := filepath.Join(t.TempDir(), "proj")
	runZX(t, "", "hist", "--store", store, "--restore", "-1", "--to", tdir, loc).want(t, 0, "hist --restore of a directory")
	if b, _ := os.ReadFile(filepath.Join(tdir, "main.go")); string(b) != "package main\n\nfunc main() { println(1) }\n" {
		t.Errorf("restored directory's main.go: %q", b)
	}
	if _, err := os.Stat(filepath.Join(tdir, ".git")); err == nil {
		t.Errorf("the restore brought back the excluded .git")
	}

	// The store served as a tree.
	daddr := serve(t, t.TempDir(), "--dump", store)
	r = runZX(t, "", "get", "zx://"+daddr+"/@dump/proj/"+today+".1/main.go").want(t, 0, "get from the served dump")
	if r.stdout != "package main\n\nfunc main() { println(1) }\n" {
		t.Errorf("served dump: %q", r.stdout)
	}
}

// TestReplInterrupted cuts a sync short with --timeout over a slow link,
// and checks that the next run finishes it.
func TestReplInterrupted(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for i := range 20 {
		writeFile(t, filepath.Join(a, fmt.Sprintf("d%d/f%02d", i%3, i)), randomBytes(50<<10, uint64(i)))
	}
	addr := serve(t, b)
	slow := start(t, lagRe, "lag", "--listen", "127.0.0.1:0", "--to", addr, "--rtt", "20ms", "--rate", "1MB")
	loc := "zx://" + slow + "/"
	r := runZX(t, "", "repl", "--timeout", "300ms", a, loc).want(t, 1, "repl cut short")
	if !strings.Contains(r.stderr, "gave up after --timeout") || !strings.Contains(r.stderr, "run it again to finish") {
		t.Errorf("repl cut short said:\n%s", r.stderr)
	}
	if strings.Count(r.stderr, "\n") > 3 {
		t.Errorf("repl cut short printed an error per action:\n%s", r.stderr)
	}
	runZX(t, "", "repl", a, loc).want(t, 0, "repl after the cut")
	sameState(t, a, b)
	r = runZX(t, "", "repl", a, loc).want(t, 0, "repl with nothing left")
	if !strings.Contains(r.stderr, "in sync") {
		t.Errorf("third run: %s", r.stderr)
	}
}

func TestToolboxUsage(t *testing.T) {
	for _, args := range [][]string{
		{"ctl"},
		{"ctl", "/not/a/location"},
		{"repl", t.TempDir()},
		{"repl", "--bogus", "a", "b"},
		{"repl", "zx://127.0.0.1/", "zx://127.0.0.1:1/"}, // two zx trees, no --state
		{"dump"},
		{"dump", "--name", "../x", t.TempDir()},
		{"dump", "--exclude", "(", t.TempDir()},
		{"hist"},
		{"hist", "--diff", "-1", "--restore", "-1", "x"},
		{"hist", "--to", "x", "y"},
	} {
		r := runZX(t, "", args...).want(t, 2, "zx "+strings.Join(args, " "))
		if !strings.HasPrefix(r.stderr, "zx "+args[0]+": ") {
			t.Errorf("zx %s: stderr %q does not start with \"zx %s: \"", strings.Join(args, " "), r.stderr, args[0])
		}
	}
	// No store: exit 1, and say what to do.
	r := runZX(t, "", "hist", "--store", filepath.Join(t.TempDir(), "none"), "x").want(t, 1, "hist without a store")
	if !strings.Contains(r.stderr, "no dump store at") {
		t.Errorf("hist without a store: %s", r.stderr)
	}
}

// Put onto a symbolic link and wstat of a link's mode fail, saying that
// the path is a link, what it points to and what to do; nothing changes.
func TestSymlinkErrors(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "target"), []byte("target\n"))
	must(t, os.Symlink("target", filepath.Join(dir, "link")))
	addr := serve(t, dir)
	src := filepath.Join(t.TempDir(), "src")
	writeFile(t, src, []byte("new\n"))
	for _, args := range [][]string{
		{"put", src, "zx://" + addr + "/link"},
		{"put", "zx://" + addr + "/link"}, // from stdin
	} {
		r := runZX(t, "data\n", args...).want(t, 1, fmt.Sprintf("zx %v onto a symbolic link", args))
		if !strings.Contains(r.stderr, `/link: is a symbolic link, which requests never follow`) ||
			!strings.Contains(r.stderr, "remove the link first") || strings.Contains(r.stderr, "already exists") {
			t.Errorf("zx %v onto a symbolic link said %q", args, r.stderr)
		}
	}
	r := runZX(t, "", "wstat", "zx://"+addr+"/link", "mode=0600").want(t, 1, "zx wstat mode= of a symbolic link")
	if !strings.Contains(r.stderr, `wstat /link: is a symbolic link: Linux cannot change a link's mode`) {
		t.Errorf("zx wstat mode= of a symbolic link said %q", r.stderr)
	}
	// Its own mode (0777) is no change: an entry written back as it is.
	runZX(t, "", "wstat", "zx://"+addr+"/link", "mode=0777").want(t, 0, "zx wstat mode=0777 of a symbolic link")
	if b, _ := os.ReadFile(filepath.Join(dir, "target")); string(b) != "target\n" {
		t.Errorf("the link's target holds %q", b)
	}
	if fi, err := os.Lstat(filepath.Join(dir, "link")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Errorf("the link: %v %v", fi, err)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "target")); fi.Mode().Perm() != 0o644 {
		t.Errorf("the target's mode changed: %v", fi.Mode())
	}
}

// zx ls -l names owners and groups as ls -l does (by this machine's
// names, the number for an id without one); -n prints the numbers.
func TestLsOwners(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "mine"), []byte("x"))
	writeFile(t, filepath.Join(dir, "nameless"), []byte("y"))
	const noName = 54321 // an id this machine gives no name
	if _, err := user.LookupId(fmt.Sprint(noName)); err == nil {
		t.Fatalf("uid %d has a name here: pick another", noName)
	}
	if err := os.Chown(filepath.Join(dir, "nameless"), noName, noName); err != nil {
		t.Fatalf("chown (the test runs as root): %v", err)
	}
	uid, gid := fmt.Sprint(os.Getuid()), fmt.Sprint(os.Getgid())
	u, err := user.LookupId(uid)
	must(t, err)
	g, err := user.LookupGroupId(gid)
	must(t, err)
	addr := serve(t, dir)
	fields := func(out string) map[string][2]string {
		m := map[string][2]string{}
		for l := range strings.SplitSeq(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l)
			if len(f) < 9 {
				t.Fatalf("ls -l line %q", l)
			}
			m[f[len(f)-1]] = [2]string{f[2], f[3]}
		}
		return m
	}
	r := runZX(t, "", "ls", "-l", "zx://"+addr+"/").want(t, 0, "ls -l")
	got := fields(r.stdout)
	if got["mine"] != [2]string{u.Username, g.Name} || got["nameless"] != [2]string{"54321", "54321"} {
		t.Errorf("ls -l owners %v, want mine %s %s, nameless 54321 54321:\n%s", got, u.Username, g.Name, r.stdout)
	}
	r = runZX(t, "", "ls", "-n", "zx://"+addr+"/").want(t, 0, "ls -n")
	got = fields(r.stdout)
	if got["mine"] != [2]string{uid, gid} || got["nameless"] != [2]string{"54321", "54321"} {
		t.Errorf("ls -n owners %v, want mine %s %s:\n%s", got, uid, gid, r.stdout)
	}
}
