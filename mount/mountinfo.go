package mount

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// FSType returns the file system type of the mount whose mount point is
// dir (an absolute, clean path), as /proc/self/mountinfo lists it
// ("fuse.zx" for a zx mount), and whether dir is a mount point at all. It
// reads the table, never dir itself, so it answers for a FUSE mount whose
// process is gone too.
func FSType(dir string) (string, bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || unescapeMountinfo(fields[4]) != dir {
			continue
		}
		for i, fl := range fields {
			if fl == "-" && i+1 < len(fields) {
				return fields[i+1], true
			}
		}
		return "", true
	}
	return "", false
}

// unescapeMountinfo undoes the octal escapes (\040 for a space) of a
// path in /proc/self/mountinfo.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
