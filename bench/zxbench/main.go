// Command zxbench runs zx's benchmarks (package bench): zx against sshfs
// and the local disk, through the WAN emulator, at several round-trip
// times. They are not part of the zx command, which users install; run
// them from zx's source tree:
//
//	go run ./bench/zxbench [--fuse] [flags]
//
// "go run ./bench/zxbench --help" lists every flag; docs/bench/README.md
// says how to read the results.
package main

import (
	"os"

	"github.com/zxfs/zx/bench"
)

func main() {
	os.Exit(bench.Main(os.Args[1:]))
}
