package lfs

import (
	"context"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
)

// chunk is the largest Data in one Item.
const chunk = 128 << 10

// Get streams the contents of path: data for a file, entries for a
// directory. The Data slices sent belong to the receiver. Get of a symbolic
// link, or of a fifo, socket or device, fails with zx.ErrInvalid.
func (f *FS) Get(ctx context.Context, path string, off, count int64) <-chan zx.Item {
	if ctl.Is(path) {
		return f.ctl.Get(ctx, off, count)
	}
	p, err := f.check("get", path, false)
	if err != nil {
		return items(err)
	}
	if off < 0 {
		return items(e(zx.ErrInvalid, "get", p, "negative offset"))
	}
	op := f.q.Enter(false, p)
	c := make(chan zx.Item)
	go func() {
		defer close(c)
		defer op.Done()
		if err := op.Wait(ctx); err != nil {
			send(ctx, c, zx.Item{Err: errf("get", p, err)})
			return
		}
		if err := f.get(ctx, c, p, off, count); err != nil {
			if ctx.Err() != nil {
				return
			}
			send(ctx, c, zx.Item{Err: errf("get", p, err)})
		}
	}()
	return c
}

func (f *FS) get(ctx context.Context, c chan<- zx.Item, p string, off, count int64) error {
	pd, name, err := f.openParent(p)
	if err != nil {
		return err
	}
	defer pd.close()
	var st unix.Stat_t
	if err := lstat(pd.fd, name, &st); err != nil {
		return err
	}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		fd, err := openat(pd.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		var held int
		defer func() { zx.GiveMemory(ctx, held) }()
		ds, err := f.readDir(fd, p, func(n int) error {
			err := zx.TakeMemory(ctx, n*entryMem)
			if err == nil {
				held = n * entryMem
			}
			return err
		})
		if err != nil {
			return err
		}
		for i, d := range ds {
			if int64(i) < off {
				continue
			}
			if count >= 0 && int64(i)-off >= count {
				break
			}
			if !send(ctx, c, zx.Item{Dir: d}) {
				return ctx.Err()
			}
		}
		return nil
	case unix.S_IFREG:
		return f.sendFile(ctx, c, pd.fd, name, off, count)
	case unix.S_IFLNK:
		return e(zx.ErrInvalid, "", "", "is a symbolic link")
	}
	return e(zx.ErrInvalid, "", "", "not a regular file")
}

// sendFile streams count bytes (all if count < 0) of the regular file name
// in directory dfd from offset off.
func (f *FS) sendFile(ctx context.Context, c chan<- zx.Item, dfd int, name string, off, count int64) error {
	fd, err := openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if err == unix.ELOOP {
			return e(zx.ErrInvalid, "", "", "is a symbolic link")
		}
		return err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return e(zx.ErrInvalid, "", "", "not a regular file")
	}
	var tail [512]byte
	for count != 0 {
		// Size buffers by what the file holds, so small files cost one
		// small allocation; past the known size, probe for growth with a
		// scratch buffer.
		want := int64(chunk)
		if left := st.Size - off; left > 0 && left < want {
			want = left
		} else if left <= 0 {
			want = 0
		}
		if count > 0 && count < want {
			want = count
		}
		var buf []byte
		if want > 0 {
			// Counted before it is read, and read only when the
			// reader has room for more: a reader who stops reading
			// stops the reading (zx.Memory).
			if err := zx.TakeMemory(ctx, int(want)); err != nil {
				return err
			}
			buf = make([]byte, want)
		} else {
			buf = tail[:]
			if count > 0 && count < int64(len(buf)) {
				buf = buf[:count]
			}
		}
		n, err := unix.Pread(fd, buf, off)
		if err == unix.EINTR || err == unix.EAGAIN {
			zx.GiveMemory(ctx, int(want))
			continue
		}
		if err != nil || n == 0 {
			zx.GiveMemory(ctx, int(want))
			return err
		}
		data := buf[:n]
		if want == 0 {
			data = append([]byte(nil), data...)
			st.Size = off + int64(n) + chunk // the file grew: read on in chunks
		}
		sent := send(ctx, c, zx.Item{Data: data})
		zx.GiveMemory(ctx, int(want)) // the reader counts what it holds
		if !sent {
			return ctx.Err()
		}
		off += int64(n)
		if count > 0 {
			count -= int64(n)
		}
	}
	return nil
}
