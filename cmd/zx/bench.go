package main

import "github.com/zxfs/zx/bench"

func benchCommand() command {
	return command{
		name:    "bench",
		args:    "[--tree DIR] [--rtts LIST] [--rate R] [--cap D] [--workloads LIST] [--no-sshfs]",
		summary: "benchmark zx against sshfs across round-trip times",
		help: "Bench serves a scratch copy of a source tree (Go's, by default) with zx and with a " +
			"private sshd, puts the WAN emulator in front of each, and times find, grep, rm and a " +
			"large file transfer through native zx and through sshfs at each RTT, reporting times, " +
			"ratios and zx's blocking round trips in docs/bench/. It needs root, FUSE, sshfs and " +
			"openssh-server. Run 'zx bench --help' for every flag.",
		example: "zx bench --rtts 0,50ms --workloads find,grep",
		run:     bench.Main,
	}
}
