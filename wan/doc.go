// Package wan emulates a wide-area link between two TCP endpoints: a proxy
// that adds latency and paces traffic to a rate, for tests and benchmarks of
// zx (and of sshfs, for comparison) on machines whose kernel has no netem.
//
// A Proxy listens on one address and forwards each accepted connection to a
// target address. Each direction of each connection is an independent
// emulated link with three parts:
//
//   - a reader goroutine reads whatever the sender has written (up to 64 KiB
//     at a time, less when pacing so that one chunk is about a millisecond of
//     traffic) and stamps each chunk with its arrival time, as recorded by
//     the kernel (SO_TIMESTAMPNS on Linux), so that a late wake-up of the
//     reader on a loaded machine is not added to the latency;
//   - a bounded queue holds the chunks in flight;
//   - a writer goroutine writes each chunk to the receiver at its release time.
//
// # Schedule-based release
//
// The release time of a chunk is computed once, by the reader, from the
// schedule alone:
//
//	release = max(arrival + RTT/2, previous release + previous length/Rate)
//
// It never depends on when the writer actually woke up. A real link keeps
// sending while a packet is late, and so does the emulator: if the writer is
// late for one chunk, the following chunks keep their scheduled times and are
// written as soon as they are due, so the lateness of one wake-up does not
// add up over a transfer and the long-run rate is exactly Rate. Because many
// chunks are in flight at once, throughput is not limited to one chunk per
// RTT: like a real long fat pipe, a window of data is on the wire.
//
// # Waking on time without burning a core
//
// Timers on virtual machines overshoot, sometimes by tens of milliseconds,
// and the Go runtime rounds sub-millisecond sleeps up to a millisecond (its
// poller's epoll timeout). An emulator that simply slept until each release
// time would add that to the RTT it emulates; one that spins for the whole
// margin a timer might overshoot by burns a core, which on a small machine
// is taken from the very processes a benchmark measures. The writer
// therefore chooses how closely to keep each chunk's release time, set by
// the reader when it schedules the chunk:
//
//   - exact, for a chunk arriving on an idle link (the first of a burst: a
//     request, a reply, a ping), whose latency is what a round trip
//     measures. On Linux the writer sleeps on a timerfd read through the
//     runtime's poller: the kernel's high-resolution timers wake it within
//     tens of microseconds, with no thread held while it sleeps. It sleeps
//     until a small margin before the release time and spins (Gosched in a
//     loop) the rest. The margin is about the 75th percentile of recent
//     wake-up lateness, at most 500µs: a burst of load that makes a few
//     wake-ups late must not make every later release spin for milliseconds.
//   - prompt, for a chunk that follows the previous one within a
//     millisecond (a bulk transfer): the writer sleeps on the timerfd until
//     the release time and does not spin.
//   - paced, for a chunk whose release time was set by pacing behind the
//     previous one: the writer sleeps on an ordinary timer, since the
//     schedule already absorbs a late wake-up, and while more chunks are
//     queued behind it, it sleeps up to 4 ms longer (less when the queue
//     is small), so that each wake-up releases a batch instead of one
//     chunk a millisecond: pacing costs a third less CPU and the long-run
//     rate is the same.
//
// Whenever the writer wakes, it writes every chunk already due in one
// writev: after a late wake-up (an ordinary timer's millisecond, or load) a
// batch of rate × lateness bytes goes out at the cost of one chunk. With
// RTT 0 and no rate every chunk is due on arrival and no timer is used at
// all. Without a high-resolution timer (other systems) all three use the
// ordinary timer, and exact chunks spin from a millisecond before their
// release time.
//
// # The queue bound
//
// The queue between reader and writer is bounded by Config.Queue bytes per
// direction, counting data in flight and data due but not yet written, as a
// router's buffer bounds a bottleneck. When it is full the reader stops
// reading, the socket buffers fill and the sender sees TCP backpressure, as
// it would at a real bottleneck; without the bound a fast sender would see
// no congestion at all and the proxy would buffer without limit. The default
// holds one bandwidth-delay product plus some slack, so a single connection
// can use the whole rate.
//
// Measured over loopback on a 2-core VM, the added RTT is within a few
// hundred microseconds of the setting and the rate within 1%, at a few
// percent of a core for sparse request/replies or a rate-limited transfer
// (BenchmarkCPU; docs/design.md has the figures). The emulator
// needs some CPU to spare: when other processes saturate every core, OS
// wake-up latency (of the proxy and of its peers) adds milliseconds.
//
// # Connections
//
// When a side closes its write half (or closes), the end of stream travels
// like data: it is propagated with CloseWrite once everything queued before
// it has been delivered and its own release time has come. When either side
// fails, both sides of the connection are torn down abruptly (RST), so that
// neither mistakes the failure for a clean end of stream. Faults can be
// injected: Config.CutAfter cuts each connection after a number of bytes,
// Config.CutRandom after a random number of bytes and Config.CutWithin at a
// random time (both drawn from Config.Seed, so a failing run can be
// repeated); Proxy.Stall stops forwarding on every connection for a while
// (or until Resume) without losing data, and Config.StallAfter and StallFor
// stall each connection once it has been open for a while, for a while or
// for ever: a half-open link. Rate and Queue
// apply to each connection separately: connections do not share a link.
package wan
