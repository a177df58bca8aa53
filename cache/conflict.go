package cache

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/zxfs/zx"
)

// A Conflict is a change the client was told had succeeded that the server
// could not take as it was made (a written file whose directory was gone
// or whose name was taken by something else, a change refused): what was
// done with it, kept for the user. Conflicts are listed in the journal's
// directory, in the file "conflicts" (one JSON object a line, appended,
// fsynced), shown in the cache's section of /Ctl, and by
// `zx conflicts MOUNTPOINT`.
type Conflict struct {
	Time   time.Time `json:"time"`
	Path   string    `json:"path"`           // where the change was made
	Copy   string    `json:"copy,omitempty"` // where its data is now, if not at Path
	Op     string    `json:"op"`             // "write", "create", "mkdir", "move", "remove", "wstat"
	Reason string    `json:"reason"`         // what the server said, and what was done
}

// conflictsFile is the name of the list of conflicts in a journal's
// directory.
const conflictsFile = "conflicts"

// ConflictName returns the name of the conflict copy of the file at p made
// by host at t: "NAME.zx-conflict-HOST-YYYYMMDDTHHMMSSZ" beside it, with
// "-N" (N from 2) added when n > 1 because that name is taken. It keeps
// the file in its directory, sorted beside it, and says where it came
// from; the upper-case, dotted suffix is not what programs make.
func ConflictName(p, host string, t time.Time, n int) string {
	host = strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == ' ' {
			return '_'
		}
		return r
	}, host)
	if host == "" {
		host = "client"
	}
	name := fmt.Sprintf("%s.zx-conflict-%s-%s", p, host, t.UTC().Format("20060102T150405Z"))
	if n > 1 {
		name += fmt.Sprintf("-%d", n)
	}
	return name
}

// conflictLog is the list of conflicts of a journal.
type conflictLog struct {
	mu   sync.Mutex
	file string
	n    int
	last []Conflict // the most recent, for /Ctl
}

// record appends c to the list, durably.
func (l *conflictLog) record(c Conflict) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, err := json.Marshal(c)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(l.file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("conflicts: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	l.n++
	l.last = append(l.last, c)
	if len(l.last) > 20 {
		l.last = l.last[len(l.last)-20:]
	}
	if err != nil {
		return fmt.Errorf("conflicts: %w", err)
	}
	return nil
}

// ReadConflicts returns the conflicts listed in the write-back journal
// dir, oldest first (none if it has no list).
func ReadConflicts(dir string) ([]Conflict, error) {
	f, err := os.Open(filepath.Join(dir, conflictsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var cs []Conflict
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var c Conflict
		if json.Unmarshal(sc.Bytes(), &c) != nil {
			continue // a line cut short by a crash
		}
		cs = append(cs, c)
	}
	return cs, sc.Err()
}

// Change is a change of the name space (or of attributes) made through a
// write-back mount without waiting for the server: journaled before the
// call returns, so that records written after it, which may depend on it
// (a file in a new directory, written after a rename), are replayed after
// it. Op is "put" (a create: Dir has the type, and may say Excl), "move"
// (Path to To), "remove" or "wstat" (Dir the attributes).
type Change struct {
	Op  string            `json:"op"`
	Dir map[string]string `json:"dir,omitempty"`
	To  string            `json:"to,omitempty"`
}

// opName returns the name of a change's kind in a Conflict.
func (c *Change) opName() string {
	switch {
	case c.Op == "put" && c.Dir[zx.AType] == zx.TypeDir:
		return "mkdir"
	case c.Op == "put":
		return "create"
	}
	return c.Op
}
