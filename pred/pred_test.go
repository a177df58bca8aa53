package pred

import (
	"errors"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/zxfs/zx"
)

// t0 is the time Parse takes as now in tests.
var t0 = time.Date(2024, 6, 1, 12, 0, 0, 0, time.UTC)

func fixNow(t *testing.T) {
	t.Helper()
	old := now
	now = func() time.Time { return t0 }
	t.Cleanup(func() { now = old })
}

func TestParseString(t *testing.T) {
	tests := []struct {
		in, out string
	}{
		{"", "true"},
		{"   ", "true"},
		{"true", "true"},
		{"false", "false"},
		{"prune", "prune"},
		{"name=a", "name=a"},
		{"name = a", "name=a"},
		{"name != a", "name!=a"},
		{"size<1", "size<1"},
		{"size<=1k", "size<=1k"},
		{"size>10M", "size>10M"},
		{"size>=2GB", "size>=2GB"},
		{"name~*.go", "name~*.go"},
		{"name ~~ '\\.go$'", `name~~\.go$`},
		{`name~~'(a|b)'`, `name~~"(a|b)"`},
		{"name!~*.o", "name!~*.o"},
		{"name!~~^x", "name!~~^x"},
		{`name="a b"`, `name="a b"`},
		{`name='a b'`, `name="a b"`},
		{`name="a\"b\\c\d"`, `name="a\"b\\c\\d"`},
		{`name='it"s'`, `name="it\"s"`},
		{`name=""`, `name=""`},
		{`name=`, `name=""`},
		{`x= & y=1`, `x="" & y=1`},
		{`x= and y=1`, `x="" & y=1`},
		{`x=and`, `x=and`},
		{`x=or | y=or`, `x=or | y=or`},
		{`"my attr"=1`, `"my attr"=1`},
		{`d`, `type=d`},
		{`-`, `type=-`},
		{`l | p | s | c | b`, `type=l | type=p | type=s | type=c | type=b`},
		{`d=1`, `d=1`},
		{`true=1`, `true=1`},
		{`~*.go`, `name~*.go`},
		{`~~\.go$`, `name~~\.go$`},
		{`!~*.o`, `name!~*.o`},
		{`!~~x`, `name!~~x`},
		{`! ~*.o`, `!name~*.o`},
		{`a=1 & b=2`, `a=1 & b=2`},
		{`a=1 && b=2`, `a=1 & b=2`},
		{`a=1 and b=2`, `a=1 & b=2`},
		{`a=1 | b=2`, `a=1 | b=2`},
		{`a=1 || b=2`, `a=1 | b=2`},
		{`a=1 or b=2`, `a=1 | b=2`},
		{`!a=1`, `!a=1`},
		{`not a=1`, `!a=1`},
		{`!!a=1`, `!!a=1`},
		{`not=1`, `not=1`},
		{`a=1 | b=2 & c=3`, `a=1 | b=2 & c=3`},
		{`(a=1 | b=2) & c=3`, `(a=1 | b=2) & c=3`},
		{`((a=1 & b=2) & (c=3))`, `a=1 & b=2 & c=3`},
		{`a=1 | (b=2 | c=3)`, `a=1 | b=2 | c=3`},
		{`!(a=1 & b=2)`, `!(a=1 & b=2)`},
		{`!a=1 & b=2`, `!a=1 & b=2`},
		{`name=.git & prune | type=-`, `name=.git & prune | type=-`},
		{`d & !~.*`, `type=d & name!~.*`},
		{`mtime>-1h`, `mtime>-1h`},
		{`mtime > 2024-01-02`, `mtime>2024-01-02`},
		{`mtime<2024-01-02T10:00:00Z`, `mtime<2024-01-02T10:00:00Z`},
		{`mode=0644`, `mode=0644`},
		{`path~/a/*/b`, `path~/a/*/b`},
		{`depth<=2`, `depth<=2`},
		{"a=1\t&\nb=2", `a=1 & b=2`},
		{`x=é`, `x=é`},
	}
	tests = append(tests, struct{ in, out string }{
		strings.Repeat("(", 1000) + "d" + strings.Repeat(")", 1000), "type=d",
	}, struct{ in, out string }{
		strings.Repeat("!", 1000) + "d", strings.Repeat("!", 1000) + "type=d",
	})
	fixNow(t)
	for _, tt := range tests {
		p, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got := p.String(); got != tt.out {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.out)
			continue
		}
		p2, err := Parse(tt.out)
		if err != nil {
			t.Errorf("Parse(%q) (canonical): %v", tt.out, err)
		} else if got := p2.String(); got != tt.out {
			t.Errorf("canonical form %q reparsed as %q", tt.out, got)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in  string
		col int
		msg string // substring of the message
	}{
		{`size <`, 7, `expected value after "<"`},
		{`size <)`, 7, `expected value after "<"`},
		{`size>=`, 7, `expected value after ">="`},
		{`name~`, 6, `expected value after "~"`},
		{`~`, 2, `expected value after "~"`},
		{`~~ & d`, 4, `expected value after "~~"`},
		{`name`, 5, `expected operator after attribute "name"`},
		{`name d`, 6, `expected operator after attribute "name"`},
		{`*.go`, 5, `write ~*.go`},
		{`"a b"`, 6, `expected operator after attribute "\"a b\""`},
		{`name="abc`, 6, `unterminated quoted string`},
		{`name='abc`, 6, `unterminated quoted string`},
		{`name="abc\"`, 6, `unterminated quoted string`},
		{`name~~'('`, 7, "bad regular expression: missing closing ): `(`"},
		{`~~'a(b' & d`, 3, `bad regular expression`},
		{`name~~(`, 7, `expected value after "~~"`},
		{`name~[`, 6, `bad glob pattern "["`},
		{`!~a\`, 3, `bad glob pattern`},
		{`size>1X`, 6, `bad size value "1X"`},
		{`size>k`, 6, `bad size value`},
		{`size>99999999999T`, 6, `bad size value`},
		{`uid=root`, 5, `bad uid value "root"`},
		{`depth<x`, 7, `bad depth value`},
		{`mode=0999`, 6, `bad mode value "0999"`},
		{`mtime>yesterday`, 7, `bad time value "yesterday"`},
		{`mtime>-1y`, 7, `bad time value "-1y"`},
		{`mtime>2024-13-01`, 7, `bad time value`},
		{`(a=1`, 1, `unbalanced "(": missing ")"`},
		{`((a=1) & b=2`, 1, `unbalanced "("`},
		{`a=1)`, 4, `unbalanced ")"`},
		{`()`, 2, `expected expression after "("`},
		{`(a=1 b=2)`, 6, `unexpected "b"`},
		{`a=1 b=2`, 5, `unexpected "b"`},
		{`a=1 &`, 6, `expected expression after "&"`},
		{`a=1 | | b=1`, 7, `unexpected "|"`},
		{`a=1 &&& b=1`, 7, `unexpected "&"`},
		{`!`, 2, `expected expression after "!"`},
		{`not`, 4, `expected expression after "not"`},
		{`and`, 1, `unexpected "and"`},
		{`a=1 & or`, 7, `unexpected "or"`},
		{`=a`, 1, `missing attribute before "="`},
		{`<=a`, 1, `missing attribute before "<="`},
		{`a==b`, 3, `unexpected "="`},
		{`)`, 1, `unbalanced ")"`},
		{`d d`, 3, `unexpected "d"`},
		{strings.Repeat("(", 1001) + "d" + strings.Repeat(")", 1001), 1001, `nested too deeply`},
		{strings.Repeat("!", 1001) + "d", 1001, `nested too deeply`},
		{strings.Repeat("(!", 501) + "d" + strings.Repeat(")", 501), 1001, `nested too deeply`},
	}
	for _, tt := range tests {
		p, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) = %q, want error", tt.in, p)
			continue
		}
		var se *SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Parse(%q): error %T is not a *SyntaxError", tt.in, err)
			continue
		}
		if se.Col != tt.col || !strings.Contains(se.Msg, tt.msg) || se.Pred != tt.in {
			t.Errorf("Parse(%.40q): %v (col %d), want col %d and %q", tt.in, err, se.Col, tt.col, tt.msg)
		}
		if !strings.HasPrefix(err.Error(), "pred: col ") {
			t.Errorf("Parse(%q): error %q lacks the pred: col prefix", tt.in, err)
		}
	}
}

func TestSyntaxErrorKind(t *testing.T) {
	_, err := Parse("size <")
	if got, want := err.Error(), `pred: col 7: expected value after "<"`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, zx.ErrInvalid) {
		t.Errorf("errors.Is(%v, zx.ErrInvalid) = false", err)
	}
	if errors.Is(err, zx.ErrNotExist) {
		t.Errorf("errors.Is(%v, zx.ErrNotExist) = true", err)
	}
	if k := zx.KindOf(err); k != zx.ErrInvalid {
		t.Errorf("zx.KindOf(%v) = %v, want ErrInvalid", err, k)
	}
}

// entry returns a Dir from name=value pairs.
func entry(kv ...string) zx.Dir {
	d := zx.Dir{}
	for i := 0; i+1 < len(kv); i += 2 {
		d[kv[i]] = kv[i+1]
	}
	return d
}

func TestMatch(t *testing.T) {
	fixNow(t)
	ns := func(tm time.Time) string { return zx.FormatTime(tm) }
	goFile := entry("path", "/src/a/main.go", "name", "main.go", "type", "-",
		"size", "2048", "mode", "0644", "uid", "1000", "gid", "100",
		"mtime", ns(t0.Add(-30*time.Minute)), "atime", ns(t0.Add(-3*24*time.Hour)),
		"ctime", ns(time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)), "color", "red", "prio", "9")
	dir := entry("path", "/src/.git", "name", ".git", "type", "d", "size", "4096", "mode", "0755")
	big := entry("path", "/big", "name", "big", "type", "-", "size", "10485760", "mode", "04755")
	link := entry("path", "/l", "name", "l", "type", "l", "target", "/x")

	tests := []struct {
		pred  string
		d     zx.Dir
		depth int
		match bool
		prune bool
	}{
		{"", goFile, 0, true, false},
		{"true", goFile, 0, true, false},
		{"false", goFile, 0, false, false},
		{"prune", goFile, 0, false, true},
		{"!prune", goFile, 0, true, true},
		{"true | prune", goFile, 0, true, false},
		{"false & prune", goFile, 0, false, false},

		// = and != on strings
		{"name=main.go", goFile, 0, true, false},
		{"name=main", goFile, 0, false, false},
		{"name!=main", goFile, 0, true, false},
		{"name!=main.go", goFile, 0, false, false},
		{"path=/src/a/main.go", goFile, 0, true, false},
		{"color=red", goFile, 0, true, false},
		{"color='red'", goFile, 0, true, false},
		{`"color"=red`, goFile, 0, true, false},

		// missing attributes compare as ""
		{"shape=", goFile, 0, true, false},
		{"shape!=", goFile, 0, false, false},
		{"color=", goFile, 0, false, false},
		{"color!=", goFile, 0, true, false},
		{`shape=""`, goFile, 0, true, false},
		{"shape<b", goFile, 0, true, false},
		{"size>1", link, 0, false, false},
		{"size<1", link, 0, false, false},
		{"size=0", link, 0, false, false},
		{"size!=0", link, 0, true, false},
		{"mode>0", link, 0, false, false},
		{"mtime<-1h", link, 0, false, false},
		{"size=", link, 0, true, false},

		// ordering on strings, byte-wise
		{"color<s", goFile, 0, true, false},
		{"color<=red", goFile, 0, true, false},
		{"color>red", goFile, 0, false, false},
		{"color>=red", goFile, 0, true, false},
		{"name>A", goFile, 0, true, false},
		// name is always a string
		{"name>10", entry("name", "9"), 0, true, false},

		// numbers: generic attributes are numeric when both sides are integers
		{"prio<10", goFile, 0, true, false},
		{"prio=09", goFile, 0, true, false},
		{"prio>=10", goFile, 0, false, false},
		{"color<10", goFile, 0, false, false}, // "red" < "10" byte-wise: false

		// size, with units
		{"size=2048", goFile, 0, true, false},
		{"size=2k", goFile, 0, true, false},
		{"size=2K", goFile, 0, true, false},
		{"size=2KB", goFile, 0, true, false},
		{"size=2048B", goFile, 0, true, false},
		{"size<2k", goFile, 0, false, false},
		{"size<=2k", goFile, 0, true, false},
		{"size>1k", goFile, 0, true, false},
		{"size>=3k", goFile, 0, false, false},
		{"size!=2k", goFile, 0, false, false},
		{"size=10M", big, 0, true, false},
		{"size<1G", big, 0, true, false},
		{"size<1T", big, 0, true, false},
		{"size>9MB", big, 0, true, false},
		{"size=1024", entry("size", "1024"), 0, true, false},
		{"size=1k", entry("size", "1000"), 0, false, false},

		// ids
		{"uid=1000", goFile, 0, true, false},
		{"uid!=0", goFile, 0, true, false},
		{"gid<=100", goFile, 0, true, false},
		{"gid>100", goFile, 0, false, false},
		{"uid=1000", entry("uid", "01000"), 0, true, false},

		// mode, octal
		{"mode=0644", goFile, 0, true, false},
		{"mode=644", goFile, 0, true, false},
		{"mode<0700", goFile, 0, true, false},
		{"mode>=04000", big, 0, true, false},
		{"mode>=04000", goFile, 0, false, false},
		{"mode~*55", big, 0, true, false},

		// times
		{"mtime>-1h", goFile, 0, true, false},
		{"mtime>-10m", goFile, 0, false, false},
		{"mtime<-10m", goFile, 0, true, false},
		{"mtime>-1800s", goFile, 0, false, false},
		{"mtime>=-1800s", goFile, 0, true, false},
		{"mtime>-1d", goFile, 0, true, false},
		{"atime>-2d", goFile, 0, false, false},
		{"atime>-1w", goFile, 0, true, false},
		{"atime<-2d12h", goFile, 0, true, false},
		{"atime>2024-05-29", goFile, 0, true, false},
		{"atime>2024-05-30", goFile, 0, false, false},
		{"ctime=2024-01-02", goFile, 0, true, false},
		{"ctime=2024-01-02T00:00:00Z", goFile, 0, true, false},
		{"ctime=2024-01-02T01:00:00+01:00", goFile, 0, true, false},
		{"ctime<2024-01-01T23:59:59.5Z", goFile, 0, false, false},
		{"ctime=" + ns(time.Date(2024, 1, 2, 0, 0, 0, 0, time.UTC)), goFile, 0, true, false},
		{"mtime>2024-06-01T11:00:00Z & mtime<2024-06-01T12:00:00Z", goFile, 0, true, false},

		// depth
		{"depth=0", goFile, 0, true, false},
		{"depth=3", goFile, 3, true, false},
		{"depth<3", goFile, 3, false, false},
		{"depth<=3", goFile, 3, true, false},
		{"depth>2", goFile, 3, true, false},
		{"depth>=4", goFile, 3, false, false},
		{"depth!=3", goFile, 3, false, false},
		{"depth~1*", goFile, 12, true, false},
		{"depth=0", entry("depth", "7"), 0, true, false},

		// globs
		{"name~*.go", goFile, 0, true, false},
		{"name~*.c", goFile, 0, false, false},
		{"name~main*", goFile, 0, true, false},
		{"name~*ai*", goFile, 0, true, false},
		{"name~m?in.[gc]o", goFile, 0, true, false},
		{"name~main.go", goFile, 0, true, false},
		{"name~*", goFile, 0, true, false},
		{"name!~*.go", goFile, 0, false, false},
		{"name!~*.o", goFile, 0, true, false},
		{"path~*.go", goFile, 0, false, false}, // * does not match /
		{"path~/src/*/*.go", goFile, 0, true, false},
		{"path~/src/*", goFile, 0, false, false},
		{"shape~*", goFile, 0, true, false},
		{"shape~?*", goFile, 0, false, false},

		// regular expressions, unanchored
		{`name~~\.go$`, goFile, 0, true, false},
		{`name~~ai`, goFile, 0, true, false},
		{`name~~^ai`, goFile, 0, false, false},
		{`path~~"^/src/(a|b)/"`, goFile, 0, true, false},
		{`name!~~\.go$`, goFile, 0, false, false},
		{`name!~~\.c$`, goFile, 0, true, false},
		{`shape~~^$`, goFile, 0, true, false},

		// short forms
		{"-", goFile, 0, true, false},
		{"d", goFile, 0, false, false},
		{"d", dir, 0, true, false},
		{"l", link, 0, true, false},
		{"p | s | c | b", link, 0, false, false},
		{"p", entry("type", "p"), 0, true, false},
		{"s", entry("type", "s"), 0, true, false},
		{"c", entry("type", "c"), 0, true, false},
		{"b", entry("type", "b"), 0, true, false},
		{"~*.go", goFile, 0, true, false},
		{"~*.c", goFile, 0, false, false},
		{`~~^m.*\.go$`, goFile, 0, true, false},
		{"!~*.go", goFile, 0, false, false},
		{"!~~go", goFile, 0, false, false},

		// booleans and precedence
		{"- & ~*.go", goFile, 0, true, false},
		{"d & ~*.go", goFile, 0, false, false},
		{"d | ~*.go", goFile, 0, true, false},
		{"!d", goFile, 0, true, false},
		{"not d", goFile, 0, true, false},
		{"d | - & name=x", goFile, 0, false, false},   // d | (- & name=x)
		{"(d | -) & name=x", goFile, 0, false, false}, // and binds tighter
		{"- | d & name=x", goFile, 0, true, false},
		{"!d & !l", goFile, 0, true, false},
		{"!(d | -)", goFile, 0, false, false},
		{"!!-", goFile, 0, true, false},

		// prune
		{"name=.git & prune | type=-", dir, 0, false, true},
		{"name=.git & prune | type=-", goFile, 0, true, false},
		{"name=.git & prune | type=-", entry("name", "src", "type", "d"), 0, false, false},
		{"depth>=1 & prune | true", dir, 0, true, false},
		{"depth>=1 & prune | true", dir, 1, true, true},
		{"prune | d", dir, 0, true, true},
	}
	for _, tt := range tests {
		p, err := Parse(tt.pred)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.pred, err)
			continue
		}
		m, pr := p.Match(tt.d, tt.depth)
		if m != tt.match || pr != tt.prune {
			t.Errorf("Parse(%q).Match(%v, %d) = %v, %v; want %v, %v", tt.pred, tt.d, tt.depth, m, pr, tt.match, tt.prune)
		}
	}
}

func TestNilPred(t *testing.T) {
	var p *Pred
	if m, pr := p.Match(zx.Dir{}, 0); !m || pr {
		t.Errorf("nil Pred: Match = %v, %v", m, pr)
	}
	if s := p.String(); s != "true" {
		t.Errorf("nil Pred: String = %q", s)
	}
}

func TestRelativeTimeIsParseTime(t *testing.T) {
	fixNow(t)
	p, err := Parse("mtime>-1h")
	if err != nil {
		t.Fatal(err)
	}
	now = func() time.Time { return t0.Add(24 * time.Hour) } // later calls do not matter
	d := entry("mtime", zx.FormatTime(t0.Add(-time.Minute)))
	if m, _ := p.Match(d, 0); !m {
		t.Errorf("mtime>-1h does not match an entry modified a minute before Parse")
	}
}

func TestValueParsers(t *testing.T) {
	sizes := []struct {
		in string
		n  int64
		ok bool
	}{
		{"0", 0, true},
		{"10", 10, true},
		{"1k", 1024, true},
		{"1K", 1024, true},
		{"1kB", 1024, true},
		{"10M", 10 << 20, true},
		{"10MB", 10 << 20, true},
		{"3G", 3 << 30, true},
		{"2T", 2 << 40, true},
		{"7B", 7, true},
		{"-1k", -1024, true},
		{"8388607T", 8388607 << 40, true},
		{"8388608T", 0, false},
		{"B", 0, false},
		{"k", 0, false},
		{"1.5k", 0, false},
		{"1m", 0, false},
		{"1KK", 0, false},
		{"", 0, false},
	}
	for _, tt := range sizes {
		n, ok := parseSize(tt.in)
		if n != tt.n || ok != tt.ok {
			t.Errorf("parseSize(%q) = %d, %v; want %d, %v", tt.in, n, ok, tt.n, tt.ok)
		}
	}
	decs := []struct {
		in string
		n  int64
		ok bool
	}{
		{"0", 0, true},
		{"+5", 5, true},
		{"-5", -5, true},
		{"9223372036854775807", 1<<63 - 1, true},
		{"9223372036854775808", 0, false},
		{"-9223372036854775808", -1 << 63, true},
		{"-9223372036854775809", 0, false},
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"1x", 0, false},
	}
	for _, tt := range decs {
		n, ok := parseDec(tt.in)
		if n != tt.n || ok != tt.ok {
			t.Errorf("parseDec(%q) = %d, %v; want %d, %v", tt.in, n, ok, tt.n, tt.ok)
		}
	}
	rels := []struct {
		in string
		d  time.Duration
	}{
		{"10s", 10 * time.Second},
		{"30m", 30 * time.Minute},
		{"1h", time.Hour},
		{"2d", 48 * time.Hour},
		{"1w", 7 * 24 * time.Hour},
		{"1d12h", 36 * time.Hour},
		{"1h30m", 90 * time.Minute},
	}
	for _, tt := range rels {
		n, msg := parseTime("-"+tt.in, t0)
		if msg != "" || n != t0.Add(-tt.d).UnixNano() {
			t.Errorf("parseTime(-%s) = %d, %q; want %d", tt.in, n, msg, t0.Add(-tt.d).UnixNano())
		}
	}
	for _, bad := range []string{"-1", "-h", "-1x", "-1h1", "-99999999999999w", "0001-01-01", "x"} {
		if bad == "-1" {
			// A plain integer is nanoseconds.
			if n, msg := parseTime(bad, t0); msg != "" || n != -1 {
				t.Errorf("parseTime(-1) = %d, %q", n, msg)
			}
			continue
		}
		if _, msg := parseTime(bad, t0); msg == "" {
			t.Errorf("parseTime(%q) succeeded", bad)
		}
	}
}

// TestGlobFastPaths checks that the fast paths agree with path.Match.
func TestGlobFastPaths(t *testing.T) {
	pats := []string{"", "*", "**", "a", "a/b", "*.go", "*/b", "a*", "a/*", "*a*", "*/*", "*a/b*", "a*b", "[ab]*", `\*`, "?", "*?"}
	names := []string{"", "a", "b", "a.go", "x/a.go", "a/b", "ab", "xab", "x/ab", "ba", "a/", "/", "*", "a*b", "xa/bx", "a/b/c"}
	for _, pat := range pats {
		g, err := compileGlob(pat)
		if err != nil {
			t.Fatalf("compileGlob(%q): %v", pat, err)
		}
		for _, name := range names {
			want, _ := path.Match(pat, name)
			if got := g.match(name); got != want {
				t.Errorf("glob %q (kind %d) on %q = %v, want %v", pat, g.kind, name, got, want)
			}
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	fixNow(t)
	p, err := Parse(`name=.git & prune | - & (~*.go | name~~'_test\.go$' | size>10M | mtime>-1h | mode>=04000 | color=red | prio<3 | shape=) & depth<10`)
	if err != nil {
		t.Fatal(err)
	}
	d := entry("path", "/src/a/main.c", "name", "main.c", "type", "-", "size", "2048",
		"mode", "0644", "mtime", "1700000000000000000", "color", "blue", "prio", "x")
	allocs := testing.AllocsPerRun(1000, func() { p.Match(d, 3) })
	if allocs != 0 {
		t.Errorf("Match allocates %v times per call", allocs)
	}
}

func BenchmarkMatch(b *testing.B) {
	p, err := Parse(`name=.git & prune | - & (~*.go | size>10M) & mtime>-1d`)
	if err != nil {
		b.Fatal(err)
	}
	d := entry("path", "/src/a/main.go", "name", "main.go", "type", "-", "size", "2048",
		"mode", "0644", "mtime", zx.FormatTime(time.Now()))
	b.ReportAllocs()
	for b.Loop() {
		p.Match(d, 3)
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(`name=.git & prune | - & (~*.go | size>10M) & mtime>-1d`); err != nil {
			b.Fatal(err)
		}
	}
}
