package proto

import (
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/zxfs/zx"
)

// FeatureZstd is the hello feature that says the sender accepts DATA and
// DIRS frames compressed with zstd (FlagZstd).
const FeatureZstd = "zstd"

// Codec compresses and decompresses the payloads of frames marked
// FlagZstd (DATA and DIRS): each payload is one or more zstd frames that
// decompress to at most MaxPayload bytes. It is safe for concurrent use; the encoder and
// decoder are made on first use, so a connection that never compresses
// pays nothing for them.
type Codec struct {
	encOnce sync.Once
	enc     *zstd.Encoder
	encErr  error
	decOnce sync.Once
	dec     *zstd.Decoder
	decErr  error
}

// Compress appends to dst the compressed form of src, which holds at most
// MaxPayload bytes, at zstd's fastest level: on a link slow enough to
// gain from compression, the fastest level already takes most of the
// gain, and a slower one would make the CPU the bottleneck sooner.
func (c *Codec) Compress(dst, src []byte) ([]byte, error) {
	c.encOnce.Do(func() {
		c.enc, c.encErr = zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithWindowSize(MaxPayload),
			zstd.WithEncoderCRC(false), // the transport checks integrity
			zstd.WithEncoderConcurrency(2),
			zstd.WithLowerEncoderMem(true))
	})
	if c.encErr != nil {
		return dst, c.encErr
	}
	return c.enc.EncodeAll(src, dst), nil
}

// Decompress returns the contents of a FlagZstd payload. Anything that
// does not decompress, or would decompress to more than MaxPayload bytes
// (a decompression bomb), is a protocol error; the receiver never holds
// more than MaxPayload bytes for it.
func (c *Codec) Decompress(p []byte) ([]byte, error) {
	c.decOnce.Do(func() {
		c.dec, c.decErr = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(MaxPayload),
			zstd.WithDecoderMaxWindow(2*MaxPayload),
			zstd.WithDecodeAllCapLimit(true))
	})
	if c.decErr != nil {
		return nil, c.decErr
	}
	if len(p) == 0 {
		return nil, zx.E(zx.ErrProtocol, "frame", "", "empty compressed payload")
	}
	out, err := c.dec.DecodeAll(p, make([]byte, 0, MaxPayload))
	if err == nil && len(out) > MaxPayload {
		err = zstd.ErrDecoderSizeExceeded // not expected with the cap limit
	}
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, zx.E(zx.ErrProtocol, "frame", "", fmt.Sprintf("compressed payload exceeds the limit of %d bytes decompressed (%v)", MaxPayload, err))
		}
		return nil, zx.E(zx.ErrProtocol, "frame", "", "bad compressed payload: "+err.Error())
	}
	return out, nil
}

// Close releases the decoder. Compress needs no closing (whole-buffer
// encoding starts no goroutines). No Decompress may follow or run.
func (c *Codec) Close() {
	c.decOnce.Do(func() {})
	if c.dec != nil {
		c.dec.Close()
	}
}
