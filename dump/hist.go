package dump

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/zxfs/zx"
)

// Version is one version of an entry in the snapshots of a tree.
type Version struct {
	Snapshot string    // YYYY/MMDD[.N]: the first snapshot that holds it
	Time     time.Time // when that snapshot was taken
	Dir      zx.Dir    // the entry, or nil where the entry is absent
}

// Same reports whether two entries are the same version: same type,
// mode, contents (size and hash) and link target. Times alone do not
// make a version.
func Same(a, b zx.Dir) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	for _, k := range []string{zx.AType, zx.AMode, AHash, zx.ATarget} {
		if a[k] != b[k] {
			return false
		}
	}
	return a.IsDir() || a[zx.ASize] == b[zx.ASize]
}

// History returns the versions of the entry at path p (a path in the
// dumped tree) across the snapshots of tree, oldest first: one where it
// first appears and one each time it changes afterwards (see Same), and
// a Version with a nil Dir each time it disappears. It reads only the
// lines of each manifest that mention p.
func (s *Store) History(tree, p string) ([]Version, error) {
	p, err := zx.CleanPath(p)
	if err != nil {
		return nil, err
	}
	names, err := s.Snapshots(tree)
	if err != nil {
		return nil, err
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%w of tree %s in %s", ErrNoSnapshot, tree, s.dir)
	}
	var vs []Version
	var last zx.Dir
	for _, name := range names {
		d, hdr, err := s.find(tree, name, p)
		if err != nil {
			return nil, err
		}
		if Same(d, last) {
			continue
		}
		if d == nil && last == nil {
			continue
		}
		vs = append(vs, Version{Snapshot: name, Time: hdr.Start, Dir: d})
		last = d
	}
	return vs, nil
}

// find returns the entry at p in a snapshot, or nil.
func (s *Store) find(tree, name, p string) (zx.Dir, Header, error) {
	r, err := s.openSnapshot(tree, name)
	if err != nil {
		return nil, Header{}, err
	}
	defer r.Close()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(p)
	needle := append([]byte(`"path":`), bytes.TrimSpace(b.Bytes())...)
	for {
		line, err := r.next()
		if err != nil {
			return nil, r.hdr, fmt.Errorf("snapshot %s/%s: %w", tree, name, err)
		}
		if line == nil {
			return nil, r.hdr, nil
		}
		if !bytes.Contains(line, needle) {
			continue
		}
		var d zx.Dir
		if err := json.Unmarshal(line, &d); err == nil && d[zx.APath] == p {
			// The rest is read to check the manifest is whole.
			for {
				l, err := r.next()
				if err != nil {
					return nil, r.hdr, fmt.Errorf("snapshot %s/%s: %w", tree, name, err)
				}
				if l == nil {
					return d, r.hdr, nil
				}
			}
		}
	}
}

// Pick selects a version: a snapshot name (YYYY/MMDD[.N], which need not
// be one where the entry changed: the version it held then is picked),
// or "-N", the Nth version back among those listed by History that are
// present (-1 is the latest version dumped). It returns the version and
// the snapshot that holds it.
func (s *Store) Pick(tree, p, which string) (Version, error) {
	if strings.HasPrefix(which, "-") {
		n, err := strconv.Atoi(which[1:])
		if err != nil || n <= 0 {
			return Version{}, zx.E(zx.ErrInvalid, "", which, "bad version: want YYYY/MMDD[.N] or -N")
		}
		vs, err := s.History(tree, p)
		if err != nil {
			return Version{}, err
		}
		for i := len(vs) - 1; i >= 0; i-- {
			if vs[i].Dir == nil {
				continue
			}
			if n--; n == 0 {
				return vs[i], nil
			}
		}
		return Version{}, zx.E(zx.ErrNotExist, "", p, fmt.Sprintf("no version %s in %d versions", which, len(vs)))
	}
	sn, ok := parseSnapName(which)
	if !ok {
		return Version{}, zx.E(zx.ErrInvalid, "", which, "bad version: want YYYY/MMDD[.N] or -N")
	}
	d, hdr, err := s.find(tree, sn.String(), p)
	if err != nil {
		return Version{}, err
	}
	if d == nil {
		return Version{}, zx.E(zx.ErrNotExist, "", p, "absent from snapshot "+tree+"/"+sn.String())
	}
	return Version{Snapshot: sn.String(), Time: hdr.Start, Dir: d}, nil
}
