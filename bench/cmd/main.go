// Command cmd runs the zx-vs-sshfs benchmark (package bench), as "zx
// bench" does, with the same flags, without building the zx command:
//
//	go run ./bench/cmd [flags]
package main

import (
	"os"

	"github.com/zxfs/zx/bench"
)

func main() {
	bench.CommandName = "go run ./bench/cmd"
	os.Exit(bench.Main(os.Args[1:]))
}
