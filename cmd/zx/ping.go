package main

import (
	"fmt"
	"time"
)

func pingCommand() command {
	return command{
		name:    "ping",
		args:    "[-c N] [--json] [--stats] [--timeout D] zx://HOST[:PORT]",
		summary: "measure the round-trip time to a server",
		help: "Ping connects to a server and measures N round trips (a protocol ping, answered " +
			"by the server's connection layer without touching any tree), printing each and then " +
			"the minimum, average and maximum. With --json it prints one object per ping " +
			"({\"seq\":1,\"rttMs\":50.2}) and one summary ({\"min\":..,\"avg\":..,\"max\":..}, in milliseconds).",
		example: "zx ping -c 5 zx://127.0.0.1:5641",
		run:     runPing,
	}
}

func runPing(args []string) int {
	c := pingCommand()
	var opts commonFlags
	fs := newFlagSet(c)
	count := fs.Int("c", 3, "number of pings")
	opts.register(fs)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 1 {
		return usageError(c, "want one zx:// location")
	}
	if *count < 1 {
		return usageError(c, "-c must be at least 1")
	}
	s := newSession(c.name, opts)
	loc, err := s.parse(rest[0])
	if err != nil {
		s.errorf("%v", err)
		return s.close(exitUsage)
	}
	if _, err := s.tree(loc); err != nil {
		return s.close(s.fail(err))
	}
	conn := s.conns[loc.Addr]
	var lo, hi, sum time.Duration
	for i := 1; i <= *count; i++ {
		rtt, err := conn.Ping(s.ctx)
		if err != nil {
			return s.close(s.fail(err))
		}
		if i == 1 || rtt < lo {
			lo = rtt
		}
		hi = max(hi, rtt)
		sum += rtt
		if s.opts.json {
			s.emit(map[string]any{"seq": i, "rttMs": ms(rtt)})
		} else {
			s.printf("%s: seq=%d time=%v\n", loc.Addr, i, rtt.Round(time.Microsecond))
		}
		s.out.Flush()
	}
	avg := sum / time.Duration(*count)
	if s.opts.json {
		s.emit(map[string]any{"min": ms(lo), "avg": ms(avg), "max": ms(hi)})
	} else {
		s.printf("rtt min/avg/max = %v/%v/%v\n", lo.Round(time.Microsecond), avg.Round(time.Microsecond), hi.Round(time.Microsecond))
	}
	return s.close(exitOK)
}

// ms returns d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// plural returns "1 thing" or "n things".
func plural(n int64, what string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", what)
	}
	return fmt.Sprintf("%d %ss", n, what)
}
