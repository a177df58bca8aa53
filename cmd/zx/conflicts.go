package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/zxfs/zx/cache"
)

func conflictsCommand() command {
	return command{
		name:    "conflicts",
		args:    "[--json] MOUNTPOINT | --journal DIR",
		summary: "list the changes a zx mount kept aside as conflicts",
		help: "Conflicts lists what the zx mount at MOUNTPOINT (or the write-back journal DIR, for a " +
			"mount that is not running) was told had succeeded but the server could not take as it was " +
			"made: data written to a file whose directory went away or whose name another client took " +
			"by something else, a change refused. Nothing is dropped: the data of each is on the server, " +
			"in the file itself when its directory was made again, or in a conflict copy beside it named " +
			"NAME.zx-conflict-HOST-YYYYMMDDTHHMMSSZ (docs/cache.md, \"Conflicts\"). Resolve one with " +
			"ordinary commands: look at both, keep one (mv the copy over the file, or rm it). The list " +
			"is kept in the journal's directory, in the file 'conflicts'; it is a history, not a state: " +
			"remove that file once you have looked.",
		exit:    "0 listed (perhaps nothing); 1 MOUNTPOINT is not a zx mount, or the list cannot be read; 2 bad usage.",
		example: "zx conflicts /mnt/src",
		run:     runConflicts,
	}
}

func runConflicts(args []string) int {
	c := conflictsCommand()
	fs := newFlagSet(c)
	asJSON := fs.Bool("json", false, "print one JSON object per conflict and line (time, path, copy, op, reason)")
	journal := fs.String("journal", "", "read the write-back journal `DIR` rather than ask a running mount")
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	dir := *journal
	switch {
	case dir != "" && len(rest) != 0:
		return usageError(c, "give a mount point or --journal, not both")
	case dir == "" && len(rest) != 1:
		return usageError(c, "want a mount point")
	case dir == "":
		if !isZXMount(rest[0]) {
			return notZXMount(c, rest[0])
		}
		var err error
		if dir, err = mountJournal(rest[0]); err != nil {
			fmt.Fprintf(os.Stderr, "zx conflicts: %v\n", err)
			return exitFail
		}
	}
	var cs []cache.Conflict
	if dir != "" {
		var err error
		if cs, err = cache.ReadConflicts(dir); err != nil {
			fmt.Fprintf(os.Stderr, "zx conflicts: %v\n", err)
			return exitFail
		}
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		for _, cf := range cs {
			enc.Encode(cf)
		}
		return exitOK
	}
	if len(cs) == 0 {
		return exitOK
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tOP\tPATH\tKEPT IN\tREASON")
	for _, cf := range cs {
		kept := cf.Copy
		if kept == "" {
			kept = cf.Path
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cf.Time.Local().Format(time.DateTime), cf.Op, cf.Path, kept, cf.Reason)
	}
	tw.Flush()
	return exitOK
}

// mountJournal returns the write-back journal directory of the zx mount
// at mnt, from its Ctl file ("journal DIR" in the cache's section), or ""
// when the mount has none (nothing is written back, so nothing conflicts).
func mountJournal(mnt string) (string, error) {
	b, err := os.ReadFile(filepath.Join(mnt, "Ctl"))
	if mountGone(err) {
		return "", fmt.Errorf("the mount's process is gone: use --journal with its journal directory (CACHE_DIR/LOCATION/journal)")
	}
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if d, ok := strings.CutPrefix(strings.TrimSpace(l), "journal "); ok {
			return d, nil
		}
	}
	return "", nil
}
