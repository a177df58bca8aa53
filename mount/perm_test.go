package mount_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/zxfs/zx/mount"
)

// asNobody runs a shell command as uid/gid 65534 and returns its output
// and whether it succeeded.
func asNobody(t *testing.T, script string) (string, bool) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err == nil
}

// TestPermissions: a mount shared by several users (allow_other,
// default_permissions) checks permissions for each, keeps ownership of
// what each creates, and honours sticky directories.
func TestPermissions(t *testing.T) {
	canMount(t)
	if os.Getuid() != 0 {
		t.Skip("!!! SKIPPING: the test runs a helper as another user, which needs root !!!")
	}
	addr, disk := serveLFS(t)
	e := mnt(t, setup{addr: addr, opts: mount.Options{AllowOther: true, DefaultPermissions: true}})
	// Let the other user reach the mount point.
	for d := e.dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		must(t, os.Chmod(d, 0755))
	}
	must(t, os.WriteFile(e.p("secret"), []byte("root only"), 0600))
	must(t, os.WriteFile(e.p("public"), []byte("everyone"), 0644))
	must(t, os.Mkdir(e.p("closed"), 0755))
	must(t, os.Mkdir(e.p("tmp"), 0777|os.ModeSticky))
	must(t, os.Chmod(e.p("tmp"), 0777|os.ModeSticky))
	must(t, os.WriteFile(e.p("tmp/roots"), []byte("r"), 0644))
	q := func(name string) string { return "'" + e.p(name) + "'" }

	if out, ok := asNobody(t, "cat "+q("public")); !ok || out != "everyone" {
		t.Fatalf("reading a public file: %v %q", ok, out)
	}
	for _, c := range []struct{ what, script string }{
		{"read a 0600 file of root's", "cat " + q("secret")},
		{"write a 0644 file of root's", "echo x >> " + q("public")},
		{"create in a 0755 directory of root's", "touch " + q("closed/x")},
		{"remove root's file from a sticky directory", "rm -f " + q("tmp/roots")},
		{"chmod root's file", "chmod 666 " + q("public")},
	} {
		if out, ok := asNobody(t, c.script); ok {
			t.Errorf("%s: allowed (%s)", c.what, out)
		} else if !strings.Contains(out, "denied") && !strings.Contains(out, "not permitted") {
			t.Errorf("%s: %s, want permission denied or not permitted", c.what, out)
		}
	}
	// What the other user may do, with its own identity.
	if out, ok := asNobody(t, "echo mine > "+q("tmp/nobodys")+" && mkdir "+q("tmp/nd")+" && chmod 600 "+q("tmp/nobodys")+" && cat "+q("tmp/nobodys")); !ok || out != "mine" {
		t.Fatalf("creating in a sticky directory: %v %q", ok, out)
	}
	for _, name := range []string{"tmp/nobodys", "tmp/nd"} {
		for _, p := range []string{e.p(name), filepath.Join(disk, name)} {
			var st syscall.Stat_t
			must(t, syscall.Stat(p, &st))
			if st.Uid != 65534 || st.Gid != 65534 {
				t.Errorf("%s: owned by %d:%d, want 65534:65534", p, st.Uid, st.Gid)
			}
		}
	}
	if out, ok := asNobody(t, "rm "+q("tmp/nobodys")+" && rmdir "+q("tmp/nd")); !ok {
		t.Fatalf("removing its own files from a sticky directory: %s", out)
	}
	if _, err := os.Stat(e.p("tmp/roots")); err != nil {
		t.Fatalf("root's file in the sticky directory: %v", err)
	}
}
