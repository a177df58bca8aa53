package zx

import (
	"path"
	"strings"
)

// Limits on names and paths, as on Linux.
const (
	MaxName = 255  // bytes in one path element
	MaxPath = 4096 // bytes in a path
)

// CleanPath checks that p is a valid zx path and returns it in canonical
// form: absolute, no empty, "." or ".." elements, no trailing slash. A
// relative path is taken as relative to "/". It fails with ErrInvalid for
// ".." elements and NUL bytes, and with ErrNameTooLong for overlong names
// or paths: a path never escapes the root of its tree.
func CleanPath(p string) (string, error) {
	if isClean(p) {
		// Every layer a request passes checks its path where it enters:
		// most are clean already, and this costs no allocation.
		return p, nil
	}
	return cleanPath(p)
}

// cleanPath is CleanPath for a path that is not in canonical form.
func cleanPath(p string) (string, error) {
	if strings.IndexByte(p, 0) >= 0 {
		return "", E(ErrInvalid, "", p, "path contains a NUL byte")
	}
	if len(p) > MaxPath {
		return "", E(ErrNameTooLong, "", p[:64]+"...", "path too long")
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return "", E(ErrInvalid, "", p, `path contains ".."`)
		}
		if len(el) > MaxName {
			return "", E(ErrNameTooLong, "", p, "name too long")
		}
	}
	return path.Clean("/" + p), nil
}

// isClean reports whether p is a valid path in canonical form.
func isClean(p string) bool {
	if p == "/" {
		return true
	}
	if len(p) < 2 || len(p) > MaxPath || p[0] != '/' || p[len(p)-1] == '/' {
		return false
	}
	start := 1 // of the current element
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			if p[i] == 0 {
				return false
			}
			continue
		}
		el := p[start:i]
		if el == "" || el == "." || el == ".." || len(el) > MaxName {
			return false
		}
		start = i + 1
	}
	return true
}

// Elems returns the elements of a clean path; none for "/".
func Elems(p string) []string {
	if p == "/" || p == "" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(p, "/"), "/")
}

// Depth returns the number of elements in a clean path: 0 for "/".
func Depth(p string) int { return len(Elems(p)) }

// HasPrefix reports whether clean path p is prefix or below it.
func HasPrefix(p, prefix string) bool {
	if prefix == "/" || p == prefix {
		return true
	}
	return strings.HasPrefix(p, prefix) && len(p) > len(prefix) && p[len(prefix)] == '/'
}

// Overlaps reports whether one of two clean paths is the other or below it.
func Overlaps(a, b string) bool { return HasPrefix(a, b) || HasPrefix(b, a) }

// Reprefix replaces the prefix spref of clean path p with dpref. Paths
// not under spref are returned unchanged.
func Reprefix(p, spref, dpref string) string {
	if spref == "" || dpref == "" || spref == dpref || !HasPrefix(p, spref) {
		return p
	}
	rest := strings.TrimPrefix(p, spref)
	if spref == "/" {
		rest = p
	}
	if rest == "/" {
		rest = ""
	}
	if dpref == "/" {
		if rest == "" {
			return "/"
		}
		return rest
	}
	return dpref + rest
}

// Join returns the path of name in the directory at clean path dir.
func Join(dir, name string) string {
	if dir == "/" {
		return "/" + name
	}
	return dir + "/" + name
}

// Split returns the parent directory and the last element of clean path
// p: Split("/a/b") is "/a", "b"; Split("/a") is "/", "a"; Split("/") is
// "/", "". Both share p's memory.
func Split(p string) (dir, name string) {
	i := strings.LastIndexByte(p, '/')
	switch {
	case i < 0:
		return "/", p
	case i == 0:
		return "/", p[1:]
	}
	return p[:i], p[i+1:]
}

// Parent returns the directory holding clean path p; "/" for "/".
func Parent(p string) string {
	dir, _ := Split(p)
	return dir
}

// Base returns the last element of clean path p: the name of its entry,
// "/" for "/".
func Base(p string) string {
	if p == "/" {
		return "/"
	}
	_, name := Split(p)
	return name
}
