package main

import (
	"flag"
	"fmt"

	"github.com/zxfs/zx/mux"
)

// compressFlag is --compress: whether a connection compresses its data.
type compressFlag struct{ mode mux.Compression }

func (f *compressFlag) register(fs *flag.FlagSet) {
	fs.Var(f, "compress", "`MODE` of zstd on file data and directory entries: auto (file data when the link is slow enough for it to pay, entries when it is not local), off or always")
}

func (f *compressFlag) String() string {
	switch f.mode {
	case mux.CompressOff:
		return "off"
	case mux.CompressAlways:
		return "always"
	}
	return "auto"
}

func (f *compressFlag) Set(s string) error {
	switch s {
	case "auto":
		f.mode = mux.CompressAuto
	case "off":
		f.mode = mux.CompressOff
	case "always":
		f.mode = mux.CompressAlways
	default:
		return fmt.Errorf("want auto, off or always")
	}
	return nil
}
