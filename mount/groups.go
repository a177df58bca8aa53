package mount

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// inGroups reports whether the process pid has gid among its
// supplementary groups, from /proc/PID/status. FUSE requests carry only
// the caller's uid and effective gid; chown(2) by a file's owner to any
// group the owner is in is allowed on a local disk, so the mount looks
// the other groups up when it needs them, as other FUSE file systems do.
// A process that is gone, or a /proc that cannot be read, has none.
func inGroups(pid uint32, gid uint32) bool {
	if pid == 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/status")
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("Groups:"))
		if !ok {
			continue
		}
		for _, f := range bytes.Fields(rest) {
			if g, err := strconv.ParseUint(string(f), 10, 32); err == nil && uint32(g) == gid {
				return true
			}
		}
		return false
	}
	return false
}
