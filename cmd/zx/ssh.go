package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/zxfs/zx/client"
)

// sshFlags say how ssh:// locations are reached, for every command that
// takes locations.
type sshFlags struct {
	command  string
	remoteZX string
}

func (o *sshFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&o.command, "ssh-command", envOr("ZX_SSH", "ssh"),
		"the ssh `CMD` (program and options) for ssh:// locations, split at blanks (env ZX_SSH)")
	fs.StringVar(&o.remoteZX, "remote-zx", envOr("ZX_REMOTE_ZX", "zx"),
		"the `CMD` that runs zx on the host of an ssh:// location (env ZX_REMOTE_ZX)")
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// dial connects to the server of loc: over TCP for zx://, through ssh for
// ssh://.
func dial(ctx context.Context, loc client.Location, so sshFlags, opts client.Options) (*client.Conn, error) {
	if !loc.IsSSH() {
		c, err := client.Dial(ctx, loc.Addr, opts)
		if err != nil {
			return nil, dialError(loc.Addr, err)
		}
		return c, nil
	}
	words, err := client.SplitCommand(so.command)
	if err != nil {
		return nil, fmt.Errorf("--ssh-command: %v", err)
	}
	if len(words) == 0 {
		return nil, fmt.Errorf("--ssh-command is empty")
	}
	c, err := client.DialSSH(ctx, loc.SSH, client.SSHOptions{
		Command:  words,
		RemoteZX: so.remoteZX,
		// Prompts (passphrases, unknown host keys) only where someone
		// can answer them; a script or a mount fails instead of hanging.
		Batch: !isTerminal(os.Stdin),
	}, opts)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to %s: %v", loc.Addr, err)
	}
	return c, nil
}
