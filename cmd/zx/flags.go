package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"
)

// commonFlags are the flags every client command shares, declared once.
type commonFlags struct {
	json     bool
	stats    bool
	timeout  time.Duration
	ssh      sshFlags
	sec      secFlags
	compress compressFlag
}

// register adds the common flags to fs.
func (o *commonFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, "print machine-readable output: one JSON object per line (NDJSON)")
	fs.BoolVar(&o.stats, "stats", false, "print round trips waited for, bytes in and out, and elapsed time to stderr")
	fs.DurationVar(&o.timeout, "timeout", 0, "give up after this long, e.g. 30s (default: no limit)")
	o.ssh.register(fs)
	o.sec.register(fs)
	o.compress.register(fs)
}

// newFlagSet returns an empty flag set for c whose errors are reported by
// parseFlags, not by the flag package.
func newFlagSet(c command) *flag.FlagSet {
	fs := flag.NewFlagSet("zx "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseFlags parses args, allowing flags after operands ("zx find
// zx://h/ '~*.go' --stats"); "--" ends the flags. Only arguments shaped like
// flags (-name, --name, --name=value) are taken as flags, so that operands
// such as the predicate "- & ~*.o" need no "--". It returns the operands and
// -1, or, when the command must stop (help asked for, bad flag), the exit
// code.
func parseFlags(fs *flag.FlagSet, c command, args []string) ([]string, int) {
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(rest, args[i+1:]...), -1
		}
		m := flagShape.FindStringSubmatch(a)
		if m == nil {
			rest = append(rest, a)
			continue
		}
		// One flag at a time, with its value if it takes one.
		n := 1
		if f := fs.Lookup(m[1]); f != nil && !isBool(f) && !strings.Contains(a, "=") && i+1 < len(args) {
			n = 2
		}
		err := fs.Parse(args[i : i+n])
		if errors.Is(err, flag.ErrHelp) {
			printHelp(os.Stdout, c, fs)
			return nil, exitOK
		}
		if err != nil {
			return nil, usageError(c, flagError(err, fs.Lookup(m[1]), m[1]))
		}
		i += n - 1
	}
	return rest, -1
}

// flagShape matches the arguments taken as flags, capturing the name.
var flagShape = regexp.MustCompile(`^--?([A-Za-z][A-Za-z0-9-]*)(=.*)?$`)

// flagError is the flag package's message about the flag name (f, if
// defined), with the name written as the help writes it (--name, not
// -name, for a long one: "flag provided but not defined: --bogus"), and
// for a value that does not parse, the form wanted.
func flagError(err error, f *flag.Flag, name string) string {
	msg := err.Error()
	if len(name) > 1 {
		msg = strings.Replace(msg, "-"+name, "--"+name, 1)
	}
	if f == nil || !strings.HasPrefix(msg, "invalid value") {
		return msg
	}
	if g, ok := f.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case time.Duration:
			msg += " (want a duration such as 500ms, 30s or 2m)"
		case int, int64, uint, uint64:
			msg += " (want a whole number)"
		case float64:
			msg += " (want a number)"
		}
	}
	return msg
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// usageError reports a usage error and returns exitUsage.
func usageError(c command, msg string) int {
	fmt.Fprintf(os.Stderr, "zx %s: %s\nusage: %s\nRun 'zx %s -h' for help.\n", c.name, msg, c.usage(), c.name)
	return exitUsage
}

// usage returns c's usage line: "zx NAME ARGS".
func (c command) usage() string {
	return strings.TrimSpace("zx " + c.name + " " + c.args)
}

// printHelp prints c's usage line, description, flags and example.
func printHelp(w io.Writer, c command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usage(), wrap(c.help, 76))
	var flags strings.Builder
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		dash := "--"
		if len(f.Name) == 1 {
			dash = "-"
		}
		fmt.Fprintf(&flags, "  %s%s", dash, f.Name)
		if name != "" {
			fmt.Fprintf(&flags, " %s", name)
		}
		fmt.Fprintf(&flags, "\n    \t%s", usage)
		if def := f.DefValue; def != "" && def != "false" && def != "0" && def != "0s" {
			fmt.Fprintf(&flags, " (default %s)", def)
		}
		flags.WriteByte('\n')
	})
	if flags.Len() > 0 {
		fmt.Fprintf(w, "\nFlags:\n%s", flags.String())
	}
	exit := c.exit
	if exit == "" {
		exit = defaultExit
	}
	fmt.Fprintf(w, "\n%s\n", wrap("Exit status: "+exit, 76))
	if c.example != "" {
		fmt.Fprintf(w, "\nExample:\n\n\t%s\n", strings.ReplaceAll(c.example, "\n", "\n\t"))
	}
}

// wrap breaks s into lines of at most width bytes, at spaces.
func wrap(s string, width int) string {
	var b strings.Builder
	n := 0
	for i, w := range strings.Fields(s) {
		if i > 0 {
			if n+1+len(w) > width {
				b.WriteByte('\n')
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}
