package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

func versionCommand() command {
	return command{
		name:    "version",
		args:    "",
		summary: "print the version of zx",
		help:    "Version prints the version of this build of zx: its module version, source revision and Go version.",
		example: "zx version",
		run:     runVersion,
	}
}

func runVersion(args []string) int {
	c := versionCommand()
	fs := newFlagSet(c)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) > 0 {
		return usageError(c, "no arguments expected")
	}
	v, rev := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value[:min(12, len(s.Value))]
			case "vcs.modified":
				if s.Value == "true" && rev != "" {
					rev += "+dirty"
				}
			}
		}
	}
	if rev != "" {
		rev = " rev " + rev
	}
	fmt.Printf("zx %s%s %s %s/%s\n", v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return exitOK
}
