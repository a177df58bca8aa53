package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/zxfs/zx/wan"
)

func lagCommand() command {
	return command{
		name:    "lag",
		args:    "--listen ADDR --to ADDR --rtt DURATION [--rate RATE]",
		summary: "emulate a slow link in front of a server",
		help: "Lag is a proxy that forwards connections from --listen to --to through an emulated " +
			"wide-area link: it adds --rtt of round-trip time (half in each direction) and paces each " +
			"direction of each connection to --rate, so you can see how zx (or anything else over TCP) " +
			"behaves far from its server. Like zx serve, it listens on loopback addresses only. " +
			"It prints \"zx lag: ADDR -> ADDR rtt=.. rate=..\" to stderr when ready and runs until SIGINT or SIGTERM.",
		example: "zx serve --listen 127.0.0.1:5640 . &\nzx lag --listen 127.0.0.1:5641 --to 127.0.0.1:5640 --rtt 50ms --rate 100mbit &\nzx find zx://127.0.0.1:5641/ '~*.go' --stats",
		run:     runLag,
	}
}

func runLag(args []string) int {
	c := lagCommand()
	fs := newFlagSet(c)
	listen := fs.String("listen", "", "address to listen on (loopback only), e.g. 127.0.0.1:5641")
	to := fs.String("to", "", "address to forward to, e.g. 127.0.0.1:5640")
	rtt := fs.Duration("rtt", 0, "round-trip time to add, e.g. 50ms")
	rate := fs.String("rate", "", "bandwidth per direction, e.g. 100mbit, 10MB (default: unlimited)")
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	switch {
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
	if err := checkLoopback(*listen); err != nil {
		fmt.Fprintf(os.Stderr, "zx lag: %v\n", err)
		return exitFail
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	p, err := wan.ListenContext(ctx, *listen, *to, wan.Config{RTT: *rtt, Rate: bps})
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
