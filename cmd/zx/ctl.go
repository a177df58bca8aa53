package main

import (
	"bytes"
	"strings"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/ctl"
)

func ctlCommand() command {
	return command{
		name:    "ctl",
		args:    "[--json] [--stats] [--timeout D] zx://HOST[:PORT]/[@TREE/] [CMD...]",
		summary: "read a server's control file, or write a command to it",
		help: "Ctl reads the control file (/Ctl) of the tree at the location: the status of this " +
			"command's client connection, then of the server (who is connected, requests, bytes, " +
			"RTT, flags), then of the tree the server exports, each section titled " +
			"\"== KIND ADDRESS\". With --json it prints one object per section " +
			"({\"kind\":…,\"addr\":…,\"lines\":[…]}). Given CMD, it writes CMD as one command line " +
			"instead, to the client's layer: \"debug on\" sets a flag of the client, \"pass debug on\" " +
			"of the server, \"pass pass debug on\" of the exported tree; \"sync\" flushes every layer " +
			"and returns when all are flushed. The path of the location is ignored: the control " +
			"file is at the root of the tree. On a mount, cat and echo do the same: " +
			"cat /mnt/zx/Ctl; echo sync > /mnt/zx/Ctl. See docs/ctl.md.",
		exit:    "0 success; 1 the tree is not there (or not granted), the status could not be read, or CMD failed (an unknown command, pass below the last layer), with the reason; 2 bad usage.",
		example: "zx ctl zx://127.0.0.1/ pass debug on",
		run:     runCtl,
	}
}

func runCtl(args []string) int {
	c := ctlCommand()
	var opts commonFlags
	fs := newFlagSet(c)
	opts.register(fs)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) == 0 {
		return usageError(c, "want a zx:// location")
	}
	s := newSession(c.name, opts)
	loc, err := s.parse(rest[0])
	if err != nil {
		s.errorf("%v", err)
		return s.close(exitUsage)
	}
	t, err := s.tree(loc)
	if err != nil {
		return s.close(s.fail(err))
	}
	if cmd := strings.TrimSpace(strings.Join(rest[1:], " ")); cmd != "" {
		// A command the client alone carries out ("debug on") never
		// asks the server, so the tree's root is asked for too, at
		// the same time: a tree that is not there (or not granted)
		// is an error whatever the command.
		root := t.Stat(s.ctx, "/")
		r := <-t.Put(s.ctx, ctl.Path, zx.Dir{}, 0, strings.NewReader(cmd+"\n"))
		if rr := <-root; rr.Err != nil && zx.KindOf(rr.Err) == zx.ErrNotExist {
			return s.close(s.fail(rr.Err))
		}
		if r.Err != nil {
			return s.close(s.fail(r.Err))
		}
		return s.close(exitOK)
	}
	var b bytes.Buffer
	if _, err := zx.Copy(&b, t.Get(s.ctx, ctl.Path, 0, -1)); err != nil {
		return s.close(s.fail(err))
	}
	if !opts.json {
		s.out.Write(b.Bytes())
		return s.close(exitOK)
	}
	for _, sec := range ctl.Parse(b.Bytes()) {
		s.emit(map[string]any{"kind": sec.Kind, "addr": sec.Addr, "lines": sec.Lines})
	}
	return s.close(exitOK)
}
