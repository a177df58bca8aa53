package proto

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/zxfs/zx"
)

// Request operations.
const (
	OpAttach    = 1
	OpStat      = 2
	OpGet       = 3
	OpPut       = 4
	OpMove      = 5
	OpRemove    = 6
	OpRemoveAll = 7
	OpWstat     = 8
	OpFind      = 9
	OpFindGet   = 10
	OpWatch     = 11
	OpLink      = 12
	OpStatFS    = 13
	OpSync      = 14 // only to a server that offered FeatureSync
	OpAllocate  = 15 // only to a server that offered FeatureAlloc
	// Delegations, only to a server that offered FeatureDeleg.
	OpDelegate = 16 // ask for a delegation of path
	OpRecalls  = 17 // a stream of recalls, for owner
	OpReturn   = 18 // give back the delegation of path
	maxOp      = OpReturn

	// opCaller, or'ed into the op byte, says that the caller's ids
	// follow the path.
	opCaller = 0x80
)

var opNames = [...]string{"", "attach", "stat", "get", "put", "move", "remove", "removeall", "wstat", "find", "findget", "watch", "link", "statfs", "sync", "allocate", "delegate", "recalls", "return"}

// OpName returns the name of a request operation.
func OpName(op uint8) string {
	if int(op) < len(opNames) && (opNames[op] != "" || op == 0) {
		return opNames[op]
	}
	return fmt.Sprintf("op%d", op)
}

// Request is a request message, the payload of an FReq frame. Which fields
// are sent depends on Op (see docs/protocol.md).
type Request struct {
	Op    uint8
	Tree  string // exported tree name; "" for the default tree
	Path  string
	To    string // move
	Off   int64  // get, put, allocate
	Count int64  // get, allocate
	Mode  uint32 // allocate: a zx.AllocMode
	Dir   zx.Dir // put, wstat
	Pred  string // find, findget
	Spref string // find, findget
	Dpref string // find, findget
	Depth int64  // find, findget
	Owner string // recalls: the client's owner id for its delegations

	// HasCaller says that the request carries the ids of the user it is
	// made for, Uid and Gid (honoured only on multi-user connections).
	HasCaller bool
	Uid, Gid  uint32
}

// Hello is the payload of an FHello frame.
type Hello struct {
	Version    uint64
	MaxStreams uint64 // streams the sender accepts at once (0: no limit stated)
	Features   []string
}

// FeatureDeleg is the hello feature by which a server says that it
// grants delegations (OpDelegate, OpRecalls, OpReturn; docs/protocol.md,
// Delegations). A client never sends them to a server that did not offer
// it.
const FeatureDeleg = "deleg"

// MaxOwner bounds the length of a delegation owner's id.
const MaxOwner = 128

// EventRecall is the kind of the notice on a recalls stream that asks
// the client to give back the delegation of the notice's path.
const EventRecall = 6

// FeatureSync is the hello feature by which a server says that it takes
// the sync request (OpSync). A client never sends OpSync to a server that
// did not offer it: an older server would answer it as a protocol error.
const FeatureSync = "sync"

// FeatureAlloc is the hello feature by which a server says that it takes
// the allocate request (OpAllocate). A client never sends OpAllocate to a
// server that did not offer it (an older server would answer it as a
// protocol error): it fails the call with zx.ErrNotSupp instead.
const FeatureAlloc = "falloc"

// Event is the payload of an FEvent frame.
type Event struct {
	Kind uint8
	From string
	Dir  zx.Dir
	// Seq, if not 0, numbers a notice the watcher must acknowledge (an
	// acknowledged watch, feature FeatureWatchAck): its encoding sets bit
	// 7 of the kind byte and follows it with Seq.
	Seq uint64
}

// FeatureWatchAck is the hello feature that says the sender speaks
// acknowledged watches: a client asks for them by leaving a watch's
// stream open, the server then numbers the notices of changes made
// through other connections (Event.Seq), and the client acknowledges them
// on the stream (AppendAck) once it has applied them. See
// docs/protocol.md, Acknowledged watches.
const FeatureWatchAck = "watchack"

// eventSeq, or'ed into an event's kind byte, says that a sequence number
// follows it.
const eventSeq = 0x80

// encoder appends primitives to a buffer.
type encoder struct{ b []byte }

func (e *encoder) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) varint(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)     { e.uvarint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) dir(d zx.Dir) {
	// Entries have a dozen or so attributes and this runs for every
	// entry sent: they are sorted by insertion (fast for so few) in an
	// array on the stack, indexed directly (a store through a slice
	// would need a write barrier), and the output grows once.
	var ab [32]attr
	var as []attr // for larger entries
	n := 0
	size := uvarintLen(uint64(len(d)))
	if len(d) == len(plainAttrs) {
		// Most entries have exactly these: look them up in order
		// rather than iterate and sort.
		for _, k := range plainAttrs {
			v, ok := d[k]
			if !ok {
				break
			}
			ab[n] = attr{k, v}
			n++
			size += uvarintLen(uint64(len(k))) + len(k) + uvarintLen(uint64(len(v))) + len(v)
		}
		if n == len(plainAttrs) {
			as = ab[:n]
			goto write
		}
		n, size = 0, uvarintLen(uint64(len(d)))
	}
	for k, v := range d {
		if n < len(ab) {
			ab[n] = attr{k, v}
			n++
		} else {
			as = append(as, attr{k, v})
		}
		size += uvarintLen(uint64(len(k))) + len(k) + uvarintLen(uint64(len(v))) + len(v)
	}
	if as == nil {
		for i := 1; i < n; i++ {
			for j := i; j > 0 && ab[j].k < ab[j-1].k; j-- {
				ab[j], ab[j-1] = ab[j-1], ab[j]
			}
		}
		as = ab[:n]
	} else {
		as = append(ab[:n:n], as...)
		slices.SortFunc(as, func(a, b attr) int { return strings.Compare(a.k, b.k) })
	}
write:
	// Append to a local slice: e may be on the heap as far as the
	// compiler knows, and every store to e.b would be a write barrier.
	b := slices.Grow(e.b, size)
	b = binary.AppendUvarint(b, uint64(len(as)))
	for _, a := range as {
		b = binary.AppendUvarint(b, uint64(len(a.k)))
		b = append(b, a.k...)
		b = binary.AppendUvarint(b, uint64(len(a.v)))
		b = append(b, a.v...)
	}
	e.b = b
}

type attr struct{ k, v string }

// plainAttrs are the attributes of a plain entry of a local tree (a
// regular file or directory without user attributes), sorted.
var plainAttrs = [...]string{zx.AAtime, zx.ACtime, zx.AGid, zx.AIno, zx.AMode, zx.AMtime,
	zx.AName, zx.ANlink, zx.APath, zx.ASize, zx.AType, zx.AUid}

// uvarintLen is the length of the encoding of v.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// decoder reads primitives, remembering the first error.
type decoder struct {
	b     []byte
	err   error
	owned bool // b is the decoder's to keep: strings may share its memory
}

func (d *decoder) fail(msg string) {
	if d.err == nil {
		d.err = zx.E(zx.ErrProtocol, "decode", "", msg)
	}
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad unsigned integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) byte1() uint8 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail("message too short")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("string longer than its message")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) dir() zx.Dir {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	// Each attribute takes at least two bytes.
	if n > uint64(len(d.b))/2 {
		d.fail("attribute count larger than its message")
		return nil
	}
	// Check the layout before allocating anything, so that a malformed
	// entry costs no memory; then names and values are cut from one copy
	// of the entry's bytes: one allocation per entry rather than two per
	// attribute.
	size := d.dirSize(n)
	if d.err != nil {
		return nil
	}
	b := d.b[:size]
	var s string
	if d.owned && size > 0 {
		s = unsafe.String(&b[0], size)
	} else {
		s = string(b)
	}
	// Size the map by the count only up to a point: a lying count would
	// otherwise allocate a map far larger than the message.
	dir := make(zx.Dir, min(n, 64))
	str := func(off int) (string, int) { // the layout is checked
		l, m := binary.Uvarint(b[off:])
		off += m
		return s[off : off+int(l)], off + int(l)
	}
	var k, v string
	for off := 0; off < size; {
		k, off = str(off)
		v, off = str(off)
		n := len(dir)
		dir[k] = v
		if len(dir) == n { // k was there already
			d.fail("duplicate attribute " + k)
			return nil
		}
	}
	d.b = d.b[size:]
	return dir
}

// dirSize returns the length of the n attributes at the start of d.b, or
// fails if they do not fit or a name is empty.
func (d *decoder) dirSize(n uint64) int {
	b := d.b
	for i := range 2 * n {
		l, m := binary.Uvarint(b)
		if m <= 0 {
			d.fail("bad unsigned integer")
			return 0
		}
		if l > uint64(len(b)-m) {
			d.fail("string longer than its message")
			return 0
		}
		if l == 0 && i%2 == 0 {
			d.fail("empty attribute name")
			return 0
		}
		b = b[m+int(l):]
	}
	return len(d.b) - len(b)
}

func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Sprintf("%d bytes of trailing garbage", len(d.b)))
	}
	return d.err
}

// AppendRequest appends the encoding of r to b.
func AppendRequest(b []byte, r *Request) []byte {
	e := encoder{b}
	op := r.Op
	if r.HasCaller {
		op |= opCaller
	}
	e.b = append(e.b, op)
	e.str(r.Tree)
	e.str(r.Path)
	if r.HasCaller {
		e.uvarint(uint64(r.Uid))
		e.uvarint(uint64(r.Gid))
	}
	switch r.Op {
	case OpGet:
		e.varint(r.Off)
		e.varint(r.Count)
	case OpPut:
		e.dir(r.Dir)
		e.varint(r.Off)
	case OpMove, OpLink:
		e.str(r.To)
	case OpWstat:
		e.dir(r.Dir)
	case OpFind, OpFindGet:
		e.str(r.Pred)
		e.str(r.Spref)
		e.str(r.Dpref)
		e.varint(r.Depth)
	case OpRecalls:
		e.str(r.Owner)
	case OpAllocate:
		e.uvarint(uint64(r.Mode))
		e.varint(r.Off)
		e.varint(r.Count)
	}
	return e.b
}

// ParseRequest decodes a request message.
func ParseRequest(b []byte) (*Request, error) {
	d := decoder{b: b}
	r := &Request{Op: d.byte1()}
	r.HasCaller = r.Op&opCaller != 0
	r.Op &^= opCaller
	if d.err == nil && (r.Op < OpAttach || r.Op > maxOp || opNames[r.Op] == "") {
		return nil, zx.E(zx.ErrProtocol, "decode", "", fmt.Sprintf("unknown request %d", r.Op))
	}
	r.Tree = d.str()
	r.Path = d.str()
	if r.HasCaller {
		uid, gid := d.uvarint(), d.uvarint()
		if d.err == nil && (uid > 1<<32-1 || gid > 1<<32-1) {
			d.fail("caller id out of range")
		}
		r.Uid, r.Gid = uint32(uid), uint32(gid)
	}
	switch r.Op {
	case OpGet:
		r.Off = d.varint()
		r.Count = d.varint()
	case OpPut:
		r.Dir = d.dir()
		r.Off = d.varint()
	case OpMove, OpLink:
		r.To = d.str()
	case OpWstat:
		r.Dir = d.dir()
	case OpFind, OpFindGet:
		r.Pred = d.str()
		r.Spref = d.str()
		r.Dpref = d.str()
		r.Depth = d.varint()
	case OpRecalls:
		r.Owner = d.str()
		if d.err == nil && (r.Owner == "" || len(r.Owner) > MaxOwner) {
			d.fail("bad owner")
		}
	case OpAllocate:
		mode := d.uvarint()
		if d.err == nil && mode > 1<<32-1 {
			d.fail("allocate mode out of range")
		}
		r.Mode = uint32(mode)
		r.Off = d.varint()
		r.Count = d.varint()
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return r, nil
}

// AppendDir appends the encoding of a directory entry (an FDir payload).
func AppendDir(b []byte, dir zx.Dir) []byte {
	e := encoder{b}
	e.dir(dir)
	return e.b
}

// ParseDir decodes an FDir payload.
func ParseDir(b []byte) (zx.Dir, error) {
	return parseDir(decoder{b: b})
}

// ParseDirOwned is ParseDir for a payload that the caller hands over, such
// as one just read by ReadFrame: the entry's names and values share b's
// memory instead of copying it, so b must never be modified afterwards.
func ParseDirOwned(b []byte) (zx.Dir, error) {
	return parseDir(decoder{b: b, owned: true})
}

func parseDir(d decoder) (zx.Dir, error) {
	dir := d.dir()
	if err := d.end(); err != nil {
		return nil, err
	}
	return dir, nil
}

// AppendError appends the encoding of an error (an FErr or FGoaway
// payload): its kind, op, path and message. Errors without a kind are sent
// as ErrOther.
func AppendError(b []byte, err error) []byte {
	ze := &zx.Error{Kind: zx.KindOf(err), Msg: err.Error()}
	if e, ok := err.(*zx.Error); ok {
		ze = e
		if ze.Msg == "" && ze.Err != nil {
			c := *ze
			c.Msg = ze.Err.Error()
			ze = &c
		}
	} else if k, ok := err.(zx.Kind); ok {
		ze = &zx.Error{Kind: k}
	}
	e := encoder{b}
	e.b = append(e.b, uint8(ze.Kind))
	e.str(ze.Op)
	e.str(ze.Path)
	e.str(ze.Msg)
	return e.b
}

// ParseError decodes an FErr or FGoaway payload. Unknown kinds decode as
// ErrOther, so old clients understand new servers.
func ParseError(b []byte) (*zx.Error, error) {
	d := decoder{b: b}
	e := &zx.Error{Kind: zx.Kind(d.byte1())}
	e.Op = d.str()
	e.Path = d.str()
	e.Msg = d.str()
	if err := d.end(); err != nil {
		return nil, err
	}
	if !e.Kind.Valid() {
		e.Kind = zx.ErrOther
	}
	return e, nil
}

// AppendHello appends the encoding of h.
func AppendHello(b []byte, h *Hello) []byte {
	e := encoder{b}
	e.b = append(e.b, "zx"...)
	e.uvarint(h.Version)
	e.uvarint(h.MaxStreams)
	e.uvarint(uint64(len(h.Features)))
	for _, f := range h.Features {
		e.str(f)
	}
	return e.b
}

// ParseHello decodes an FHello payload.
func ParseHello(b []byte) (*Hello, error) {
	if len(b) < 2 || string(b[:2]) != "zx" {
		return nil, zx.E(zx.ErrProtocol, "hello", "", "not a zx peer")
	}
	d := decoder{b: b[2:]}
	h := &Hello{Version: d.uvarint(), MaxStreams: d.uvarint()}
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("feature count larger than its message")
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		h.Features = append(h.Features, d.str())
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return h, nil
}

// AppendEvent appends the encoding of a change notice.
func AppendEvent(b []byte, ev *Event) []byte {
	e := encoder{b}
	if ev.Seq != 0 {
		e.b = append(e.b, ev.Kind|eventSeq)
		e.uvarint(ev.Seq)
	} else {
		e.b = append(e.b, ev.Kind)
	}
	e.str(ev.From)
	e.dir(ev.Dir)
	return e.b
}

// ParseEvent decodes an FEvent payload.
func ParseEvent(b []byte) (*Event, error) {
	d := decoder{b: b}
	ev := &Event{Kind: d.byte1()}
	if ev.Kind&eventSeq != 0 {
		ev.Kind &^= eventSeq
		if ev.Seq = d.uvarint(); ev.Seq == 0 && d.err == nil {
			d.fail("event sequence number 0")
		}
	}
	ev.From, ev.Dir = d.str(), d.dir()
	if err := d.end(); err != nil {
		return nil, err
	}
	return ev, nil
}

// AppendAck appends an acknowledgement of the notices of an acknowledged
// watch up to and including seq: the payload of a DATA message the client
// sends on the watch's stream.
func AppendAck(b []byte, seq uint64) []byte {
	return binary.AppendUvarint(b, seq)
}

// ParseAck decodes an acknowledgement.
func ParseAck(b []byte) (uint64, error) {
	d := decoder{b: b}
	seq := d.uvarint()
	if seq == 0 && d.err == nil {
		d.fail("acknowledgement of sequence number 0")
	}
	if err := d.end(); err != nil {
		return 0, err
	}
	return seq, nil
}

// AppendWindow appends an FWindow payload.
func AppendWindow(b []byte, inc uint32) []byte { return binary.LittleEndian.AppendUint32(b, inc) }

// ParseWindow decodes an FWindow payload.
func ParseWindow(b []byte) (uint32, error) {
	if len(b) != 4 {
		return 0, zx.E(zx.ErrProtocol, "window", "", "bad window update")
	}
	v := binary.LittleEndian.Uint32(b)
	if v == 0 {
		return 0, zx.E(zx.ErrProtocol, "window", "", "zero window increment")
	}
	return v, nil
}

// Grant is the reply to a delegate request (OpDelegate): the payload of
// its DATA message. An empty payload is a plain grant.
type Grant struct {
	Refused bool     // not granted: another client holds it, or used it lately
	Held    bool     // the owner held it already
	Revoked bool     // the owner held it until it was revoked; since then:
	All     bool     //   others changed under it, beyond what can be told
	Touched []string //   the paths others changed under it
}

const (
	grantRefused = 1 << iota
	grantHeld
	grantRevoked
	grantAll
)

// AppendGrant appends the encoding of g: a flags byte (1 refused, 2
// held, 4 revoked, 8 all), then a count and the touched paths; nothing
// for a plain grant.
func AppendGrant(b []byte, g *Grant) []byte {
	var flags byte
	for _, f := range []struct {
		on  bool
		bit byte
	}{{g.Refused, grantRefused}, {g.Held, grantHeld}, {g.Revoked, grantRevoked}, {g.All, grantAll}} {
		if f.on {
			flags |= f.bit
		}
	}
	if flags == 0 && len(g.Touched) == 0 {
		return b
	}
	e := encoder{append(b, flags)}
	e.uvarint(uint64(len(g.Touched)))
	for _, p := range g.Touched {
		e.str(p)
	}
	return e.b
}

// ParseGrant decodes a delegate reply's payload.
func ParseGrant(b []byte) (*Grant, error) {
	g := &Grant{}
	if len(b) == 0 {
		return g, nil
	}
	d := decoder{b: b}
	flags := d.byte1()
	if flags&^(grantRefused|grantHeld|grantRevoked|grantAll) != 0 {
		d.fail("unknown grant flags")
	}
	g.Refused, g.Held = flags&grantRefused != 0, flags&grantHeld != 0
	g.Revoked, g.All = flags&grantRevoked != 0, flags&grantAll != 0
	n := d.uvarint()
	if d.err == nil && n > uint64(len(b)) {
		d.fail("too many paths")
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		g.Touched = append(g.Touched, d.str())
	}
	if err := d.end(); err != nil {
		return nil, err
	}
	return g, nil
}
