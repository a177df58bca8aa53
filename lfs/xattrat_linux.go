package lfs

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sysListxattrat is listxattrat(2), Linux 6.13, the same number on every
// architecture (the unified system call table).
const sysListxattrat = 465

var noListxattrat atomic.Bool

// listxattrat lists the extended attributes of name in dfd without
// following it, with no path walk through /proc. It returns ENOSYS on
// older kernels.
func listxattrat(dfd int, name string, buf []byte) (int, error) {
	if noListxattrat.Load() {
		return 0, unix.ENOSYS
	}
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return 0, err
	}
	return listxattratPtr(dfd, p, buf)
}

// listxattratPtr is listxattrat with the name given as a NUL-terminated
// C string, as getdents(2) returns it.
func listxattratPtr(dfd int, name *byte, buf []byte) (int, error) {
	if noListxattrat.Load() {
		return 0, unix.ENOSYS
	}
	var bp unsafe.Pointer
	if len(buf) > 0 {
		bp = unsafe.Pointer(&buf[0])
	}
	for {
		n, _, e := unix.Syscall6(sysListxattrat, uintptr(dfd), uintptr(unsafe.Pointer(name)),
			unix.AT_SYMLINK_NOFOLLOW, uintptr(bp), uintptr(len(buf)), 0)
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		case unix.ENOSYS:
			noListxattrat.Store(true)
		}
		return 0, e
	}
}

// statxAt is statx(2) of name in dfd, not following it, with the name
// given as a NUL-terminated C string.
func statxAt(dfd int, name *byte, st *unix.Statx_t) error {
	for {
		_, _, e := unix.Syscall6(unix.SYS_STATX, uintptr(dfd), uintptr(unsafe.Pointer(name)),
			unix.AT_SYMLINK_NOFOLLOW, unix.STATX_BASIC_STATS, uintptr(unsafe.Pointer(st)), 0)
		switch e {
		case 0:
			return nil
		case unix.EINTR:
			continue
		}
		return e
	}
}
