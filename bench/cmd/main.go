// Command cmd runs the zx-vs-sshfs benchmark (package bench) until it is
// wired into the zx command as "zx bench":
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
