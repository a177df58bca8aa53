// Package proto is the zx wire format: frames, and the messages they carry.
// It does no I/O beyond reading and writing whole frames, and it is fuzzed.
// docs/protocol.md is the specification this package implements.
package proto

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/zxfs/zx"
)

// Frame types.
const (
	FHello  = 1  // first frame each way: version and features
	FReq    = 2  // opens a stream: payload is a request message
	FDir    = 3  // stream message: a directory entry
	FData   = 4  // stream message: raw bytes
	FErr    = 5  // stream message: an error
	FEvent  = 6  // stream message: a change notice (watch)
	FWindow = 7  // flow control credit: payload is a uint32 increment
	FCancel = 8  // abort a stream
	FPing   = 9  // keepalive and RTT probe; answered with FlagAck set
	FGoaway = 10 // the sender closes the connection: payload is an error
	FDirs   = 11 // stream message: several directory entries (feature "dirs")
)

// Frame flags.
const (
	FlagEnd  = 1 << 0 // last frame the sender sends on this stream
	FlagAck  = 1 << 1 // a ping's answer
	FlagZstd = 1 << 2 // a DATA or DIRS frame's payload is zstd-compressed (see Codec)
)

// Limits fixed by the protocol.
const (
	HeaderSize          = 12
	MaxPayload          = 64 << 10  // bytes in one frame's payload
	InitialStreamWindow = 256 << 10 // receive credit of each new stream, each way
	InitialConnWindow   = 1 << 20   // receive credit of a new connection, each way
	Version             = 1
)

// Header is a frame header. On the wire: type (1 byte), flags (1), two
// reserved zero bytes, stream (4, little-endian), payload length (4).
type Header struct {
	Type   uint8
	Flags  uint8
	Stream uint32
	Len    uint32
}

// IsMessage reports whether frames of type t are stream messages, the
// frames that flow control counts.
func IsMessage(t uint8) bool {
	return t == FDir || t == FData || t == FErr || t == FEvent || t == FDirs
}

// Compressible reports whether frames of type t may carry FlagZstd: DATA
// and DIRS, the messages that carry bulk (file data, entry batches).
func Compressible(t uint8) bool { return t == FData || t == FDirs }

// PutHeader encodes h into b, which has room for HeaderSize bytes.
func PutHeader(b []byte, h Header) {
	b[0] = h.Type
	b[1] = h.Flags
	b[2], b[3] = 0, 0
	binary.LittleEndian.PutUint32(b[4:], h.Stream)
	binary.LittleEndian.PutUint32(b[8:], h.Len)
}

// ParseHeader decodes and checks a frame header.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, zx.E(zx.ErrProtocol, "frame", "", "short frame header")
	}
	h := Header{
		Type:   b[0],
		Flags:  b[1],
		Stream: binary.LittleEndian.Uint32(b[4:]),
		Len:    binary.LittleEndian.Uint32(b[8:]),
	}
	if h.Type < FHello || h.Type > FDirs {
		return h, zx.E(zx.ErrProtocol, "frame", "", fmt.Sprintf("unknown frame type %d", h.Type))
	}
	if b[2] != 0 || b[3] != 0 || h.Flags&^(FlagEnd|FlagAck|FlagZstd) != 0 {
		return h, zx.E(zx.ErrProtocol, "frame", "", "reserved header bits set")
	}
	if h.Flags&FlagZstd != 0 && !Compressible(h.Type) {
		return h, zx.E(zx.ErrProtocol, "frame", "", "compression flag on a frame other than DATA or DIRS")
	}
	if h.Len > MaxPayload {
		return h, zx.E(zx.ErrTooBig, "frame", "", fmt.Sprintf("frame payload of %d bytes exceeds the limit of %d", h.Len, MaxPayload))
	}
	return h, nil
}

// ReadFrame reads one frame. The payload is freshly allocated and owned by
// the caller. A truncated frame is io.ErrUnexpectedEOF; a clean end of input
// before a frame is io.EOF.
func ReadFrame(r io.Reader, hdr []byte) (Header, []byte, error) {
	hdr = hdr[:HeaderSize]
	if _, err := io.ReadFull(r, hdr); err != nil {
		return Header{}, nil, err
	}
	h, err := ParseHeader(hdr)
	if err != nil {
		return h, nil, err
	}
	var p []byte
	if h.Len > 0 {
		p = make([]byte, h.Len)
		if _, err := io.ReadFull(r, p); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return h, nil, err
		}
	}
	return h, p, nil
}

// AppendFrame appends a whole frame to b.
func AppendFrame(b []byte, h Header, payload []byte) []byte {
	h.Len = uint32(len(payload))
	var hb [HeaderSize]byte
	PutHeader(hb[:], h)
	b = append(b, hb[:]...)
	return append(b, payload...)
}
