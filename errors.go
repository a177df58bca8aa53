package zx

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// Kind is the stable class of an error. Kinds cross the wire as their
// numeric value, so the values never change. A Kind is itself an error, so
// callers write errors.Is(err, zx.ErrNotExist).
type Kind uint8

// Error kinds. Append only: the numbers are part of the protocol.
const (
	ErrOther       Kind = 1  // anything else
	ErrNotExist    Kind = 2  // ENOENT
	ErrExist       Kind = 3  // EEXIST
	ErrNotEmpty    Kind = 4  // ENOTEMPTY
	ErrPermission  Kind = 5  // EACCES: permission denied
	ErrNotDir      Kind = 6  // ENOTDIR
	ErrIsDir       Kind = 7  // EISDIR
	ErrReadOnly    Kind = 8  // EROFS: the tree or the user's access is read-only
	ErrNoSpace     Kind = 9  // ENOSPC, EDQUOT
	ErrInvalid     Kind = 10 // EINVAL: a bad argument, path or predicate
	ErrIO          Kind = 11 // EIO: an I/O error, or the connection was lost
	ErrCanceled    Kind = 12 // the request was cancelled
	ErrTimeout     Kind = 13 // ETIMEDOUT: the peer did not answer in time
	ErrNameTooLong Kind = 14 // ENAMETOOLONG
	ErrCrossDev    Kind = 15 // EXDEV
	ErrNotSupp     Kind = 16 // ENOTSUP: the tree cannot do this
	ErrNotPermit   Kind = 17 // EPERM: operation not permitted (ownership)
	ErrLoop        Kind = 18 // ELOOP
	ErrTooBig      Kind = 19 // EFBIG, or a message over the protocol's limit
	ErrProtocol    Kind = 20 // the peer broke the protocol
	ErrBusy        Kind = 21 // EBUSY
	ErrAuth        Kind = 22 // authentication failed or access not granted
	ErrLimit       Kind = 23 // a server limit was reached; retry later
)

var kindNames = map[Kind]string{
	ErrOther:       "error",
	ErrNotExist:    "not found",
	ErrExist:       "already exists",
	ErrNotEmpty:    "directory not empty",
	ErrPermission:  "permission denied",
	ErrNotDir:      "not a directory",
	ErrIsDir:       "is a directory",
	ErrReadOnly:    "read-only",
	ErrNoSpace:     "no space left",
	ErrInvalid:     "invalid argument",
	ErrIO:          "i/o error",
	ErrCanceled:    "cancelled",
	ErrTimeout:     "timed out",
	ErrNameTooLong: "name too long",
	ErrCrossDev:    "cross-device link",
	ErrNotSupp:     "not supported",
	ErrNotPermit:   "operation not permitted",
	ErrLoop:        "too many symbolic links",
	ErrTooBig:      "too big",
	ErrProtocol:    "protocol error",
	ErrBusy:        "busy",
	ErrAuth:        "not authorized",
	ErrLimit:       "limit reached",
}

func (k Kind) Error() string {
	if s, ok := kindNames[k]; ok {
		return s
	}
	return "error"
}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { _, ok := kindNames[k]; return ok }

// Error is the error of a zx request: a kind, the operation and path it
// concerns, and a message. It crosses the wire intact.
type Error struct {
	Kind Kind
	Op   string // request, e.g. "put"
	Path string // path it concerns
	Msg  string // detail, if any
	Err  error  // underlying error, local side only (not sent)
}

func (e *Error) Error() string {
	s := ""
	if e.Op != "" {
		s = e.Op + " "
	}
	if e.Path != "" {
		s += e.Path + ": "
	} else if s != "" {
		s = s[:len(s)-1] + ": "
	}
	if e.Msg != "" {
		return s + e.Msg
	}
	if e.Err != nil {
		return s + e.Err.Error()
	}
	return s + e.Kind.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Is matches a Kind, and the io/fs sentinel errors for the kinds that have
// one, so code written for os errors works with zx errors.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Kind:
		return e.Kind == t
	}
	switch target {
	case fs.ErrNotExist:
		return e.Kind == ErrNotExist
	case fs.ErrExist:
		return e.Kind == ErrExist
	case fs.ErrPermission:
		return e.Kind == ErrPermission || e.Kind == ErrNotPermit
	case fs.ErrInvalid:
		return e.Kind == ErrInvalid
	case context.Canceled:
		return e.Kind == ErrCanceled
	case context.DeadlineExceeded:
		return e.Kind == ErrTimeout
	}
	return false
}

// E returns an *Error of the given kind.
func E(kind Kind, op, path, msg string) error {
	return &Error{Kind: kind, Op: op, Path: path, Msg: msg}
}

// Errorf wraps err as an *Error for op and path, keeping its kind if it has
// one and classifying it (see KindOf) otherwise.
func Errorf(op, path string, err error) error {
	if err == nil {
		return nil
	}
	var ze *Error
	if errors.As(err, &ze) {
		if ze.Op == "" || ze.Path == "" {
			c := *ze
			if c.Op == "" {
				c.Op = op
			}
			if c.Path == "" {
				c.Path = path
			}
			return &c
		}
		return err
	}
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		msg = le.Err.Error()
	}
	return &Error{Kind: KindOf(err), Op: op, Path: path, Msg: msg, Err: err}
}

// KindOf classifies err: its own Kind if it has one, the kind matching an
// errno or an io/fs or context error, or ErrOther. KindOf(nil) is 0.
func KindOf(err error) Kind {
	if err == nil {
		return 0
	}
	var ze *Error
	if errors.As(err, &ze) {
		return ze.Kind
	}
	var k Kind
	if errors.As(err, &k) {
		return k
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if k, ok := errnoKinds[errno]; ok {
			return k
		}
		return ErrIO
	}
	switch {
	case errors.Is(err, context.Canceled):
		return ErrCanceled
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return ErrTimeout
	case errors.Is(err, fs.ErrNotExist):
		return ErrNotExist
	case errors.Is(err, fs.ErrExist):
		return ErrExist
	case errors.Is(err, fs.ErrPermission):
		return ErrPermission
	case errors.Is(err, fs.ErrInvalid):
		return ErrInvalid
	}
	return ErrOther
}

var errnoKinds = map[syscall.Errno]Kind{
	syscall.ENOENT:       ErrNotExist,
	syscall.EEXIST:       ErrExist,
	syscall.ENOTEMPTY:    ErrNotEmpty,
	syscall.EACCES:       ErrPermission,
	syscall.EPERM:        ErrNotPermit,
	syscall.ENOTDIR:      ErrNotDir,
	syscall.EISDIR:       ErrIsDir,
	syscall.EROFS:        ErrReadOnly,
	syscall.ENOSPC:       ErrNoSpace,
	syscall.EDQUOT:       ErrNoSpace,
	syscall.EINVAL:       ErrInvalid,
	syscall.EIO:          ErrIO,
	syscall.ETIMEDOUT:    ErrTimeout,
	syscall.ENAMETOOLONG: ErrNameTooLong,
	syscall.EXDEV:        ErrCrossDev,
	syscall.ENOTSUP:      ErrNotSupp,
	syscall.ENOSYS:       ErrNotSupp,
	syscall.ELOOP:        ErrLoop,
	syscall.EFBIG:        ErrTooBig,
	syscall.EBUSY:        ErrBusy,
	syscall.ENODATA:      ErrNotExist,
	syscall.ECANCELED:    ErrCanceled,
	syscall.EMLINK:       ErrTooBig,
	syscall.ETXTBSY:      ErrBusy,
}

// Errno returns the errno that best describes err, for adaptors that speak
// POSIX (the FUSE mount). Errno(nil) is 0.
func Errno(err error) syscall.Errno {
	switch KindOf(err) {
	case 0:
		return 0
	case ErrNotExist:
		return syscall.ENOENT
	case ErrExist:
		return syscall.EEXIST
	case ErrNotEmpty:
		return syscall.ENOTEMPTY
	case ErrPermission, ErrAuth:
		return syscall.EACCES
	case ErrNotPermit:
		return syscall.EPERM
	case ErrNotDir:
		return syscall.ENOTDIR
	case ErrIsDir:
		return syscall.EISDIR
	case ErrReadOnly:
		return syscall.EROFS
	case ErrNoSpace:
		return syscall.ENOSPC
	case ErrInvalid:
		return syscall.EINVAL
	case ErrCanceled:
		return syscall.EINTR
	case ErrTimeout:
		return syscall.ETIMEDOUT
	case ErrNameTooLong:
		return syscall.ENAMETOOLONG
	case ErrCrossDev:
		return syscall.EXDEV
	case ErrNotSupp:
		return syscall.ENOTSUP
	case ErrLoop:
		return syscall.ELOOP
	case ErrTooBig:
		return syscall.EFBIG
	case ErrBusy, ErrLimit:
		return syscall.EBUSY
	}
	return syscall.EIO
}
