package mux

import (
	"slices"
	"sync"
	"time"

	"github.com/zxfs/zx/proto"
)

// Compression says whether a connection compresses DATA frames with zstd.
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

// Compression policy. A frame is compressed only when all of these hold:
//
//   - the peer offered zstd in its hello;
//   - it carries at least minCompress bytes: small frames gain little;
//   - the stream is not backing off (below);
//   - the link is the bottleneck: the connection's recent send rate (the
//     rate at which Send takes DATA, which blocks on flow control and so
//     follows the link) is below a quarter of the measured compression
//     speed. On loopback or a fast LAN, data moves faster than zstd could
//     compress it, so it goes raw and compression never slows a transfer
//     there. Before a rate is known, the round-trip time decides: a
//     connection whose RTT is under fastRTT is taken to be local.
//
// A compressed frame is kept only if it saves at least an eighth of the
// bytes; otherwise the raw frame is sent, and the stream backs off: after
// its k-th failure in a row it sends the next 2^k frames (at most
// maxSkip) raw without trying, then probes again. Random or already
// compressed data thus costs one failed attempt in maxSkip frames.
const (
	minCompress  = 1 << 10
	maxSkip      = 32
	rateWindow   = 100 * time.Millisecond
	rateIdle     = time.Second
	fastRTT      = 2 * time.Millisecond
	defaultSpeed = 200e6 // bytes/s, until one compression is timed
)

// compressor is a connection's compression state.
type compressor struct {
	mode  Compression
	codec proto.Codec

	mu       sync.Mutex
	peerOK   bool    // the peer offered zstd
	speed    float64 // raw bytes/s that Compress achieves, averaged
	rate     float64 // raw DATA bytes/s taken by Send, last window; 0: unknown
	winStart time.Time
	winBytes int64
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

// account records n raw bytes of DATA taken by Send, for the rate.
func (z *compressor) account(n int, now time.Time) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if now.Sub(z.lastSend) > rateIdle {
		// After a pause, the old rate says nothing about the link.
		z.rate, z.winStart, z.winBytes = 0, now, 0
	}
	z.lastSend = now
	z.winBytes += int64(n)
	if el := now.Sub(z.winStart); el >= rateWindow {
		z.rate = float64(z.winBytes) / el.Seconds()
		z.winStart, z.winBytes = now, 0
	}
}

// worth reports whether a frame of n bytes should be tried, given the
// connection's round-trip time.
func (z *compressor) worth(n int, rtt time.Duration) bool {
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
	speed := z.speed
	if speed == 0 {
		speed = defaultSpeed
	}
	if z.rate > 0 {
		return z.rate < speed/4
	}
	return rtt == 0 || rtt >= fastRTT
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

// compress returns the payload to send for the raw frame p and whether
// it is compressed.
func (s *Stream) compress(p []byte) ([]byte, bool) {
	z := &s.c.z
	if !z.worth(len(p), s.c.RTT()) || !s.zb.try() {
		return p, false
	}
	t0 := time.Now()
	out, err := z.codec.Compress(make([]byte, 0, len(p)), p)
	z.timed(len(p), time.Since(t0))
	s.c.ztries.Add(1)
	ok := err == nil && len(out) <= len(p)-len(p)/8
	s.zb.result(ok)
	if !ok {
		return p, false
	}
	return out, true
}
