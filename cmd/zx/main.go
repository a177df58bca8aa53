// Command zx is the command-line client and server of the zx network file
// system: it serves local directories (zx serve), emulates a slow link for
// experiments (zx lag), and reads and writes remote trees with one request
// per operation, however many files it touches (zx find, get, put, rm,
// grep ...). Run "zx help" for the list of commands; docs/cli.md describes
// every command, its flags and its exit codes.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Exit codes, stable: scripts depend on them.
const (
	exitOK    = 0 // success (grep: some line matched)
	exitFail  = 1 // an operation failed (grep: nothing matched)
	exitUsage = 2 // bad usage (grep: an error)
)

// defaultExit is what the exit statuses of a command mean unless its
// command.exit says otherwise.
const defaultExit = "0 success; 1 an operation failed (each failure is reported on stderr); 2 bad usage (unknown flag, bad operand)."

// A command is one subcommand of zx.
type command struct {
	name    string
	args    string // usage after "zx NAME"
	summary string // one line, for the command list
	help    string // one paragraph
	example string
	exit    string // its exit statuses, if not the usual ones (defaultExit)
	run     func(args []string) int
}

// commands returns the table of subcommands, in the order "zx help" lists
// them: the only table of commands, which dispatch and help both read.
// Each entry comes from a function in the command's own file.
func commands() []command {
	return []command{
		serveCommand(), lagCommand(), pingCommand(), statCommand(), lsCommand(),
		findCommand(), getCommand(), putCommand(), rmCommand(), mvCommand(),
		wstatCommand(), grepCommand(), mountCommand(), umountCommand(), syncCommand(), conflictsCommand(), statusCommand(), ctlCommand(), replCommand(), dumpCommand(), histCommand(), keygenCommand(),
		demoCommand(), versionCommand(), helpCommand(),
	}
}

// moved holds commands that left zx, with where they went: a user who
// types one from older notes learns where it is now.
var moved = map[string]string{
	"bench": "the benchmarks are no longer part of zx: run them from zx's source tree with 'go run ./bench/zxbench' (same flags; see docs/bench/README.md)",
}

// lookup returns the command called name.
func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func main() {
	if filepath.Base(os.Args[0]) == "mount.zx" {
		os.Exit(runMount(mountHelperArgs(os.Args[1:])))
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if len(args) == 0 {
		usage(os.Stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		usage(os.Stdout)
		return exitOK
	case "-version", "--version":
		name = "version"
	}
	c, ok := lookup(name)
	if !ok {
		unknown("zx", name)
		return exitUsage
	}
	return c.run(args[1:])
}

// unknown reports that there is no command called name, or where it went.
func unknown(prog, name string) {
	if where, ok := moved[name]; ok {
		fmt.Fprintf(os.Stderr, "%s: %s: %s\n", prog, name, where)
		return
	}
	fmt.Fprintf(os.Stderr, "%s: unknown command %q; run 'zx help' for the list of commands\n", prog, name)
}

// usage prints the list of commands.
func usage(w io.Writer) {
	fmt.Fprint(w, "zx is a network file system for high-latency links.\n\nUsage:\n\n\tzx COMMAND [ARGUMENTS]\n\nCommands:\n\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "\t%-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nLocations are zx://HOST[:PORT]/PATH (default port 5640), or\n"+
		"zx://HOST[:PORT]/@TREE/PATH for a tree other than the server's default one, or\n"+
		"ssh://[USER@]HOST[:PORT]/DIR[//PATH] to serve DIR on HOST through ssh.\n\n"+
		"Run 'zx help COMMAND' (or 'zx COMMAND -h') for the flags of a command.\n"+
		"Exit status: 0 success, 1 failure, 2 bad usage, unless a command's help says otherwise.\n")
}

func helpCommand() command {
	return command{
		name:    "help",
		args:    "[COMMAND]",
		summary: "show the list of commands, or the help of one",
		help:    "Help prints the list of commands, or, given a command name, that command's usage, description, flags and an example.",
		example: "zx help get",
		run:     runHelp,
	}
}

func runHelp(args []string) int {
	c := helpCommand()
	fs := newFlagSet(c)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	switch len(rest) {
	case 0:
		usage(os.Stdout)
		return exitOK
	case 1:
		h, ok := lookup(rest[0])
		if !ok {
			unknown("zx help", rest[0])
			return exitUsage
		}
		// Running the command with -h prints its help from its own
		// flag set, so the flags listed are the ones it parses.
		return h.run([]string{"-h"})
	}
	return usageError(c, "too many arguments")
}
