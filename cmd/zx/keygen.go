package main

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"os/user"
	"strings"

	"github.com/zxfs/zx/auth"
)

func keygenCommand() command {
	return command{
		name:    "keygen",
		args:    "[-f FILE] [-C COMMENT] [--print] [--json]",
		summary: "make the key a client authenticates with",
		help: "Keygen makes an ed25519 key for this user, writes it to FILE (mode 0600; default " +
			"$XDG_CONFIG_HOME/zx/id_ed25519, or ~/.config/zx/id_ed25519, which every zx command uses) " +
			"and its public key to FILE.pub, and prints the public key and its fingerprint. " +
			"Send the public key line to the administrator of a server, who adds it to the server's " +
			"authorized file with a user name and the trees you may use (see docs/security.md). " +
			"It never overwrites a key: with --print it prints the public key of the existing one instead " +
			"(the line of FILE.pub, with its comment, unless -C gives another).",
		exit:    "0 success; 1 failure (a key exists already at FILE: it is never overwritten); 2 bad usage.",
		example: "zx keygen\nzx keygen --print --json",
		run:     runKeygen,
	}
}

func runKeygen(args []string) int {
	c := keygenCommand()
	fs := newFlagSet(c)
	file := fs.String("f", "", "key `FILE` (default $XDG_CONFIG_HOME/zx/id_ed25519)")
	comment := fs.String("C", "", "`COMMENT` on the public key line, e.g. you@laptop (default USER@HOST)")
	show := fs.Bool("print", false, "print the public key of the existing key; make none")
	asJSON := fs.Bool("json", false, `print {"publicKey": .., "fingerprint": .., "file": ..}`)
	rest, code := parseFlags(fs, c, args)
	if code >= 0 {
		return code
	}
	if len(rest) > 0 {
		return usageError(c, "unexpected arguments: "+rest[0])
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "zx keygen: "+format+"\n", a...)
		return exitFail
	}
	path := *file
	if path == "" {
		var err error
		if path, err = configPath(defaultKeyFile); err != nil {
			return fail("%v", err)
		}
	}
	givenComment := *comment != ""
	if !givenComment {
		host, _ := os.Hostname()
		name := os.Getenv("USER")
		if name == "" {
			if u, err := user.Current(); err == nil {
				name = u.Username
			} else {
				name = fmt.Sprint(os.Getuid())
			}
		}
		*comment = name + "@" + host
	}
	var key ed25519.PrivateKey
	var err error
	if *show {
		if key, err = auth.LoadKey(path); err != nil {
			if errors.Is(err, iofs.ErrNotExist) {
				return fail("no key %s: make one with zx keygen", path)
			}
			return fail("%v", err)
		}
	} else {
		if _, err := os.Lstat(path); err == nil {
			return fail("%s exists: zx keygen never replaces a key (print its public key with zx keygen --print, or remove it first)", path)
		}
		if key, err = auth.GenerateKey(); err != nil {
			return fail("%v", err)
		}
		if err := auth.WriteKey(path, key); err != nil {
			return fail("writing %s: %v", path, err)
		}
	}
	pub := key.Public().(ed25519.PublicKey)
	line := auth.FormatPublicKey(pub, *comment)
	if *show && !givenComment {
		// The line keygen wrote, with its comment, if FILE.pub is still
		// that key's.
		if b, err := os.ReadFile(path + ".pub"); err == nil {
			l := strings.TrimSpace(string(b))
			if f := strings.Fields(l); len(f) >= 2 && strings.Join(f[:2], " ") == auth.FormatPublicKey(pub, "") {
				line = l
			}
		}
	}
	if !*show {
		if err := os.WriteFile(path+".pub", []byte(line+"\n"), 0o644); err != nil {
			return fail("writing %s.pub: %v", path, err)
		}
	}
	fp := auth.Fingerprint(pub)
	if *asJSON {
		b, _ := json.Marshal(map[string]string{"publicKey": line, "fingerprint": fp, "file": path})
		fmt.Printf("%s\n", b)
		return exitOK
	}
	if !*show {
		fmt.Fprintf(os.Stderr, "zx keygen: wrote %s and %s.pub\n", path, path)
	}
	fmt.Println(line)
	fmt.Println(fp)
	return exitOK
}
