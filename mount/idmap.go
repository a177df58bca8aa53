package mount

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// IDMap translates file owners between the server and this machine:
// attributes shown to the kernel go through Local, owners sent to the
// server (chown, the owner of a new file) through Server. Ids without a
// mapping pass through unchanged.
type IDMap struct {
	uid, gid   map[uint32]uint32 // server → local
	ruid, rgid map[uint32]uint32 // local → server
	user       bool              // resolved at mount time from the root's owner
}

// ParseIDMap parses an --idmap value:
//
//   - "none" (or ""): ids are shown as the server has them;
//   - "user": the owner of the mounted directory on the server (the
//     server's user, normally) is shown as the local user running the
//     mount, and its group as the local user's group; as sshfs's
//     idmap=user;
//   - "file:PATH": PATH has lines "uid SERVER LOCAL" and
//     "gid SERVER LOCAL" (numeric ids; '#' starts a comment), for teams.
func ParseIDMap(spec string) (*IDMap, error) {
	m := &IDMap{uid: map[uint32]uint32{}, gid: map[uint32]uint32{}, ruid: map[uint32]uint32{}, rgid: map[uint32]uint32{}}
	switch {
	case spec == "" || spec == "none":
		return m, nil
	case spec == "user":
		m.user = true
		return m, nil
	case strings.HasPrefix(spec, "file:"):
		name := strings.TrimPrefix(spec, "file:")
		f, err := os.Open(name)
		if err != nil {
			return nil, fmt.Errorf("idmap: %w", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for ln := 1; sc.Scan(); ln++ {
			line, _, _ := strings.Cut(sc.Text(), "#")
			fs := strings.Fields(line)
			if len(fs) == 0 {
				continue
			}
			if len(fs) != 3 || fs[0] != "uid" && fs[0] != "gid" {
				return nil, fmt.Errorf("idmap: %s:%d: want \"uid SERVER LOCAL\" or \"gid SERVER LOCAL\"", name, ln)
			}
			s, err1 := strconv.ParseUint(fs[1], 10, 32)
			l, err2 := strconv.ParseUint(fs[2], 10, 32)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("idmap: %s:%d: ids must be numbers", name, ln)
			}
			if fs[0] == "uid" {
				m.uid[uint32(s)], m.ruid[uint32(l)] = uint32(l), uint32(s)
			} else {
				m.gid[uint32(s)], m.rgid[uint32(l)] = uint32(l), uint32(s)
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("idmap: %s: %w", name, err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("idmap: %q: want none, user or file:PATH", spec)
}

// resolve fixes a "user" map once the server's user (the root's owner)
// is known.
func (m *IDMap) resolve(suid, sgid uint32, luid, lgid uint32) {
	if m == nil || !m.user {
		return
	}
	m.uid[suid], m.ruid[luid] = luid, suid
	m.gid[sgid], m.rgid[lgid] = lgid, sgid
}

func lookup(t map[uint32]uint32, id uint32) uint32 {
	if v, ok := t[id]; ok {
		return v
	}
	return id
}

// LocalUID returns the local uid for the server's uid.
func (m *IDMap) LocalUID(id uint32) uint32 {
	if m == nil {
		return id
	}
	return lookup(m.uid, id)
}

// LocalGID returns the local gid for the server's gid.
func (m *IDMap) LocalGID(id uint32) uint32 {
	if m == nil {
		return id
	}
	return lookup(m.gid, id)
}

// ServerUID returns the server's uid for a local uid.
func (m *IDMap) ServerUID(id uint32) uint32 {
	if m == nil {
		return id
	}
	return lookup(m.ruid, id)
}

// ServerGID returns the server's gid for a local gid.
func (m *IDMap) ServerGID(id uint32) uint32 {
	if m == nil {
		return id
	}
	return lookup(m.rgid, id)
}
