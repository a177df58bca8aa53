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
	var bp unsafe.Pointer
	if len(buf) > 0 {
		bp = unsafe.Pointer(&buf[0])
	}
	n, _, e := unix.Syscall6(sysListxattrat, uintptr(dfd), uintptr(unsafe.Pointer(p)),
		unix.AT_SYMLINK_NOFOLLOW, uintptr(bp), uintptr(len(buf)), 0)
	if e != 0 {
		if e == unix.ENOSYS {
			noListxattrat.Store(true)
		}
		return 0, e
	}
	return int(n), nil
}
