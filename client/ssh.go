package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/zxfs/zx"
	"github.com/zxfs/zx/mux"
)

// SSHOptions say how to reach an ssh:// location.
type SSHOptions struct {
	// Command is the ssh program and any arguments to put before the ones
	// zx adds, e.g. ["ssh", "-F", "/path/ssh_config"]. Empty: ["ssh"].
	Command []string
	// RemoteZX is the command that runs zx on the remote host, as the
	// remote shell reads it. Empty: "zx".
	RemoteZX string
	// Batch makes ssh fail instead of asking for a password, a passphrase
	// or a host key confirmation (BatchMode=yes), and puts it in a process
	// group of its own. Without it, ssh stays in the caller's group, so
	// that it can prompt on the terminal, and gets the terminal's Ctrl-C.
	Batch bool
	// Stderr, if set, also gets everything ssh and the remote zx write to
	// their standard error.
	Stderr io.Writer
}

// SSHArgs returns the command line that starts the server of t: the ssh
// program, its options, the destination, and the remote command, which
// the remote user's shell runs.
func SSHArgs(t SSHTarget, o SSHOptions) []string {
	args := append([]string(nil), o.Command...)
	if len(args) == 0 {
		args = []string{"ssh"}
	}
	// No X11 or agent forwarding, no terminal (the channel must be
	// 8-bit clean), no port forwardings from the user's configuration.
	args = append(args, "-x", "-a", "-T", "-o", "ClearAllForwardings=yes")
	if o.Batch {
		args = append(args, "-o", "BatchMode=yes")
	}
	if t.Port != "" {
		args = append(args, "-p", t.Port)
	}
	if t.User != "" {
		args = append(args, "-l", t.User)
	}
	remote := o.RemoteZX
	if remote == "" {
		remote = "zx"
	}
	return append(args, "--", t.Host, remote+" serve --stdio "+ShellQuote(t.Dir))
}

// ShellQuote quotes s for a POSIX shell.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+=:,@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// SplitCommand splits a command line such as the value of ZX_SSH into
// words at blanks; single and double quotes group words and a backslash
// escapes the next character, as in a shell, but nothing is expanded.
func SplitCommand(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	var quote rune
	esc := false
	for _, r := range s {
		switch {
		case esc:
			w.WriteRune(r)
			esc = false
		case r == '\\' && quote != '\'':
			esc, inWord = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				w.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 || esc {
		return nil, fmt.Errorf("unterminated quote or escape in %q", s)
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

// DialSSH starts the server of an ssh:// location: it runs ssh to start
// "zx serve --stdio DIR" on the remote host and speaks zx over ssh's
// standard input and output. It returns as soon as ssh has started, so
// the first request travels with the connection's set-up; if ssh fails
// (the host cannot be reached, authentication fails, zx is not installed
// there), requests fail with an error that quotes what ssh said. Closing
// the connection ends ssh and reaps it. With opts.Reconnect, a lost
// connection runs ssh again.
func DialSSH(ctx context.Context, t SSHTarget, so SSHOptions, opts Options) (*Conn, error) {
	if t.Host == "" {
		return nil, zx.E(zx.ErrInvalid, "dial", "", "ssh location without a host")
	}
	nc, err := startSSH(ctx, t, so)
	if err != nil {
		return nil, err
	}
	if opts.Reconnect && opts.Redial == nil {
		opts.Redial = func(ctx context.Context) (net.Conn, error) { return startSSH(ctx, t, so) }
	}
	c := NewConn(nc, opts)
	c.addr = nc.RemoteAddr().String()
	return c, nil
}

// startSSH runs ssh to start the server of t, and returns its standard
// input and output as a connection.
func startSSH(ctx context.Context, t SSHTarget, so SSHOptions) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, zx.Errorf("dial", t.Host, err)
	}
	args := SSHArgs(t, so)
	cmd := exec.Command(args[0], args[1:]...)
	// In batch mode, its own process group, so that a Ctrl-C at the
	// terminal reaches us and we end ssh in order. Otherwise it stays in
	// ours, the terminal's foreground group: ssh asks for passwords and
	// passphrases on the terminal, and a background group reading it
	// would be stopped. Killed if we die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: so.Batch, Pdeathsig: syscall.SIGTERM}
	sc := &sshConn{name: args[0], done: make(chan struct{})}
	var errw io.Writer = &sc.stderr
	if so.Stderr != nil {
		errw = io.MultiWriter(&sc.stderr, so.Stderr)
	}
	cmd.Stderr = errw
	// Our own pipes rather than cmd's: Wait would close cmd's as soon as
	// ssh exits, and lose what it wrote last (a goaway, say).
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, zx.Errorf("dial", t.Host, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, zx.Errorf("dial", t.Host, err)
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	err = cmd.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, zx.E(zx.ErrNotExist, "dial", t.Host, fmt.Sprintf("cannot run %s: %v (install OpenSSH's client, or name the program with --ssh-command or ZX_SSH)", args[0], err))
	}
	sc.cmd = cmd
	go func() {
		sc.waitErr = cmd.Wait()
		close(sc.done)
	}()
	sc.Conn = mux.Pipe(outR, inW, "ssh", Location{SSH: t}.sshAddr())
	return sc, nil
}

// sshConn is ssh's standard input and output as a net.Conn.
type sshConn struct {
	net.Conn
	name    string
	cmd     *exec.Cmd
	stderr  tailBuffer
	done    chan struct{} // closed when ssh has exited
	waitErr error         // ssh's exit status, once done
	once    sync.Once
}

// Read returns, at the end of ssh's output, why ssh ended.
func (c *sshConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err == io.EOF {
		select {
		case <-c.done:
		case <-time.After(2 * time.Second):
			return n, err
		}
		return n, c.exitError()
	}
	return n, err
}

// exitError describes how ssh ended, with the last of what it (and the
// remote zx) said.
func (c *sshConn) exitError() error {
	msg := strings.TrimSpace(c.stderr.String())
	status := "exited"
	var ee *exec.ExitError
	if errors.As(c.waitErr, &ee) {
		status = ee.String()
		if ee.ExitCode() == 127 {
			msg += " (is zx installed on the remote host, and in the PATH of its non-interactive shell? name it with --remote-zx)"
		}
	}
	if msg == "" {
		return fmt.Errorf("%s %s", c.name, status)
	}
	return fmt.Errorf("%s %s: %s", c.name, status, msg)
}

// Close closes ssh's input, so that the remote zx sees the end of the
// connection and exits, and with it ssh; ssh is killed if it has not
// exited within two seconds. It returns once ssh is reaped.
func (c *sshConn) Close() error {
	c.once.Do(func() {
		c.Conn.Close()
		select {
		case <-c.done:
			return
		case <-time.After(2 * time.Second):
		}
		c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
			return
		case <-time.After(time.Second):
		}
		if c.cmd.SysProcAttr.Setpgid {
			unix.Kill(-c.cmd.Process.Pid, unix.SIGKILL)
		} else {
			c.cmd.Process.Kill()
		}
		<-c.done
	})
	return nil
}

// tailBuffer keeps the last few KiB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

const tailMax = 4 << 10

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > tailMax {
		t.b = append(t.b[:0], t.b[len(t.b)-tailMax:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
