package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The workloads of issue 14 that write, beside tar -x, make and rm -r:
// what people do on a remote tree. cp -a of a tree into the mount, git
// clone of a repository into it, git add and git commit in a checkout on
// it, and a database (sqlite3) committing transactions one at a time. The
// tree copied and the repository are made from the first
// Config.WriteFiles files of the tree, on local disk.
const (
	FCp        = "cp"
	FClone     = "clone"
	FCommit    = "commit"
	FSQLite    = "sqlite"     // journal_mode=DELETE, sqlite's default
	FSQLiteWAL = "sqlite-wal" // journal_mode=WAL
)

// commitChanges is how many files of the checkout the commit workload
// modifies, and how many it adds.
const commitChanges = 10

// The sqlite workloads' journal modes, by workload.
var sqliteModes = map[string]string{FSQLite: "delete", FSQLiteWAL: "wal"}

// writeFixtures are the inputs of the write workloads, made once per run.
type writeFixtures struct {
	small        string // a tree of the first Config.WriteFiles files of the tree, on local disk
	smallFiles   int64
	smallEntries int64 // under small, small itself not counted
	smallBytes   int64
	origin       string // a git repository of small's files, on local disk
	originHead   string
	cloneEntries int64  // entries in a clone of origin (work tree and .git)
	sqlScript    string // the transactions, on local disk
	// fsyncs: the fsync and fdatasync calls sqlite3 makes per transaction,
	// by journal mode, counted with strace; nil when not measured
	// (fsyncNote says why).
	fsyncs    map[string]float64
	fsyncNote string
}

// WriteInfo describes the write workloads' fixtures, for the report.
type WriteInfo struct {
	Files        int64 `json:"files"` // files in the tree cp copies and the repository holds
	Entries      int64 `json:"entries"`
	Bytes        int64 `json:"bytes"`
	CloneEntries int64 `json:"clone_entries"`
	Changes      int   `json:"commit_changes"` // files modified, and files added, by the commit
	Transactions int   `json:"transactions"`
	// FsyncsPerTx: fsync and fdatasync calls per sqlite transaction, by
	// journal mode ("delete", "wal"), counted with strace -f on the
	// local disk; FsyncNote says how, or why they were not counted.
	FsyncsPerTx map[string]float64 `json:"fsyncs_per_transaction,omitempty"`
	FsyncNote   string             `json:"fsync_note,omitempty"`
}

// wantsWrites says which write fixtures the asked-for workloads need.
func (c *Config) wantsWrites() (tree, repo, sqlite bool) {
	repo = c.fuseWantAny(FClone) || c.fuseWantAny(FCommit)
	tree = repo || c.fuseWantAny(FCp)
	sqlite = c.fuseWantAny(FSQLite) || c.fuseWantAny(FSQLiteWAL)
	return
}

// writeSetup makes the write workloads' fixtures into fx.
func (r *runner) writeSetup(ctx context.Context, fx *fuseFixtures) error {
	tree, repo, sqlite := r.cfg.wantsWrites()
	if sqlite {
		if _, err := exec.LookPath("sqlite3"); err != nil {
			return errors.New("the sqlite workloads run sqlite3, which is missing: apt-get install -y sqlite3 (or leave sqlite out of --workloads)")
		}
		if err := r.sqliteSetup(ctx, fx); err != nil {
			return err
		}
	}
	if !tree {
		return nil
	}
	fx.small = filepath.Join(r.dir, "small")
	var err error
	if fx.smallFiles, fx.smallBytes, err = firstFiles(filepath.Join(r.export, "tree"), fx.small, r.cfg.WriteFiles); err != nil {
		return err
	}
	fx.smallEntries, _ = countEntries(fx.small, "")
	r.cfg.logf("a tree of %d files (%d entries, %.1f MB) for cp and git", fx.smallFiles, fx.smallEntries, float64(fx.smallBytes)/1e6)
	if !repo {
		return nil
	}
	fx.origin = filepath.Join(r.dir, "origin")
	if err := copyTree(fx.small, fx.origin); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "-A"},
		{"commit", "-q", "-m", "zxbench"},
		// One pack, as a clone over the network receives.
		{"gc", "-q"},
	} {
		if _, err := git(ctx, fx.origin, args...); err != nil {
			return err
		}
	}
	if fx.originHead, err = git(ctx, fx.origin, "rev-parse", "HEAD"); err != nil {
		return err
	}
	ref := filepath.Join(r.dir, "refclone")
	if out, err := exec.CommandContext(ctx, "git", "clone", "-q", "--no-hardlinks", fx.origin, ref).CombinedOutput(); err != nil {
		return fmt.Errorf("git clone: %v: %s", err, out)
	}
	fx.cloneEntries, _ = countEntries(ref, "")
	return os.RemoveAll(ref)
}

// git runs git in dir and returns its output, trimmed.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	args = append([]string{"-c", "safe.directory=*", "-c", "user.name=zxbench", "-c", "user.email=bench@zx.invalid", "-C", dir}, args...)
	out, err := exec.CommandContext(ctx, "git", args...).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args[8:], " "), err, bytes.TrimSpace(ee.Stderr))
		}
		return "", fmt.Errorf("git %s: %w", strings.Join(args[8:], " "), err)
	}
	return strings.TrimSpace(string(out)), nil
}

// firstFiles copies the first n regular files of src, in walk order, to
// dst with their directories, modes and times, and returns how many it
// copied and their bytes.
func firstFiles(src, dst string, n int) (files, size int64, err error) {
	if err := os.RemoveAll(dst); err != nil {
		return 0, 0, err
	}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if files >= int64(n) {
			return filepath.SkipAll
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(to, data, fi.Mode().Perm()); err != nil {
			return err
		}
		if err := os.Chtimes(to, fi.ModTime(), fi.ModTime()); err != nil {
			return err
		}
		files++
		size += fi.Size()
		return nil
	})
	if err == nil && files == 0 {
		err = fmt.Errorf("%s has no regular files", src)
	}
	return files, size, err
}

// sameTree checks that b holds what a holds: the same names and types,
// and for files the same bytes, permissions and modification time (to
// the second: sshfs keeps no more).
func sameTree(a, b string) error {
	na, _ := countEntries(a, "")
	nb, _ := countEntries(b, "")
	if na != nb {
		return fmt.Errorf("%d entries in the copy, %d in the original", nb, na)
	}
	return filepath.WalkDir(a, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(a, p)
		fa, err := d.Info()
		if err != nil {
			return err
		}
		fb, err := os.Lstat(filepath.Join(b, rel))
		if err != nil {
			return fmt.Errorf("the copy: %w", err)
		}
		if fa.Mode().Type() != fb.Mode().Type() {
			return fmt.Errorf("%s: type %v in the copy, %v in the original", rel, fb.Mode().Type(), fa.Mode().Type())
		}
		if !fa.Mode().IsRegular() {
			return nil
		}
		if fa.Mode().Perm() != fb.Mode().Perm() || fa.ModTime().Unix() != fb.ModTime().Unix() {
			return fmt.Errorf("%s: mode %v, mtime %v in the copy; %v, %v in the original", rel, fb.Mode(), fb.ModTime(), fa.Mode(), fa.ModTime())
		}
		da, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		db, err := os.ReadFile(filepath.Join(b, rel))
		if err != nil {
			return err
		}
		if !bytes.Equal(da, db) {
			return fmt.Errorf("%s: contents differ in the copy", rel)
		}
		return nil
	})
}

// sqliteSetup writes the transactions' script and counts the fsyncs a
// transaction makes in each journal mode.
func (r *runner) sqliteSetup(ctx context.Context, fx *fuseFixtures) error {
	fx.sqlScript = filepath.Join(r.dir, "tx.sql")
	if err := os.WriteFile(fx.sqlScript, []byte(sqlTransactions(r.cfg.Transactions)), 0o644); err != nil {
		return err
	}
	if _, err := exec.LookPath("strace"); err != nil {
		fx.fsyncNote = "not counted: strace is not installed (apt-get install -y strace)"
		return nil
	}
	k := r.cfg.Transactions
	fx.fsyncs = map[string]float64{}
	for _, mode := range []string{"delete", "wal"} {
		var n [2]int64
		for i, tx := range []int{0, k} {
			dir := filepath.Join(r.dir, "fsyncs")
			script := filepath.Join(r.dir, "fsyncs.sql")
			if err := os.WriteFile(script, []byte(sqlTransactions(tx)), 0o644); err != nil {
				return err
			}
			if err := newDatabase(ctx, dir, mode); err != nil {
				return err
			}
			log := filepath.Join(r.dir, "fsyncs.strace")
			out, err := exec.CommandContext(ctx, "strace", "-f", "-qq", "-o", log, "-e", "trace=fsync,fdatasync",
				"sqlite3", "-bail", filepath.Join(dir, "bench.db"), ".read "+script).CombinedOutput()
			if err != nil {
				return fmt.Errorf("strace sqlite3: %v: %s", err, out)
			}
			b, err := os.ReadFile(log)
			if err != nil {
				return err
			}
			n[i] = int64(bytes.Count(b, []byte(" fsync(")) + bytes.Count(b, []byte(" fdatasync(")))
			os.RemoveAll(dir)
		}
		fx.fsyncs[mode] = float64(n[1]-n[0]) / float64(k)
	}
	fx.fsyncNote = fmt.Sprintf("counted with `strace -f -e trace=fsync,fdatasync` around the same sqlite3 command on the local disk, less those of a script of no transactions, over %d", k)
	r.cfg.logf("sqlite: %.2f fsyncs per transaction with journal_mode=DELETE, %.2f with WAL", fx.fsyncs["delete"], fx.fsyncs["wal"])
	return nil
}

// sqlTransactions is a script of n transactions, one row each, committed
// one at a time with synchronous=FULL.
func sqlTransactions(n int) string {
	var b strings.Builder
	b.WriteString("PRAGMA synchronous=FULL;\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "BEGIN; INSERT INTO t(v) VALUES(randomblob(200)); COMMIT;\n")
	}
	return b.String()
}

// newDatabase makes dir afresh with an empty database bench.db in journal
// mode mode (the mode is kept in the file), with sqlite3 on the local
// disk.
func newDatabase(ctx context.Context, dir, mode string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	sql := fmt.Sprintf("PRAGMA journal_mode=%s; CREATE TABLE t(id INTEGER PRIMARY KEY, v BLOB NOT NULL);", mode)
	if out, err := exec.CommandContext(ctx, "sqlite3", "-bail", filepath.Join(dir, "bench.db"), sql).CombinedOutput(); err != nil {
		return fmt.Errorf("sqlite3: making the database: %v: %s", err, out)
	}
	return nil
}

// sqliteQuery runs one query on the database db on the local disk.
func sqliteQuery(db, q string) (string, error) {
	out, err := exec.Command("sqlite3", "-bail", db, q).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("sqlite3 %q: %v: %s", q, err, bytes.TrimSpace(out))
	}
	return strings.TrimSpace(string(out)), nil
}

// sqliteRows counts the rows committed in db.
func sqliteRows(db string) (int64, error) {
	s, err := sqliteQuery(db, "SELECT count(*) FROM t;")
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// writeJobs adds the write workloads, in every zx mode.
func (r *runner) writeJobs(fx *fuseFixtures, add func(*fuseJob)) {
	cpDst := filepath.Join(r.export, "cp")
	clone := filepath.Join(r.export, "clone")
	work := filepath.Join(r.export, "work")
	for _, m := range zxModes {
		add(&fuseJob{w: FCp + m.suffix, base: FCp, mode: m, label: fmt.Sprintf("cp -a of a tree of %d files", fx.smallFiles),
			rough: 10, items: fx.smallEntries,
			cmd:      func(mnt, rel string) []string { return []string{"cp", "-a", fx.small, filepath.Join(mnt, "cp")} },
			prep:     func(string) error { return os.RemoveAll(cpDst) },
			progress: func() (int64, int64) { n, _ := countEntries(cpDst, ""); return n, fx.smallEntries },
			check:    func() error { return sameTree(fx.small, cpDst) }})
	}
	for _, m := range zxModes {
		add(&fuseJob{w: FClone + m.suffix, base: FClone, mode: m, label: fmt.Sprintf("git clone of a repository of %d files", fx.smallFiles),
			rough: 10, items: fx.smallFiles,
			cmd: func(mnt, rel string) []string {
				return []string{"git", "clone", "-q", "--no-hardlinks", fx.origin, filepath.Join(mnt, "clone")}
			},
			prep:     func(string) error { return os.RemoveAll(clone) },
			progress: func() (int64, int64) { n, _ := countEntries(clone, ""); return n, fx.cloneEntries },
			check:    func() error { return checkClone(clone, fx) }})
	}
	for _, m := range zxModes {
		add(&fuseJob{w: FCommit + m.suffix, base: FCommit, mode: m,
			label: fmt.Sprintf("git add + commit of %d changed and %d new files", commitChanges, commitChanges),
			rough: 10, items: 2 * commitChanges,
			cmd: func(mnt, rel string) []string {
				// One command: git add, then git commit (git -C: the
				// shell's working directory stays off the mount).
				return []string{"/bin/sh", "-c", `git -c "safe.directory=*" -C "$0" add -A && ` +
					`git -c "safe.directory=*" -c user.name=zxbench -c user.email=bench@zx.invalid -C "$0" commit -q -m change`,
					filepath.Join(mnt, "work")}
			},
			prep:  func(string) error { return prepCheckout(work, fx) },
			check: func() error { return checkCommit(work) }})
	}
	for _, w := range []string{FSQLite, FSQLiteWAL} {
		jm := sqliteModes[w]
		dir := filepath.Join(r.export, "db")
		db := filepath.Join(dir, "bench.db")
		n := int64(r.cfg.Transactions)
		for _, m := range zxModes {
			add(&fuseJob{w: w + m.suffix, base: w, mode: m,
				label: fmt.Sprintf("sqlite: %d transactions (journal_mode=%s)", n, strings.ToUpper(jm)),
				rough: 10, items: n,
				cmd: func(mnt, rel string) []string {
					return []string{"sqlite3", "-bail", filepath.Join(mnt, "db", "bench.db"), ".read " + fx.sqlScript}
				},
				prep: func(string) error { return newDatabase(context.Background(), dir, jm) },
				progress: func() (int64, int64) {
					rows, _ := sqliteRows(db)
					return rows, n
				},
				check: func() error {
					rows, err := sqliteRows(db)
					if err != nil {
						return err
					}
					if rows != n {
						return fmt.Errorf("%d rows in the database, want %d", rows, n)
					}
					if ok, err := sqliteQuery(db, "PRAGMA integrity_check;"); err != nil || ok != "ok" {
						return fmt.Errorf("the database fails its integrity check: %s %v", ok, err)
					}
					if got, err := sqliteQuery(db, "PRAGMA journal_mode;"); err != nil || got != jm {
						return fmt.Errorf("the database's journal mode is %q (%v), want %s", got, err, jm)
					}
					return nil
				}})
		}
	}
}

// checkClone checks that clone is a complete clone of fx.origin, with a
// clean work tree.
func checkClone(clone string, fx *fuseFixtures) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	head, err := git(ctx, clone, "rev-parse", "HEAD")
	if err != nil {
		return err
	}
	if head != fx.originHead {
		return fmt.Errorf("the clone's HEAD is %s, the repository's %s", head, fx.originHead)
	}
	files, err := git(ctx, clone, "ls-files")
	if err != nil {
		return err
	}
	if n := int64(len(strings.Fields(files))); n != fx.smallFiles {
		return fmt.Errorf("the clone has %d files, the repository %d", n, fx.smallFiles)
	}
	if st, err := git(ctx, clone, "status", "--porcelain"); err != nil || st != "" {
		return fmt.Errorf("the clone's work tree is not clean: %q %v", st, err)
	}
	return nil
}

// prepCheckout makes work a fresh clone of fx.origin on the server's disk
// with commitChanges files modified and as many added, ready for git add
// and git commit. Its index is up to date, not racily clean, and with
// core.checkStat=minimal and core.trustctime=false (as for git status) it
// stays valid on mounts that number inodes their own way.
func prepCheckout(work string, fx *fuseFixtures) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := os.RemoveAll(work); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "git", "clone", "-q", "--no-hardlinks", fx.origin, work).CombinedOutput(); err != nil {
		return fmt.Errorf("git clone: %v: %s", err, out)
	}
	for _, kv := range [][2]string{{"core.checkStat", "minimal"}, {"core.trustctime", "false"}} {
		if _, err := git(ctx, work, "config", kv[0], kv[1]); err != nil {
			return err
		}
	}
	files, err := git(ctx, work, "ls-files")
	if err != nil {
		return err
	}
	names := strings.Fields(files)
	// Files older than the index are not racily clean: git trusts
	// their stat data instead of reading them again.
	old := time.Now().Add(-time.Hour)
	for _, f := range names {
		if err := os.Chtimes(filepath.Join(work, f), old, old); err != nil {
			return err
		}
	}
	if _, err := git(ctx, work, "update-index", "-q", "--refresh"); err != nil {
		return err
	}
	for _, f := range names[:min(commitChanges, len(names))] {
		fh, err := os.OpenFile(filepath.Join(work, f), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return err
		}
		_, err = fh.WriteString("\n// changed by zxbench\n")
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	if err := os.Mkdir(filepath.Join(work, "zxbench-new"), 0o755); err != nil {
		return err
	}
	for i := 0; i < commitChanges; i++ {
		data := fmt.Sprintf("package new\n\n// File %d, added by zxbench.\nconst N%d = %d\n", i, i, i)
		if err := os.WriteFile(filepath.Join(work, "zxbench-new", fmt.Sprintf("f%d.go", i)), []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// checkCommit checks that work has the commit: a second commit holding
// every change, and a clean work tree.
func checkCommit(work string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n, err := git(ctx, work, "rev-list", "--count", "HEAD")
	if err != nil {
		return err
	}
	if n != "2" {
		return fmt.Errorf("%s commits, want 2: nothing was committed", n)
	}
	changed, err := git(ctx, work, "diff-tree", "--no-commit-id", "--name-only", "-r", "HEAD")
	if err != nil {
		return err
	}
	files, _ := git(ctx, work, "ls-files")
	want := min(commitChanges, len(strings.Fields(files))-commitChanges) + commitChanges
	if got := len(strings.Fields(changed)); got != want {
		return fmt.Errorf("the commit changes %d files, want %d", got, want)
	}
	if st, err := git(ctx, work, "status", "--porcelain"); err != nil || st != "" {
		return fmt.Errorf("the work tree is not clean after the commit: %q %v", st, err)
	}
	return nil
}
