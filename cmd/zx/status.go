package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func statusCommand() command {
	return command{
		name:    "status",
		args:    "[--json] MOUNTPOINT",
		summary: "say how a zx mount is doing: its link, what is pending, conflicts, delegations",
		help: "Status reads the control file of the zx mount at MOUNTPOINT and says whether its link to the " +
			"server is up (or down since when, and why), which mode it writes in (delegations, the default; " +
			"strict; writeback), how many changes it holds that the server does not have yet (and how many " +
			"of them wait for the link), how many conflicts it kept ('zx conflicts' lists them), and which " +
			"delegations it holds. With --json it prints one JSON object, for scripts.",
		exit:    "0 the status was read; 1 MOUNTPOINT is not a zx mount, or its process is gone; 2 bad usage.",
		example: "zx status /mnt/src",
		run:     runStatus,
	}
}

// mountStatus is what zx status says of a mount.
type mountStatus struct {
	Mountpoint   string   `json:"mountpoint"`
	Location     string   `json:"location"`
	Link         string   `json:"link"` // "up" or "down"
	DownSince    string   `json:"down_since,omitempty"`
	DownWhy      string   `json:"down_why,omitempty"`
	Mode         string   `json:"mode"`
	Pending      int      `json:"pending"`       // changes the server does not have yet
	PendingBytes int64    `json:"pending_bytes"` // their data
	Stuck        int      `json:"stuck"`         // of those, waiting for the link
	Conflicts    int      `json:"conflicts"`
	Journal      string   `json:"journal,omitempty"`
	Delegations  []string `json:"delegations"`
}

func runStatus(args []string) int {
	c := statusCommand()
	fs := newFlagSet(c)
	asJSON := fs.Bool("json", false, "print one JSON object")
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) != 1 {
		return usageError(c, "want a mount point")
	}
	if !isZXMount(rest[0]) {
		return notZXMount(c, rest[0])
	}
	b, err := os.ReadFile(filepath.Join(rest[0], "Ctl"))
	if mountGone(err) {
		fmt.Fprintf(os.Stderr, "zx status: %s: %v\n", rest[0], errMountGone)
		return exitFail
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "zx status: %v\n", err)
		return exitFail
	}
	st := parseStatus(string(b))
	st.Mountpoint = rest[0]
	if *asJSON {
		json.NewEncoder(os.Stdout).Encode(st)
		return exitOK
	}
	fmt.Printf("%s: %s\n", st.Mountpoint, st.Location)
	link := "up"
	if st.Link == "down" {
		link = "down since " + st.DownSince
		if st.DownWhy != "" {
			link += " (" + st.DownWhy + ")"
		}
	}
	fmt.Printf("link:        %s\n", link)
	fmt.Printf("mode:        %s\n", st.Mode)
	fmt.Printf("pending:     %d changes, %d bytes not on the server yet", st.Pending, st.PendingBytes)
	if st.Stuck > 0 {
		fmt.Printf(", %d waiting for the link", st.Stuck)
	}
	fmt.Println()
	fmt.Printf("conflicts:   %d", st.Conflicts)
	if st.Conflicts > 0 {
		fmt.Printf(" (zx conflicts %s)", st.Mountpoint)
	}
	fmt.Println()
	fmt.Printf("delegations: %d", len(st.Delegations))
	if len(st.Delegations) > 0 {
		fmt.Printf(": %s", strings.Join(st.Delegations, " "))
	}
	fmt.Println()
	return exitOK
}

// parseStatus reads the sections of a mount's control file.
func parseStatus(ctlText string) mountStatus {
	st := mountStatus{Link: "up", Mode: "strict", Delegations: []string{}}
	kind := ""
	for _, l := range strings.Split(ctlText, "\n") {
		l = strings.TrimSpace(l)
		if h, ok := strings.CutPrefix(l, "== "); ok {
			f := strings.Fields(h)
			kind = f[0]
			if kind == "cache" && len(f) > 1 {
				st.Location = f[1]
			}
			continue
		}
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		switch {
		case kind == "mount" && f[0] == "mode" && len(f) > 1:
			st.Mode = f[1]
		case kind == "mount" && f[0] == "pipelined" && len(f) > 1:
			n, _ := strconv.Atoi(f[1])
			st.Pending += n
		case kind == "cache" && f[0] == "writeback":
			st.Pending += field(f, "writeback")
			st.Stuck += field(f, "stuck")
			st.Conflicts = field(f, "conflicts")
		case kind == "cache" && f[0] == "dirty" && len(f) > 1:
			st.PendingBytes, _ = strconv.ParseInt(f[1], 10, 64)
		case kind == "cache" && f[0] == "journal" && len(f) > 1:
			st.Journal = strings.TrimPrefix(l, "journal ")
		case kind == "cache" && f[0] == "delegated" && len(f) > 1:
			st.Delegations = append(st.Delegations, f[1])
		case kind == "client" && f[0] == "link" && len(f) > 1 && f[1] == "down":
			st.Link = "down"
			rest := strings.TrimPrefix(l, "link down since ")
			st.DownSince, st.DownWhy, _ = strings.Cut(rest, ": ")
		}
	}
	return st
}

// field returns the number after word in the fields f, or 0.
func field(f []string, word string) int {
	for i := 0; i+1 < len(f); i++ {
		if f[i] == word {
			n, _ := strconv.Atoi(f[i+1])
			return n
		}
	}
	return 0
}
