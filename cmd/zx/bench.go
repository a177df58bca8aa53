package main

import "github.com/zxfs/zx/bench"

func benchCommand() command {
	return command{
		name:    "bench",
		args:    "[--fuse] [--tree DIR] [--rtts LIST] [--rate R] [--cap D] [--workloads LIST] [--no-sshfs]",
		summary: "benchmark zx against sshfs across round-trip times",
		help: "Bench serves a scratch copy of a source tree (Go's, by default) with zx and with a " +
			"private sshd, puts the WAN emulator in front of each, and times find, grep, rm and a " +
			"large file transfer through native zx and through sshfs at each RTT, reporting times, " +
			"ratios and zx's blocking round trips in docs/bench/native.*. With --fuse it runs " +
			"unmodified programs (find, grep -r cold and warm, ls -lR, diff -r, rm -rf, tar -x, " +
			"git status, make, dd) on a zx mount and on sshfs instead, and writes docs/bench/fuse.*. " +
			"It needs root, FUSE, sshfs and openssh-server. Run 'zx bench --help' for every flag.",
		example: "zx bench --fuse --rtts 0,50ms,100ms --cap 60s --workloads find,grep,git",
		run:     bench.Main,
	}
}
