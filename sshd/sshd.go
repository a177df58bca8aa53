// Package sshd runs a private OpenSSH server on a loopback port, for the
// tests of the ssh transport and for the sshfs benchmarks: its own host
// key, one client key it authorizes, and an ssh_config that reaches it
// with that key and checks its host key, so that nothing in the user's or
// the system's ssh configuration is read or changed.
//
// It needs /usr/sbin/sshd, ssh and ssh-keygen (Debian: openssh-server).
// sshd runs as a child of the caller, and Close kills it and every process
// its sessions started.
package sshd

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Program is the sshd binary.
const Program = "/usr/sbin/sshd"

// Server is a running sshd.
type Server struct {
	Port       int    // on 127.0.0.1
	Dir        string // keys and configuration files
	ClientKey  string // private key file the server authorizes
	KnownHosts string // known_hosts file holding the server's host key
	// Config is an ssh_config file: "ssh -F Config 127.0.0.1" logs in as
	// the current user with ClientKey, checking the host key against
	// KnownHosts, without prompting.
	Config string
	User   string // the user sessions run as (the current user)

	cmd    *exec.Cmd
	done   chan struct{}
	log    logBuffer
	closed sync.Once
}

// Available reports what is missing to run a private sshd, or nil.
func Available() error {
	var missing []string
	for _, t := range []string{Program, "ssh", "ssh-keygen"} {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s (apt-get install -y openssh-server openssh-client)", strings.Join(missing, ", "))
	}
	return nil
}

// Start starts sshd on a free loopback port, with its keys and
// configuration in dir (which must exist and which the caller removes),
// and waits until it answers. The caller must Close it.
func Start(ctx context.Context, dir string) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	s := &Server{
		Dir:        dir,
		ClientKey:  filepath.Join(dir, "id_ed25519"),
		KnownHosts: filepath.Join(dir, "known_hosts"),
		Config:     filepath.Join(dir, "ssh_config"),
	}
	hostKey := filepath.Join(dir, "host_ed25519")
	for _, k := range []string{hostKey, s.ClientKey} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "zx-sshd", "-f", k).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(s.ClientKey + ".pub")
	if err != nil {
		return nil, err
	}
	auth := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(auth, pub, 0o600); err != nil {
		return nil, err
	}
	hostPub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		return nil, err
	}
	// sshd refuses to start, and each session fails, without its
	// privilege separation directory, which the package's service unit
	// normally creates. It is left in place: other private sshds (other
	// tests, benchmarks) may be using it.
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, fmt.Errorf("sshd's privilege separation directory: %v", err)
	}
	sftp := "internal-sftp"
	for _, p := range []string{"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/libexec/sftp-server"} {
		if _, err := os.Stat(p); err == nil {
			sftp = p
			break
		}
	}
	if s.Port, err = freePort(); err != nil {
		return nil, err
	}
	u, err := currentUser()
	if err != nil {
		return nil, err
	}
	s.User = u
	conf := filepath.Join(dir, "sshd_config")
	// MaxStartups: sshd's default (10:30:100) drops new connections at
	// random once ten are unauthenticated, which a loaded test machine
	// reaches ("kex_exchange_identification: Connection reset by peer").
	text := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile none
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
StrictModes no
MaxStartups 1000
LogLevel ERROR
Subsystem sftp %s
`, s.Port, hostKey, auth, sftp)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return nil, err
	}
	known := fmt.Sprintf("[127.0.0.1]:%d %s", s.Port, hostPub)
	if err := os.WriteFile(s.KnownHosts, []byte(known), 0o600); err != nil {
		return nil, err
	}
	client := fmt.Sprintf(`Host *
	HostName 127.0.0.1
	Port %d
	User %s
	IdentityFile %s
	IdentitiesOnly yes
	UserKnownHostsFile %s
	GlobalKnownHostsFile /dev/null
	StrictHostKeyChecking yes
	BatchMode yes
	LogLevel ERROR
`, s.Port, s.User, s.ClientKey, s.KnownHosts)
	if err := os.WriteFile(s.Config, []byte(client), 0o600); err != nil {
		return nil, err
	}
	if out, err := exec.Command(Program, "-t", "-f", conf).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("sshd -t: %v: %s", err, out)
	}
	s.cmd = exec.Command(Program, "-D", "-e", "-f", conf)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting sshd: %v", err)
	}
	s.done = make(chan struct{})
	go func() { s.cmd.Wait(); close(s.done) }()
	// Wait until it answers with its banner.
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-s.done:
			s.Close()
			return nil, fmt.Errorf("sshd exited: %s", s.Log())
		default:
		}
		c, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err == nil {
			c.SetReadDeadline(time.Now().Add(2 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "SSH-") {
				return s, nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			s.Close()
			return nil, fmt.Errorf("sshd did not come up on port %d: %s", s.Port, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Addr returns the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port)) }

// Pid returns sshd's process id: its sessions are its descendants.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Log returns what sshd wrote (the last 64 KiB at most).
func (s *Server) Log() string { return strings.TrimSpace(s.log.String()) }

// Close stops sshd and kills every process its sessions started (they
// run in sessions of their own, out of reach of a process group signal),
// and waits for sshd to exit.
func (s *Server) Close() error {
	s.closed.Do(func() {
		if s.cmd != nil && s.cmd.Process != nil {
			// Collect the tree before killing: orphans are re-parented.
			KillTree(s.cmd.Process.Pid)
			select {
			case <-s.done:
			case <-time.After(5 * time.Second):
			}
		}
	})
	return nil
}

// KillTree kills pid and every process descended from it, by id, with
// SIGKILL. The tree is read first, from the kernel's lists of children
// (/proc/PID/task/TID/children): sshd's sessions call setsid, so a signal
// to a process group would miss them; and reading every process's stat
// instead would hang behind any process on the machine stuck on a FUSE
// mount.
func KillTree(pid int) {
	if pid <= 0 {
		return
	}
	pids := []int{pid}
	for i := 0; i < len(pids); i++ {
		pids = append(pids, Children(pids[i])...)
	}
	for _, p := range pids {
		syscall.Kill(p, syscall.SIGKILL)
	}
}

// Children returns the processes whose parent is pid.
func Children(pid int) []int {
	var out []int
	files, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "children"))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, c := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(c); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// freePort returns a TCP port on loopback that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func currentUser() (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", fmt.Errorf("who am I: %v", err)
	}
	return u.Username, nil
}

// logBuffer keeps the first 64 KiB written to it.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 64<<10 {
		l.b.Write(p)
	}
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
