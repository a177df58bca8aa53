package zx

import (
	"context"
	"math"
	"strconv"
	"strings"
)

// AllocMode says what an Allocate does to a range of a file. Its bits
// have the values of Linux's FALLOC_FL_ flags of the same names, so that
// a FUSE mount passes fallocate(2)'s mode on unchanged and a tree on a
// local disk hands it to fallocate(2) as it is.
type AllocMode uint32

// Allocation modes. The zero mode allocates the range, extending the
// file if it ends past the end of the file.
const (
	// AllocKeepSize leaves the file's size alone, even if the range
	// ends past it: space is reserved beyond the end.
	AllocKeepSize AllocMode = 0x01
	// AllocPunchHole deallocates the range: it reads as zeros, and a
	// disk frees its blocks. Only with AllocKeepSize.
	AllocPunchHole AllocMode = 0x02
	// AllocZeroRange makes the range read as zeros, allocated.
	// Without AllocKeepSize, it extends the file as the zero mode does.
	AllocZeroRange AllocMode = 0x10

	// AllocModes are the bits a tree may be asked for.
	AllocModes = AllocKeepSize | AllocPunchHole | AllocZeroRange
)

func (m AllocMode) String() string {
	if m == 0 {
		return "allocate"
	}
	var s []string
	for _, b := range []struct {
		m    AllocMode
		name string
	}{{AllocKeepSize, "keep-size"}, {AllocPunchHole, "punch-hole"}, {AllocZeroRange, "zero-range"}} {
		if m&b.m != 0 {
			s = append(s, b.name)
			m &^= b.m
		}
	}
	if m != 0 {
		s = append(s, "0x"+strconv.FormatUint(uint64(m), 16))
	}
	return strings.Join(s, "|")
}

// Allocator is implemented by trees that can allocate, deallocate and
// zero ranges of a file's storage, as fallocate(2) does on a local disk
// (databases and download tools reserve space with it, and punch holes in
// files they no longer need all of).
type Allocator interface {
	// Allocate applies mode to the n bytes of the regular file at path
	// from offset off, and returns the file's entry after it:
	//
	//   - 0: the range is allocated (a write there will not fail for
	//     want of space); data in it is kept; if it ends past the end
	//     of the file, the file grows to its end, reading as zeros.
	//   - AllocKeepSize: as 0, but the size stays as it is.
	//   - AllocPunchHole|AllocKeepSize: the range reads as zeros and its
	//     space is freed; the size stays.
	//   - AllocZeroRange (with or without AllocKeepSize): the range
	//     reads as zeros, allocated; without AllocKeepSize the file
	//     grows to the range's end, if it ends past it.
	//
	// Bad arguments fail as CheckAlloc says. A directory fails with
	// ErrIsDir, another entry that is not a regular file with
	// ErrInvalid. A mode the storage cannot do fails with ErrNotSupp,
	// lack of space with ErrNoSpace. Allocate is a write: it takes its
	// place in the order of requests on path as a Put does.
	Allocate(ctx context.Context, path string, mode AllocMode, off, n int64) <-chan Reply
}

// Allocate calls t's Allocate, or fails with ErrNotSupp when t cannot
// allocate.
func Allocate(ctx context.Context, t Tree, path string, mode AllocMode, off, n int64) <-chan Reply {
	if a, ok := t.(Allocator); ok {
		return a.Allocate(ctx, path, mode, off, n)
	}
	c := make(chan Reply, 1)
	c <- Reply{Err: E(ErrNotSupp, "allocate", path, "the tree cannot allocate file space")}
	close(c)
	return c
}

// CheckAlloc checks the arguments of an Allocate as fallocate(2) does, so
// that every tree refuses the same ones the same way: bits outside
// AllocModes, and AllocPunchHole without AllocKeepSize, fail with
// ErrNotSupp (EOPNOTSUPP, as Linux says); AllocPunchHole with
// AllocZeroRange, a negative offset or a length that is not positive
// with ErrInvalid; a range that ends past the largest offset with
// ErrTooBig.
func CheckAlloc(path string, mode AllocMode, off, n int64) error {
	switch {
	case mode&^AllocModes != 0:
		return E(ErrNotSupp, "allocate", path, "unknown mode "+mode.String())
	case mode&AllocPunchHole != 0 && mode&AllocZeroRange != 0:
		return E(ErrInvalid, "allocate", path, "punch-hole and zero-range together")
	case mode&AllocPunchHole != 0 && mode&AllocKeepSize == 0:
		return E(ErrNotSupp, "allocate", path, "punch-hole without keep-size")
	case off < 0:
		return E(ErrInvalid, "allocate", path, "negative offset")
	case n <= 0:
		return E(ErrInvalid, "allocate", path, "length not positive")
	case off > math.MaxInt64-n:
		return E(ErrTooBig, "allocate", path, "range past the largest offset")
	}
	return nil
}

// AllocSize returns the size a file of size size has after an Allocate
// of mode over n bytes from off.
func AllocSize(size int64, mode AllocMode, off, n int64) int64 {
	if mode&AllocKeepSize == 0 && mode&AllocPunchHole == 0 && off+n > size {
		return off + n
	}
	return size
}

// AllocZeroes reports whether an Allocate of mode makes its range read as
// zeros (so that copies of the file's data must be dropped or zeroed).
func AllocZeroes(mode AllocMode) bool {
	return mode&(AllocPunchHole|AllocZeroRange) != 0
}
