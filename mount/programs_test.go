package mount_test

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// need skips the test, loudly, when a program is missing.
func need(t *testing.T, progs ...string) {
	t.Helper()
	for _, p := range progs {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("!!! SKIPPING: %s is not installed (.ci/run installs it on CI) !!!", p)
		}
	}
}

// run runs a command in dir with env added, failing the test on error;
// it returns the combined output. The command gets a minute.
func run(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// The child must not touch the mount between fork and exec (a
	// chdir there, cmd.Dir): until it execs, the forking thread of this
	// process, which serves the mount, is stopped holding its P, and a
	// garbage collection starting meanwhile waits for it while the child
	// waits for the mount: a deadlock (seen once, a 10-minute hang). A
	// shell from the local disk changes directory after its exec instead.
	if dir != "" {
		args = append([]string{"-c", `cd "$0" && exec "$@"`, dir, name}, args...)
		name = "/bin/sh"
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// sampleTree makes a small tree of files, directories, a symbolic link,
// a hard link, an executable and odd modes and times under dir.
func sampleTree(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"README":           "hello\n",
		"src/main.c":       "int main(void) { return 0; }\n",
		"src/lib/util.c":   strings.Repeat("/* util */\n", 500),
		"src/lib/empty":    "",
		"bin/tool":         "#!/bin/sh\necho tool\n",
		"data/big.bin":     string(bytes.Repeat([]byte{0, 1, 2, 3, 4, 5, 6, 7}, 40000)),
		"data/with space":  "spaces\n",
		"data/ünïcödé.txt": "utf-8\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0755))
		must(t, os.WriteFile(p, []byte(data), 0644))
	}
	must(t, os.Chmod(filepath.Join(dir, "bin/tool"), 0755))
	must(t, os.Chmod(filepath.Join(dir, "src/lib/empty"), 0600))
	must(t, os.Symlink("../README", filepath.Join(dir, "src/readme-link")))
	must(t, os.Link(filepath.Join(dir, "README"), filepath.Join(dir, "data/README-hard")))
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	must(t, os.Chtimes(filepath.Join(dir, "data/big.bin"), old, old))
	must(t, os.Chtimes(filepath.Join(dir, "src/lib"), old, old))
}

// describe lists the tree at root: path, type, permissions, size,
// contents digest, link target, mtime to the second and, with links,
// which entries share an inode.
func describe(t *testing.T, root string, times, links bool) string {
	t.Helper()
	var lines []string
	inodes := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		var st syscall.Stat_t
		if err := syscall.Lstat(p, &st); err != nil {
			return err
		}
		line := fmt.Sprintf("%s %o", rel, st.Mode)
		switch {
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %d %x", len(b), digest(b))
			if links && st.Nlink > 1 {
				if o, ok := inodes[st.Ino]; ok {
					line += " =" + o
				} else {
					inodes[st.Ino] = rel
				}
			}
		case d.Type()&fs.ModeSymlink != 0:
			tg, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + tg
		}
		if times && !d.IsDir() {
			line += fmt.Sprintf(" @%d", st.Mtim.Sec)
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestPrograms runs real programs on a mount of a real directory (lfs).
func TestPrograms(t *testing.T) {
	canMount(t)
	addr, _ := serveLFS(t)
	e := mnt(t, setup{addr: addr})
	local := t.TempDir()
	sampleTree(t, local)
	want := describe(t, local, true, true)

	t.Run("tar", func(t *testing.T) {
		need(t, "tar", "sh")
		dst := e.p("tar")
		must(t, os.Mkdir(dst, 0755))
		run(t, "", nil, "sh", "-c", "tar -C \"$1\" -cf - . | tar -C \"$2\" -xpf -", "sh", local, dst)
		if got := describe(t, dst, true, true); got != want {
			t.Fatalf("tar -x into the mount:\n%s\nwant:\n%s", got, want)
		}
		back := t.TempDir()
		run(t, "", nil, "sh", "-c", "tar -C \"$1\" -cf - . | tar -C \"$2\" -xpf -", "sh", dst, back)
		if got := describe(t, back, true, true); got != want {
			t.Fatalf("tar -c from the mount:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("cp", func(t *testing.T) {
		need(t, "cp")
		dst := e.p("cp")
		run(t, "", nil, "cp", "-a", local, dst)
		if got := describe(t, dst, true, true); got != want {
			t.Fatalf("cp -a into the mount:\n%s\nwant:\n%s", got, want)
		}
	})
	t.Run("rsync", func(t *testing.T) {
		need(t, "rsync")
		dst := e.p("rsync")
		run(t, "", nil, "rsync", "-aH", local+"/", dst+"/")
		if got := describe(t, dst, true, true); got != want {
			t.Fatalf("rsync -a into the mount:\n%s\nwant:\n%s", got, want)
		}
		// Nothing changed: a second run transfers nothing.
		if out := run(t, "", nil, "rsync", "-aH", "--itemize-changes", local+"/", dst+"/"); strings.TrimSpace(out) != "" {
			t.Fatalf("second rsync changed things:\n%s", out)
		}
		must(t, os.WriteFile(filepath.Join(local, "README"), []byte("changed\n"), 0644))
		defer os.WriteFile(filepath.Join(local, "README"), []byte("hello\n"), 0644)
		out := run(t, "", nil, "rsync", "-aH", "--itemize-changes", local+"/", dst+"/")
		if !strings.Contains(out, "README") {
			t.Fatalf("rsync did not send the changed file:\n%s", out)
		}
		if got := readFile(t, filepath.Join(dst, "data/README-hard")); got != "changed\n" {
			t.Fatalf("hard link after rsync -H: %q", got)
		}
	})
	t.Run("git", func(t *testing.T) {
		need(t, "git")
		repo := e.p("repo")
		run(t, "", nil, "cp", "-a", local, repo)
		env := []string{"HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com"}
		run(t, repo, env, "git", "init", "-q")
		run(t, repo, env, "git", "add", "-A")
		run(t, repo, env, "git", "commit", "-q", "-m", "first")
		if out := run(t, repo, env, "git", "status", "--porcelain"); out != "" {
			t.Fatalf("git status after commit:\n%s", out)
		}
		must(t, os.WriteFile(filepath.Join(repo, "src/main.c"), []byte("int main(void) { return 1; }\n"), 0644))
		if out := run(t, repo, env, "git", "status", "--porcelain"); strings.TrimSpace(out) != "M src/main.c" {
			t.Fatalf("git status after a change:\n%s", out)
		}
		run(t, repo, env, "git", "commit", "-q", "-am", "second")
		if out := run(t, repo, env, "git", "log", "--oneline"); strings.Count(out, "\n") != 2 || !strings.Contains(out, "second") {
			t.Fatalf("git log:\n%s", out)
		}
		run(t, repo, env, "git", "fsck", "--strict")
	})
	t.Run("make", func(t *testing.T) {
		need(t, "make", "cc", "sh")
		dir := e.p("cproj")
		must(t, os.Mkdir(dir, 0755))
		must(t, os.WriteFile(filepath.Join(dir, "hello.c"), []byte("#include <stdio.h>\n#include \"msg.h\"\nint main(void) { puts(MSG); return 0; }\n"), 0644))
		must(t, os.WriteFile(filepath.Join(dir, "msg.h"), []byte("#define MSG \"hello from the mount\"\n"), 0644))
		must(t, os.WriteFile(filepath.Join(dir, "Makefile"), []byte("hello: hello.o\n\tcc -o $@ hello.o\nhello.o: hello.c msg.h\n\tcc -c -o $@ hello.c\n"), 0644))
		run(t, dir, nil, "make")
		// Run the binary through a shell: the exec then happens in a
		// process that does not serve the mount.
		if out := run(t, dir, nil, "sh", "-c", "./hello"); out != "hello from the mount\n" {
			t.Fatalf("./hello: %q", out)
		}
		if out := run(t, dir, nil, "make"); !strings.Contains(out, "up to date") {
			t.Fatalf("second make did something:\n%s", out)
		}
		// make sees a changed header by its mtime.
		time.Sleep(10 * time.Millisecond)
		must(t, os.WriteFile(filepath.Join(dir, "msg.h"), []byte("#define MSG \"rebuilt\"\n"), 0644))
		run(t, dir, nil, "make")
		if out := run(t, dir, nil, "sh", "-c", "./hello"); out != "rebuilt\n" {
			t.Fatalf("./hello after the change: %q", out)
		}
	})
	t.Run("go", func(t *testing.T) {
		need(t, "go", "sh")
		dir := e.p("gomod")
		must(t, os.Mkdir(dir, 0755))
		must(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/hello\n\ngo 1.21\n"), 0644))
		must(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"go on the mount\\n\") }\n"), 0644))
		tmp := t.TempDir()
		env := []string{"GOCACHE=" + filepath.Join(tmp, "cache"), "GOPATH=" + filepath.Join(tmp, "path"), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "CGO_ENABLED=0"}
		run(t, dir, env, "go", "build", "-o", "hello", ".")
		if out := run(t, dir, nil, "sh", "-c", "./hello"); out != "go on the mount\n" {
			t.Fatalf("./hello: %q", out)
		}
		run(t, dir, env, "go", "vet", ".")
	})
}
