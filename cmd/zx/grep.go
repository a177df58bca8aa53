package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/pred"
)

func grepCommand() command {
	return command{
		name:    "grep",
		args:    "[-i] [-l] [-n] [-c] [--json] [--stats] [--timeout D] PATTERN zx://HOST/PATH [PREDICATE]",
		summary: "search files for a regular expression, in one request",
		help: "Grep prints the lines of the regular files below PATH (those matching PREDICATE, if given) that " +
			"match PATTERN, an RE2 regular expression, as PATH:LINE (with -n, PATH:N:LINE). One FindGet " +
			"request streams every file's contents, so a search of a whole tree costs one round trip. Files " +
			"with a NUL byte in their first 8 KiB are taken as binary and skipped. -i ignores case, -l prints " +
			"only the names of files with a match, -c prints each file's count of matching lines. With --json " +
			"it prints {\"path\":..,\"line\":N,\"text\":..} per match ({\"path\":..} with -l, " +
			"{\"path\":..,\"count\":N} with -c).",
		exit:    "as grep(1): 0 if a line matched, 1 if none did, 2 on an error (usage errors and bad regular expressions included).",
		example: "zx grep -n 'func main' zx://127.0.0.1/src '~*.go'",
		run:     runGrep,
	}
}

// Exit codes of grep, as grep(1).
const (
	grepMatch   = 0
	grepNoMatch = 1
	grepError   = 2
)

func runGrep(args []string) int {
	c := grepCommand()
	var opts commonFlags
	fs := newFlagSet(c)
	icase := fs.Bool("i", false, "ignore case")
	names := fs.Bool("l", false, "print only the paths of files that match")
	numbers := fs.Bool("n", false, "print line numbers")
	count := fs.Bool("c", false, "print the number of matching lines of each file")
	opts.register(fs)
	rest, code := parseFlags(fs, c, args)
	if code == exitOK {
		return exitOK // help
	}
	if code >= 0 {
		return grepError
	}
	if len(rest) < 2 || len(rest) > 3 {
		usageError(c, "want PATTERN, a zx:// location and at most one predicate")
		return grepError
	}
	pat := rest[0]
	if *icase {
		pat = "(?i)" + pat
	}
	re, err := regexp.Compile(pat)
	if err != nil {
		fmt.Fprintf(os.Stderr, "zx grep: bad regular expression: %v\n", err)
		return grepError
	}
	p := "type=-"
	if len(rest) == 3 {
		if _, err := pred.Parse(rest[2]); err != nil {
			usageError(c, fmt.Sprintf("bad predicate: %v", err))
			return grepError
		}
		p = "type=- & (" + rest[2] + ")"
	}
	s := newSession(c.name, opts)
	loc, err := s.parse(rest[1])
	if err != nil {
		s.errorf("%v", err)
		return s.close(grepError)
	}
	t, err := s.tree(loc)
	if err != nil {
		s.fail(err)
		return s.close(grepError)
	}
	g := &grepScan{re: re, firstOnly: *names}
	switch {
	case *count:
		g.fileDone = func(path string, n int) {
			if s.opts.json {
				s.emit(map[string]any{"path": path, "count": n})
			} else {
				s.printf("%s:%d\n", path, n)
			}
		}
	case *names:
		g.match = func(path string, _ int, _ []byte) {
			if s.opts.json {
				s.emit(map[string]any{"path": path})
			} else {
				s.println(path)
			}
		}
	default:
		g.match = func(path string, n int, line []byte) {
			switch {
			case s.opts.json:
				s.emit(map[string]any{"path": path, "line": n, "text": string(line)})
			case *numbers:
				s.printf("%s:%d:%s\n", path, n, line)
			default:
				s.printf("%s:%s\n", path, line)
			}
		}
	}
	g.fail = func(err error) { s.fail(err) }
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	matched, failed := g.run(findGet(ctx, t, loc.Path, p))
	if err := s.ctx.Err(); err != nil && !failed {
		s.fail(zx.Errorf("grep", loc.Path, err))
		failed = true
	}
	switch {
	case failed:
		return s.close(grepError)
	case matched:
		return s.close(grepMatch)
	}
	return s.close(grepNoMatch)
}

// grepScan searches the files of a FindGet stream line by line, without
// holding whole files in memory.
type grepScan struct {
	re        *regexp.Regexp
	firstOnly bool                                  // stop at a file's first match
	match     func(path string, n int, line []byte) // each matching line, if set
	fileDone  func(path string, count int)          // each text file's count, if set
	fail      func(error)                           // an error about one entry, if set

	path    string
	count   int
	lineNo  int
	head    []byte // data before the binary check
	checked bool   // the binary check is done
	skip    bool   // binary file, or done with it
	partial []byte // incomplete last line
	active  bool
}

// binaryCheck is how much of a file is looked at for a NUL byte.
const binaryCheck = 8 << 10

// run scans the stream and reports whether any line matched and whether
// any error was seen.
func (g *grepScan) run(items <-chan zx.Item) (matched, failed bool) {
	for it := range items {
		switch {
		case it.Err != nil:
			failed = true
			if g.fail != nil {
				g.fail(it.Err)
			}
			if it.Dir != nil && it.Dir.Path() == g.path {
				g.skip = true
			}
		case it.Dir != nil:
			matched = g.end() || matched
			if it.Dir.Type() == zx.TypeFile {
				g.start(it.Dir.Path())
			}
		case g.active:
			g.feed(it.Data)
		}
	}
	matched = g.end() || matched
	return matched, failed
}

func (g *grepScan) start(path string) {
	*g = grepScan{re: g.re, firstOnly: g.firstOnly, match: g.match, fileDone: g.fileDone, fail: g.fail,
		path: path, active: true, head: g.head[:0], partial: g.partial[:0]}
}

func (g *grepScan) feed(data []byte) {
	if g.skip {
		return
	}
	if !g.checked {
		g.head = append(g.head, data...)
		if len(g.head) < binaryCheck {
			return
		}
		g.check()
		data = g.head
	}
	if !g.skip {
		g.lines(data)
	}
}

// check decides whether the file is binary from its head.
func (g *grepScan) check() {
	g.checked = true
	g.skip = bytes.IndexByte(g.head[:min(len(g.head), binaryCheck)], 0) >= 0
}

// lines scans data for complete lines, keeping the last partial one.
func (g *grepScan) lines(data []byte) {
	for len(data) > 0 && !g.skip {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			g.partial = append(g.partial, data...)
			return
		}
		line := data[:i]
		if len(g.partial) > 0 {
			g.partial = append(g.partial, line...)
			line = g.partial
		}
		g.line(line)
		g.partial = g.partial[:0]
		data = data[i+1:]
	}
}

func (g *grepScan) line(line []byte) {
	g.lineNo++
	if !g.re.Match(line) {
		return
	}
	g.count++
	if g.match != nil {
		g.match(g.path, g.lineNo, line)
	}
	if g.firstOnly {
		g.skip = true
	}
}

// end finishes the current file and reports whether it matched.
func (g *grepScan) end() bool {
	if !g.active {
		return false
	}
	g.active = false
	if !g.checked {
		g.check()
		if !g.skip {
			g.lines(g.head)
		}
	}
	binary := g.checked && bytes.IndexByte(g.head[:min(len(g.head), binaryCheck)], 0) >= 0
	if !g.skip && len(g.partial) > 0 {
		g.line(g.partial)
	}
	if g.fileDone != nil && !binary {
		g.fileDone(g.path, g.count)
	}
	return g.count > 0
}

// regexpQuote returns a regular expression matching s literally.
func regexpQuote(s string) *regexp.Regexp { return regexp.MustCompile(regexp.QuoteMeta(s)) }
