package client_test

import (
	"slices"
	"testing"

	"github.com/zxfs/zx/client"
)

func TestSSHArgs(t *testing.T) {
	loc, err := client.ParseLocation("ssh://nemo@example.org:2222/srv/my proj//src")
	if err != nil {
		t.Fatal(err)
	}
	got := client.SSHArgs(loc.SSH, client.SSHOptions{Command: []string{"ssh", "-F", "cfg"}, RemoteZX: "/opt/zx", Batch: true})
	want := []string{"ssh", "-F", "cfg", "-x", "-a", "-T", "-o", "ClearAllForwardings=yes", "-o", "BatchMode=yes",
		"-p", "2222", "-l", "nemo", "--", "example.org", "/opt/zx serve --stdio '/srv/my proj'"}
	if !slices.Equal(got, want) {
		t.Errorf("SSHArgs:\n got %q\nwant %q", got, want)
	}
	loc, _ = client.ParseLocation("ssh://host")
	got = client.SSHArgs(loc.SSH, client.SSHOptions{})
	want = []string{"ssh", "-x", "-a", "-T", "-o", "ClearAllForwardings=yes", "--", "host", "zx serve --stdio ."}
	if !slices.Equal(got, want) {
		t.Errorf("SSHArgs of ssh://host:\n got %q\nwant %q", got, want)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/srv/proj": "/srv/proj",
		"":          "''",
		"a b":       "'a b'",
		"it's":      `'it'\''s'`,
		"$(rm -rf)": "'$(rm -rf)'",
		"~/x":       "'~/x'",
	} {
		if got := client.ShellQuote(in); got != want {
			t.Errorf("ShellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestSplitCommand(t *testing.T) {
	for in, want := range map[string][]string{
		"ssh":                           {"ssh"},
		"  ssh  -F  /a/cfg ":            {"ssh", "-F", "/a/cfg"},
		`ssh -o "ProxyJump a b" -i 'k'`: {"ssh", "-o", "ProxyJump a b", "-i", "k"},
		`ssh a\ b ""`:                   {"ssh", "a b", ""},
		"":                              nil,
	} {
		got, err := client.SplitCommand(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("SplitCommand(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{`ssh "x`, `ssh 'x`, `ssh x\`} {
		if _, err := client.SplitCommand(bad); err == nil {
			t.Errorf("SplitCommand(%q): no error", bad)
		}
	}
}
