package proto

import (
	"testing"

	"github.com/zxfs/zx"
)

// benchDir is a typical entry of a find over a source tree: every system
// attribute of a regular file and no user attribute.
var benchDir = zx.Dir{
	"name": "bench_test.go", "path": "/src/github.com/zxfs/zx/proto/bench_test.go",
	"type": "-", "size": "1234", "mode": "0644",
	"mtime": "1763986321123456789", "atime": "1763986321123456789", "ctime": "1763986321123456789",
	"uid": "0", "gid": "0", "ino": "1234567", "nlink": "1",
}

func BenchmarkAppendDir(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		AppendDir(nil, benchDir)
	}
}

func BenchmarkParseDir(b *testing.B) {
	enc := AppendDir(nil, benchDir)
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		if _, err := ParseDir(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseDirOwned(b *testing.B) {
	enc := AppendDir(nil, benchDir)
	b.ReportAllocs()
	b.SetBytes(int64(len(enc)))
	for b.Loop() {
		// enc is never modified: it may be handed over again.
		if _, err := ParseDirOwned(enc); err != nil {
			b.Fatal(err)
		}
	}
}
