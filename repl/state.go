package repl

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/zxfs/zx"
)

// StateVersion is the version of the state file format.
const StateVersion = 1

// An Entry is what repl knows of one side's entry: the attributes it
// compares to tell whether the entry changed, and the SHA-256 of a file's
// contents when repl has seen them.
type Entry struct {
	Type   string `json:"type"`
	Size   int64  `json:"size,omitempty"`
	Mtime  int64  `json:"mtime,omitempty"` // nanoseconds since the epoch
	Mode   string `json:"mode,omitempty"`
	Target string `json:"target,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
}

// entryOf returns the Entry for an entry of a tree, or nil for the types
// repl does not replicate (fifos, devices, control files ...).
func entryOf(d zx.Dir) *Entry {
	e := &Entry{Type: d.Type(), Mode: zx.FormatMode(d.Mode())}
	switch e.Type {
	case zx.TypeFile:
		e.Size = d.Size()
		e.Mtime = d.Int(zx.AMtime)
	case zx.TypeDir:
	case zx.TypeLink:
		e.Target = d[zx.ATarget]
		e.Mtime = d.Int(zx.AMtime)
		e.Mode = ""
	default:
		return nil
	}
	return e
}

// same reports whether the recorded entry r and the current entry c are the
// same version: the entry did not change since r was recorded. Directories
// compare type and mode (their mtime changes with their contents), links
// their targets, files size, mtime and mode.
func same(r, c *Entry) bool {
	if r == nil || c == nil {
		return r == nil && c == nil
	}
	if r.Type != c.Type {
		return false
	}
	switch r.Type {
	case zx.TypeDir:
		return r.Mode == c.Mode
	case zx.TypeLink:
		return r.Target == c.Target
	}
	return r.Size == c.Size && r.Mtime == c.Mtime && r.Mode == c.Mode
}

func (e *Entry) isDir() bool { return e != nil && e.Type == zx.TypeDir }

func (e *Entry) String() string {
	if e == nil {
		return "none"
	}
	switch e.Type {
	case zx.TypeDir:
		return "directory"
	case zx.TypeLink:
		return "link to " + e.Target
	}
	return fmt.Sprintf("file of %d bytes, %s", e.Size, time.Unix(0, e.Mtime).UTC().Format(time.RFC3339Nano))
}

// A Record is the state of one path at the end of its last sync: each
// side's entry then. The two describe the same contents (the times and modes
// may differ where a tree cannot keep them exactly).
type Record struct {
	A *Entry `json:"a"`
	B *Entry `json:"b"`
}

// State is what repl recorded at the end of the last sync of two trees:
// per path, each side's entry. It is kept in a small JSON file the user may
// read (see docs/repl.md). A State is safe for concurrent use by the run
// that owns it.
type State struct {
	Version int                `json:"version"`
	A       string             `json:"a,omitempty"` // descriptions of the sides, for people
	B       string             `json:"b,omitempty"`
	Updated time.Time          `json:"updated"`
	Entries map[string]*Record `json:"entries"`

	file string
	mu   sync.Mutex
}

// NewState returns an empty state kept in memory only.
func NewState() *State { return &State{Version: StateVersion, Entries: map[string]*Record{}} }

// LoadState reads the state file at file. A missing file is an empty state
// (the first sync); the state is saved to file by Save and by Sync.
func LoadState(file string) (*State, error) {
	s := NewState()
	s.file = file
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("%s: bad state file: %v", file, err)
	}
	if s.Version != StateVersion {
		return nil, fmt.Errorf("%s: state file version %d, want %d", file, s.Version, StateVersion)
	}
	if s.Entries == nil {
		s.Entries = map[string]*Record{}
	}
	for p, r := range s.Entries {
		if r == nil {
			delete(s.Entries, p)
		}
	}
	return s, nil
}

// File returns the file the state is saved to, or "".
func (s *State) File() string { return s.file }

// Save writes the state to its file atomically (a temporary file in the same
// directory, synced and renamed over it). It does nothing for a state kept
// in memory.
func (s *State) Save() error {
	if s.file == "" {
		return nil
	}
	s.mu.Lock()
	s.Updated = time.Now().UTC()
	b, err := json.MarshalIndent(s, "", "\t")
	s.mu.Unlock()
	if err != nil {
		return err
	}
	b = append(b, '\n')
	dir := filepath.Dir(s.file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, filepath.Base(s.file)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, s.file)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("saving state: %w", err)
	}
	return nil
}

func (s *State) get(p string) *Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Entries[p]
}

func (s *State) set(p string, a, b *Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Entries[p] = &Record{A: a, B: b}
}

func (s *State) del(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.Entries, p)
}

// snapshot returns a copy of the entries.
func (s *State) snapshot() map[string]*Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := make(map[string]*Record, len(s.Entries))
	for p, r := range s.Entries {
		m[p] = r
	}
	return m
}
