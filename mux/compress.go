package mux

import (
	"slices"
	"sync"
	"time"

	"github.com/zxfs/zx/proto"
)

// Compression says whether a connection compresses DATA and DIRS frames
// with zstd.
type Compression int

const (
	// CompressAuto offers zstd, and compresses a frame when the link is
	// slow enough for it to pay and the data has been compressing.
	CompressAuto Compression = iota
	// CompressOff neither offers zstd nor compresses.
	CompressOff
	// CompressAlways offers zstd and tries every frame whatever the
	// link's speed (tests and benchmarks); incompressible data is still
	// sent raw, with the same backing off.
	CompressAlways
)

// Compression policy. Compressing runs in the sending goroutine, so it
// costs no time only while that goroutine would otherwise wait for the
// link. A frame is compressed only when all of these hold:
//
//   - the peer offered zstd in its hello;
//   - it carries at least minCompress bytes: small frames gain little;
//   - the stream is not backing off (below);
//   - the link is not local: a round-trip time under localRTT is loopback
//     or a LAN, where data moves faster than zstd compresses it;
//   - the link is the bottleneck: data queues before it. While DATA flows
//     the sender pings once per rate window; a round trip longer than
//     3/2 of the least one measured, among the last few, means a queue at
//     a bottleneck (one sample could miss it: a queue drains between the
//     bursts that flow control lets through). A fast
//     link whose throughput the flow-control windows limit (a long fat
//     pipe) has no queue, and compressing there would gain nothing:
//     stream credit counts bytes before compression;
//   - the link is slow: over the last rate window, the rate at which Send
//     took DATA was under maxRate;
//   - the sender has time to spare: over that window Send spent a
//     fraction f of the time waiting for flow-control credit, and the
//     rate is below f·C/2, where C is the measured compression speed. On
//     a slow link Send waits most of the time, and compression fills that
//     time; where the sender itself is the bottleneck, it does not wait,
//     and compression would slow it down. Until a window has ended and a
//     round trip been measured, frames go raw: a short transfer does not
//     pay for setting up the encoder and decoder (some 10 ms of CPU).
//
// DIRS frames (entry batches) follow a simpler rule: a batch of at least
// minCompress bytes is compressed whenever the peer offered zstd and the
// link is not local. Entries compress far better than most file data and
// cost little to compress: on Go's source tree, 16 KiB batches shrink to
// 14% at about 330 MB/s, some 9% of what the server's walk costs per
// entry, so compressing pays on any link slower than about 2 Gbit/s, and
// costs a find at most that 9% where the link is faster; the rule for
// DATA needs 50 ms of flow to measure the link, and most finds are over
// by then. "Not local" needs more care than for DATA, which has the
// other conditions behind it: the first ping of a connection, taken
// while both ends start up, can take a few milliseconds on a loaded
// loopback, and a ping sent while entries stream measures the
// receiver's queue (on loopback the receiver is the bottleneck), not the
// link: probing then, as the DATA rule does, made a loaded loopback look
// far. So the least round trip must be at least farRTT, or at least
// localRTT over dirSamples measurements (the connection's first ping,
// the keepalive's, DATA's probes, Conn.Ping); no ping is sent for
// batches. A link of 1 to 10 ms thus compresses entries only once it has
// been measured a few times, and one of 10 ms or more (the links zx is
// for) from its first batch after the first round trip; a loopback is
// taken for far only if its first ping takes 10 ms.
//
// A compressed frame is kept only if it saves at least an eighth of the
// bytes; otherwise the raw frame is sent, and the stream backs off: after
// its k-th failure in a row it sends the next 2^k frames (at most
// maxSkip) raw without trying, then probes again. Random or already
// compressed data thus costs one failed attempt in maxSkip frames.
const (
	minCompress  = 1 << 10
	maxSkip      = 32
	rateWindow   = 50 * time.Millisecond
	rateIdle     = time.Second
	localRTT     = time.Millisecond
	maxRate      = 48e6  // bytes/s, about 400 Mbit/s
	defaultSpeed = 200e6 // bytes/s, until one compression is timed
	recentRTTs   = 4     // round trips that say whether there is a queue
)

// The rule for entry batches (above).
const (
	farRTT     = 10 * time.Millisecond // not local, even from one sample
	dirSamples = 3                     // round trips that say a link is local
)

// compressor is a connection's compression state.
type compressor struct {
	mode  Compression
	codec proto.Codec

	mu       sync.Mutex
	peerOK   bool    // the peer offered zstd
	speed    float64 // raw bytes/s that Compress achieves, averaged
	measured bool    // rate and spare are known
	rate     float64 // raw DATA bytes/s taken by Send, last window
	spare    float64 // fraction of the last window Send waited for credit
	winStart time.Time
	winBytes int64
	winWait  time.Duration // time Send waited for credit in this window
	lastSend time.Time
}

// features returns the hello features for mode.
func (m Compression) features(base []string) []string {
	if m == CompressOff || slices.Contains(base, proto.FeatureZstd) {
		return base
	}
	return append(slices.Clip(base), proto.FeatureZstd)
}

// peerHello records whether the peer accepts compressed frames.
func (z *compressor) peerHello(h *proto.Hello) {
	z.mu.Lock()
	z.peerOK = z.mode != CompressOff && slices.Contains(h.Features, proto.FeatureZstd)
	z.mu.Unlock()
}

// account records n raw bytes of DATA taken by Send, for the rate. It
// reports whether a rate window ended: time to measure the queues again.
func (z *compressor) account(n int, now time.Time) bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	if now.Sub(z.lastSend) > rateIdle {
		// After a pause, the old figures say nothing about the link.
		z.measured, z.winStart, z.winBytes, z.winWait = false, now, 0, 0
	}
	z.lastSend = now
	z.winBytes += int64(n)
	if el := now.Sub(z.winStart); el >= rateWindow {
		z.measured = true
		z.rate = float64(z.winBytes) / el.Seconds()
		z.spare = min(1, z.winWait.Seconds()/el.Seconds())
		z.winStart, z.winBytes, z.winWait = now, 0, 0
		return true
	}
	return false
}

// waited records that Send waited d for credit.
func (z *compressor) waited(d time.Duration) {
	z.mu.Lock()
	z.winWait += d
	z.mu.Unlock()
}

// worth reports whether a frame of n bytes should be tried, on a
// connection whose least round-trip time, and the longest of the last
// few, are given (0: not measured yet), out of samples measurements;
// entries says the frame is an entry batch (DIRS), else it is DATA.
func (z *compressor) worth(n int, entries bool, minRTT, recentRTT time.Duration, samples int) bool {
	if n < minCompress || z.mode == CompressOff {
		return false
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if !z.peerOK {
		return false
	}
	if z.mode == CompressAlways {
		return true
	}
	if minRTT > 0 && minRTT < localRTT {
		return false
	}
	if entries {
		return minRTT >= farRTT || (minRTT > 0 && samples >= dirSamples)
	}
	if !z.measured {
		return false
	}
	speed := z.speed
	if speed == 0 {
		speed = defaultSpeed
	}
	queued := recentRTT > minRTT*3/2
	return queued && z.rate < maxRate && z.rate < z.spare*speed/2
}

// probe sends a ping to measure the round trip with the queues of now,
// unless one is on its way.
func (c *Conn) probe() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil || c.pings[c.probeSeq] != nil {
		return
	}
	c.pingSeq++
	c.probeSeq = c.pingSeq
	c.pings[c.pingSeq] = make(chan struct{})
	c.ctrl = append(c.ctrl, pingFrame(c.pingSeq, time.Now(), false))
	c.kick()
}

// timed records that compressing n bytes took d.
func (z *compressor) timed(n int, d time.Duration) {
	if d <= 0 {
		return
	}
	s := float64(n) / d.Seconds()
	z.mu.Lock()
	if z.speed == 0 {
		z.speed = s
	} else {
		z.speed += (s - z.speed) / 8
	}
	z.mu.Unlock()
}

// backoff is a stream's memory of failed attempts. Only the stream's
// sending goroutine touches it.
type backoff struct {
	fails int // failures in a row
	skip  int // frames still to send without trying
}

// try reports whether to try compressing the next frame.
func (b *backoff) try() bool {
	if b.skip > 0 {
		b.skip--
		return false
	}
	return true
}

// result records whether an attempt paid.
func (b *backoff) result(ok bool) {
	if ok {
		b.fails = 0
		return
	}
	b.fails++
	b.skip = min(1<<b.fails, maxSkip)
}

// compress returns the payload to send for the raw frame p of type typ
// (proto.FData or FDirs) and whether it is compressed.
func (s *Stream) compress(typ uint8, p []byte) ([]byte, bool) {
	z := &s.c.z
	c := s.c
	c.mu.Lock()
	minRTT, recent, samples := c.minRTT, time.Duration(0), c.nrtt
	for i := range min(c.nrtt, recentRTTs) {
		recent = max(recent, c.rtts[(c.nrtt-1-i)%len(c.rtts)])
	}
	c.mu.Unlock()
	entries := typ == proto.FDirs
	zb := &s.zb
	if entries {
		// File data that does not compress (findget) must not stop the
		// entries between it from compressing, nor the reverse.
		zb = &s.zbDirs
	}
	if !z.worth(len(p), entries, minRTT, recent, samples) || !zb.try() || !c.encoderOK() {
		return p, false
	}
	t0 := time.Now()
	out, err := z.codec.Compress(make([]byte, 0, len(p)), p)
	if !entries {
		// The speed is the DATA rule's: entries compress faster.
		z.timed(len(p), time.Since(t0))
	}
	s.c.ztries.Add(1)
	ok := err == nil && len(out) <= len(p)-len(p)/8
	zb.result(ok)
	if !ok {
		return p, false
	}
	return out, true
}

// encoderCost is what a connection's zstd encoder holds once made
// (measured: about 550 KiB).
const encoderCost = 576 << 10

// encoderOK reports whether the connection may compress. On a server, the
// encoder counts against the Budget from the first frame compressed to
// the end of the connection; while there is no room the connection sends
// its frames as they are.
func (c *Conn) encoderOK() bool {
	if !c.server || c.cfg.Budget == nil || c.encoderHeld.Load() {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.encoderHeld.Load():
		return true
	case c.err != nil || !c.cfg.Budget.TryTake(encoderCost):
		return false
	}
	c.encoderHeld.Store(true)
	return true
}
