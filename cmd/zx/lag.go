package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/zxfs/zx/wan"
)

func lagCommand() command {
	return command{
		name:    "lag",
		args:    "--listen ADDR --to ADDR --rtt DURATION [--rate RATE] [--cut-after BYTES] [--cut-random BYTES] [--cut-within DURATION] [--seed N] [--stall-after DURATION] [--stall-for DURATION]",
		summary: "emulate a slow link in front of a server",
		help: "Lag is a proxy that forwards connections from --listen to --to through an emulated " +
			"wide-area link: it adds --rtt of round-trip time (half in each direction) and paces each " +
			"direction of each connection to --rate, so you can see how zx (or anything else over TCP) " +
			"behaves far from its server. It listens on loopback addresses only. " +
			"For fault tests it can also break each connection: --cut-after cuts it (an RST to both ends) " +
			"once BYTES have gone through in one direction, --cut-random after a random count up to BYTES, " +
			"--cut-within at a random time up to DURATION after it opened (draws are repeatable with --seed), " +
			"and --stall-after stops forwarding on it after DURATION, for --stall-for (default: for ever, a half-open link). " +
			"It prints \"zx lag: ADDR -> ADDR rtt=.. rate=..\" to stderr when ready and runs until SIGINT or SIGTERM.",
		exit:    "0 stopped by SIGINT or SIGTERM; 1 it could not listen (or --listen is not a loopback address); 2 bad usage.",
		example: "zx serve --listen 127.0.0.1:5640 . &\nzx lag --listen 127.0.0.1:5641 --to 127.0.0.1:5640 --rtt 50ms --rate 100mbit &\nzx find zx://127.0.0.1:5641/ '~*.go' --stats",
		run:     runLag,
	}
}

func runLag(args []string) int {
	c := lagCommand()
	fs := newFlagSet(c)
	listen := fs.String("listen", "", "`ADDR` to listen on (loopback only), e.g. 127.0.0.1:5641")
	to := fs.String("to", "", "`ADDR` to forward to, e.g. 127.0.0.1:5640")
	rtt := fs.Duration("rtt", 0, "round-trip time to add, e.g. 50ms")
	rate := fs.String("rate", "", "bandwidth `RATE` per direction, e.g. 100mbit, 10MB (default: unlimited)")
	var cutAfter, cutRandom int64
	fs.Func("cut-after", "cut each connection once `BYTES` went through one way (e.g. 100000, 64KiB)", func(v string) error {
		n, err := parseSize(v)
		cutAfter = n
		return err
	})
	fs.Func("cut-random", "cut each connection after a random count of bytes up to `BYTES`", func(v string) error {
		n, err := parseSize(v)
		cutRandom = n
		return err
	})
	cutWithin := fs.Duration("cut-within", 0, "cut each connection at a random time up to this long after it opened")
	seed := fs.Uint64("seed", 1, "seed of the random cut points")
	stallAfter := fs.Duration("stall-after", 0, "stop forwarding on each connection this long after it opened")
	stallFor := fs.Duration("stall-for", 0, "how long a stall lasts (default: for ever)")
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	switch {
	case *cutWithin < 0 || *stallAfter < 0 || *stallFor < 0:
		return usageError(c, "durations must not be negative")
	case *stallFor > 0 && *stallAfter == 0:
		return usageError(c, "--stall-for needs --stall-after")
	case len(rest) > 0:
		return usageError(c, "unexpected arguments: "+rest[0])
	case *listen == "" || *to == "":
		return usageError(c, "--listen and --to are required")
	case *rtt < 0:
		return usageError(c, "--rtt must not be negative")
	}
	bps, err := wan.ParseRate(*rate)
	if err != nil {
		return usageError(c, fmt.Sprintf("bad --rate %q: want e.g. 100mbit, 10MB, 1.5GiB", *rate))
	}
	if lb, err := isLoopback(*listen); err != nil || !lb {
		if err == nil {
			err = fmt.Errorf("refusing to listen on %s: lag is a tool for experiments and listens on loopback only (e.g. 127.0.0.1:5641)", *listen)
		}
		fmt.Fprintf(os.Stderr, "zx lag: %v\n", err)
		return exitFail
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p, err := wan.ListenContext(ctx, *listen, *to, wan.Config{
		RTT: *rtt, Rate: bps,
		CutAfter: cutAfter, CutRandom: cutRandom, CutWithin: *cutWithin, Seed: *seed,
		StallAfter: *stallAfter, StallFor: *stallFor,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "zx lag: cannot listen on %s: %v\n", *listen, err)
		return exitFail
	}
	defer p.Close()
	rateStr := "unlimited"
	if bps > 0 {
		rateStr = *rate
	}
	fmt.Fprintf(os.Stderr, "zx lag: %s -> %s rtt=%v rate=%s\n", p.Addr(), *to, *rtt, rateStr)
	<-ctx.Done()
	return exitOK
}

// parseSize parses a byte count: a plain number, or one with a unit as
// wan.ParseRate takes them (64KiB, 1MB).
func parseSize(v string) (int64, error) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("negative size %q", v)
		}
		return n, nil
	}
	n, err := wan.ParseRate(v)
	if err != nil {
		return 0, fmt.Errorf("bad size %q: want e.g. 100000, 64KiB, 1MB", v)
	}
	return n, nil
}
