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

// TestModeZero: a file or directory with no permission bits is shown
// with none (go-fuse substitutes 0644 and 0755 unless told not to), so
// on a shared mount another user may neither read it nor enter it, as on
// a local disk.
func TestModeZero(t *testing.T) {
	canMount(t)
	if os.Getuid() != 0 {
		t.Skip("!!! SKIPPING: the test runs a helper as another user, which needs root !!!")
	}
	addr, disk := serveLFS(t)
	e := mnt(t, setup{addr: addr, opts: mount.Options{AllowOther: true, DefaultPermissions: true}})
	for d := e.dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		must(t, os.Chmod(d, 0755))
	}
	// One made with mode 0 at create, one chmod'ed to 0 afterwards.
	fd, err := syscall.Open(e.p("created0"), syscall.O_CREAT|syscall.O_WRONLY, 0)
	must(t, err)
	_, err = syscall.Write(fd, []byte("secret"))
	must(t, err)
	must(t, syscall.Close(fd))
	must(t, os.WriteFile(e.p("chmod0"), []byte("secret"), 0644))
	must(t, os.Chmod(e.p("chmod0"), 0))
	must(t, os.Mkdir(e.p("dir0"), 0755))
	must(t, os.WriteFile(e.p("dir0/f"), []byte("inside"), 0644))
	must(t, os.Chmod(e.p("dir0"), 0))

	for _, name := range []string{"created0", "chmod0", "dir0"} {
		for _, p := range []string{e.p(name), filepath.Join(disk, name)} {
			var st syscall.Stat_t
			must(t, syscall.Lstat(p, &st))
			if st.Mode&07777 != 0 {
				t.Errorf("%s: mode %#o, want 0", p, st.Mode&07777)
			}
		}
	}
	q := func(name string) string { return "'" + e.p(name) + "'" }
	for _, c := range []struct{ what, script string }{
		{"read a file created with mode 0", "cat " + q("created0")},
		{"read a file chmod'ed to 0", "cat " + q("chmod0")},
		{"enter a directory of mode 0", "cd " + q("dir0") + " && cat f"},
		{"list a directory of mode 0", "ls " + q("dir0")},
		{"read through a directory of mode 0", "cat " + q("dir0/f")},
	} {
		if out, ok := asNobody(t, c.script); ok {
			t.Errorf("%s: allowed (%s)", c.what, out)
		} else if !strings.Contains(out, "denied") && !strings.Contains(out, "can't cd") {
			t.Errorf("%s: %s, want permission denied", c.what, out)
		}
	}
}

// TestChownSupplementaryGroup: on a mount shared through a multi-user key,
// a file's owner may give it to any group the owner is in, not only the
// effective one (chown(2)), and to no other; the mount learns the
// caller's other groups itself, since FUSE tells only the effective gid.
func TestChownSupplementaryGroup(t *testing.T) {
	canMount(t)
	if os.Getuid() != 0 {
		t.Skip("!!! SKIPPING: the test runs a helper as another user, which needs root !!!")
	}
	addr, disk, dial := serveMultiUser(t)
	e := mnt(t, setup{addr: addr, dial: dial, opts: mount.Options{AllowOther: true, DefaultPermissions: true}})
	for d := e.dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		must(t, os.Chmod(d, 0755))
	}
	must(t, os.Mkdir(e.p("tmp"), 0777))
	must(t, os.Chmod(e.p("tmp"), 0777|os.ModeSticky))
	run := func(script string) (string, bool) {
		cmd := exec.Command("sh", "-c", script)
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{4321}}}
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err == nil
	}
	f, l := e.p("tmp/f"), e.p("tmp/l")
	if out, ok := run("echo x > " + f + " && chgrp 4321 " + f + " && ln -s f " + l + " && chgrp -h 4321 " + l); !ok {
		t.Fatalf("chgrp by the owner to a supplementary group: %s", out)
	}
	for _, name := range []string{"tmp/f", "tmp/l"} {
		for _, p := range []string{e.p(name), filepath.Join(disk, name)} {
			var st syscall.Stat_t
			must(t, syscall.Lstat(p, &st))
			if st.Uid != 65534 || st.Gid != 4321 {
				t.Errorf("%s: owned by %d:%d, want 65534:4321", p, st.Uid, st.Gid)
			}
		}
	}
	if out, ok := run("chgrp 65534 " + f); !ok {
		t.Errorf("chgrp back to the effective group: %s", out)
	}
	if out, ok := run("chgrp 4322 " + f); ok {
		t.Errorf("chgrp to a group the owner is not in: allowed (%s)", out)
	} else if !strings.Contains(out, "not permitted") {
		t.Errorf("chgrp to a group the owner is not in: %s, want operation not permitted", out)
	}
}
