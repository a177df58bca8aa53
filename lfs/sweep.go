package lfs

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// staleTemp is how long a temporary must have gone unwritten, besides
// predating the FS, before sweepTemps removes it.
const staleTemp = time.Minute

// sweepTemps removes from directory dfd the temporaries that a server
// killed in the middle of a put left behind: those last written before this
// FS started, and at least staleTemp ago. A put in progress writes its
// temporary as data arrives, so only one stalled for that long, by another
// server on the same directory, could lose its temporary (and then fail,
// leaving the old file). It runs when a listing meets a temporary, which is
// rare, so it costs nothing otherwise; errors are ignored (best effort).
func (f *FS) sweepTemps(dfd int) {
	if f.opts.ReadOnly {
		return
	}
	fd, err := openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	d := os.NewFile(uintptr(fd), "")
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	limit := time.Now().Add(-staleTemp)
	if f.since.Before(limit) {
		limit = f.since
	}
	for _, name := range names {
		if !isTemp(name) {
			continue
		}
		var st unix.Stat_t
		if lstat(dfd, name, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		if time.Unix(st.Mtim.Unix()).Before(limit) {
			unix.Unlinkat(dfd, name, 0)
		}
	}
}
