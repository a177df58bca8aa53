package auth

import (
	"crypto/ed25519"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testKey(t *testing.T) ed25519.PublicKey {
	t.Helper()
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k.Public().(ed25519.PublicKey)
}

func TestFingerprint(t *testing.T) {
	// The all-zero key: base64 of the SHA-256 of 32 zero bytes.
	fp := Fingerprint(make(ed25519.PublicKey, 32))
	if fp != "SHA256:Zmh6rfhivXdsj8GLjp+OIAiXFIVu4jOzkCpZHQ1fKSU" {
		t.Errorf("fingerprint of the zero key: %s", fp)
	}
	if !ValidFingerprint(fp) || ValidFingerprint("SHA256:abc") || ValidFingerprint(strings.TrimPrefix(fp, "SHA256:")) {
		t.Error("ValidFingerprint")
	}
	k := testKey(t)
	line := FormatPublicKey(k, "me@host")
	f := strings.Fields(line)
	got, err := ParsePublicKey(f[0], f[1])
	if err != nil || !equalKeys(got, k) || f[2] != "me@host" {
		t.Fatalf("public key round trip: %q → %v %v", line, got, err)
	}
	for _, bad := range [][2]string{{"ssh-ed25519", f[1]}, {KeyType, "!!"}, {KeyType, base64.StdEncoding.EncodeToString([]byte("short"))}} {
		if _, err := ParsePublicKey(bad[0], bad[1]); err == nil {
			t.Errorf("ParsePublicKey(%q, %q) succeeded", bad[0], bad[1])
		}
	}
}

func TestKeyFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "id")
	k, created, err := LoadOrCreateKey(path)
	if err != nil || !created {
		t.Fatal(err, created)
	}
	k2, created, err := LoadOrCreateKey(path)
	if err != nil || created || !k.Equal(k2) {
		t.Fatalf("second load: %v %v", err, created)
	}
	if err := WriteKey(path, k); err == nil {
		t.Fatal("WriteKey overwrote a key")
	}
	os.Chmod(path, 0o640)
	if _, err := LoadKey(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("group-readable key: %v", err)
	}
	os.WriteFile(path+"2", []byte("not a key"), 0o600)
	if _, err := LoadKey(path + "2"); err == nil {
		t.Fatal("garbage parsed as a key")
	}
}

func TestParseAuthorized(t *testing.T) {
	k1, k2, k3 := testKey(t), testKey(t), testKey(t)
	file := "# comment\n\n" +
		FormatPublicKey(k1, "alice@laptop") + " user=alice tree=main:rw,src:ro uid=1000 gid=100 expires=2030-01-02\n" +
		"  " + Fingerprint(k2) + " user=share tree=*:rw multiuser uidmap=0:0,1000:2000 gidmap=100:200\n"
	g, problems := ParseAuthorized([]byte(file), "authorized")
	if len(problems) != 0 {
		t.Fatal(problems)
	}
	a := g[Fingerprint(k1)]
	if a == nil || a.User != "alice" || a.Uid != 1000 || a.Gid != 100 || a.MultiUser || a.Line != 3 ||
		!a.Expires.Equal(time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("alice: %+v", a)
	}
	if a.Access("main") != ReadWrite || a.Access("src") != ReadOnly || a.Access("other") != NoAccess {
		t.Errorf("alice's access: %v %v %v", a.Access("main"), a.Access("src"), a.Access("other"))
	}
	s := g[Fingerprint(k2)]
	if s == nil || !s.MultiUser || s.Access("anything") != ReadWrite || s.Uid != -1 {
		t.Fatalf("share: %+v", s)
	}
	// Identities: a single-user key ignores what the request says.
	if id := a.Identity(5, 6); id.Uid != 1000 || id.Gid != 100 {
		t.Errorf("single-user key acting for uid 5: %+v", id)
	}
	for _, tc := range []struct{ cuid, cgid, uid, gid int64 }{
		{1000, 100, 2000, 200}, // mapped
		{1001, 101, 1001, 101}, // as is
		{0, 0, 0, 65534},       // root mapped explicitly; group 0 squashed
		{-1, -1, -1, -1},       // no caller: the key's own (none)
	} {
		if id := s.Identity(tc.cuid, tc.cgid); id.Uid != int(tc.uid) || id.Gid != int(tc.gid) {
			t.Errorf("multi-user key acting for %d:%d: %+v, want %d:%d", tc.cuid, tc.cgid, id, tc.uid, tc.gid)
		}
	}

	for _, bad := range []struct{ line, want string }{
		{"garbage user=x tree=*:rw", "neither a key"},
		{KeyType + " AAAA!!!! user=x tree=*:rw", "not base64"},
		{KeyType + " AAAA user=x tree=*:rw", "3 bytes, want 32"},
		{KeyType, "without its key"},
		{Fingerprint(k1) + " tree=*:rw", "no user="},
		{Fingerprint(k1) + " user=x", "no tree="},
		{Fingerprint(k1) + " user=x tree=main", "want NAME:ro or NAME:rw"},
		{Fingerprint(k1) + " user=x tree=main:rx", "want NAME:ro or NAME:rw"},
		{Fingerprint(k1) + " user=x tree=main:ro tree=main:rw", "granted twice"},
		{Fingerprint(k1) + " user=x tree=*:ro uid=-1", "bad uid"},
		{Fingerprint(k1) + " user=x tree=*:ro expires=tomorrow", "bad expires"},
		{Fingerprint(k1) + " user=x tree=*:ro uidmap=1:2", "multiuser keys only"},
		{Fingerprint(k1) + " user=x tree=*:ro multiuser uidmap=1-2", "bad mapping"},
		{Fingerprint(k1) + " user=x tree=*:ro rw", "want NAME=VALUE"},
		{Fingerprint(k1) + " user=x tree=*:ro colour=red", "unknown option"},
	} {
		// The bad line is the third; the lines around it still grant.
		file := "# keys\n" + Fingerprint(k2) + " user=good tree=*:ro\n" + bad.line + "\n" + FormatPublicKey(k3, "c") + " user=good3 tree=*:rw\n"
		g, problems := ParseAuthorized([]byte(file), "F")
		if len(problems) != 1 || problems[0].Line != 3 || !strings.Contains(problems[0].Error(), bad.want) || !strings.HasPrefix(problems[0].Error(), "F:3: ") {
			t.Errorf("%q: %v; want one problem, line 3, saying %q", bad.line, problems, bad.want)
		}
		if g[Fingerprint(k2)] == nil || g[Fingerprint(k3)] == nil || len(g) != 2 {
			t.Errorf("%q: the good lines around it grant %v", bad.line, g)
		}
		if strings.HasPrefix(bad.line, Fingerprint(k1)) && problems[0].Fingerprint != Fingerprint(k1) {
			t.Errorf("%q: the problem does not name the line's key: %+v", bad.line, problems[0])
		}
	}
	// A key on two lines: neither grants, whether the other is good or bad.
	for _, file := range []string{
		Fingerprint(k1) + " user=x tree=*:ro\n" + FormatPublicKey(k1, "") + " user=y tree=*:ro\n",
		Fingerprint(k1) + " user=x tree=*:ro\n" + Fingerprint(k1) + " user=y colour=red\n",
		Fingerprint(k1) + " user=y colour=red\n" + Fingerprint(k1) + " user=x tree=*:ro\n",
	} {
		g, problems := ParseAuthorized([]byte(file+Fingerprint(k2)+" user=good tree=*:ro\n"), "F")
		if g[Fingerprint(k1)] != nil || g[Fingerprint(k2)] == nil || len(problems) == 0 || problems[len(problems)-1].Line != 2 ||
			!strings.Contains(problems[len(problems)-1].Error(), "also on line 1") || problems[len(problems)-1].Fingerprint != Fingerprint(k1) {
			t.Errorf("%q: grants %v, problems %v; want the key refused, line 2 saying it is also on line 1", file, g, problems)
		}
	}
}

func TestAuthorizedLookup(t *testing.T) {
	k1, k2 := testKey(t), testKey(t)
	path := filepath.Join(t.TempDir(), "authorized")
	os.WriteFile(path, []byte(FormatPublicKey(k1, "")+" user=alice tree=*:rw expires=2030-01-01T00:00:00Z\n"), 0o600)
	a, err := LoadAuthorized(path)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := a.Lookup(k1, time.Date(2029, 12, 31, 23, 59, 59, 0, time.UTC)); err != nil || g.User != "alice" {
		t.Fatalf("before expiry: %v %v", g, err)
	}
	if _, err := a.Lookup(k1, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("at expiry: %v", err)
	}
	if _, err := a.Lookup(k2, time.Now()); err == nil || !strings.Contains(err.Error(), "not authorized") {
		t.Fatalf("unknown key: %v", err)
	}
	// A broken line grants nothing, and the others keep working.
	os.WriteFile(path, []byte("broken line that is longer\n"+FormatPublicKey(k1, "")+" user=alice tree=*:rw\n"+FormatPublicKey(k2, "")+" user=bob tree=main:rx\n"), 0o600)
	if g, err := a.Lookup(k1, time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil || g.User != "alice" {
		t.Fatalf("good line after a broken one: %v %v", g, err)
	}
	if _, err := a.Lookup(k2, time.Now()); err == nil || !strings.Contains(err.Error(), "is on line 3 of the server's authorized keys file, which grants nothing") ||
		!strings.Contains(err.Error(), "want NAME:ro or NAME:rw") {
		t.Fatalf("key on a broken line: %v", err)
	}
	if p := a.Problems(); len(p) != 2 || p[0].Line != 1 || p[1].Line != 3 || !strings.Contains(p[0].Error(), path+":1: ") {
		t.Fatalf("problems: %v", p)
	}
	// A file that cannot be read refuses everyone until it can.
	os.Remove(path)
	if _, err := a.Lookup(k1, time.Date(2029, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil || !strings.Contains(err.Error(), "cannot read its authorized keys") {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := LoadAuthorized(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Fatal("a missing file loaded")
	}
}

func TestKnownHosts(t *testing.T) {
	kh := &KnownHosts{Path: filepath.Join(t.TempDir(), "zx", "known_hosts")}
	if fp, _, err := kh.Lookup("h:1"); fp != "" || err != nil {
		t.Fatalf("empty: %q %v", fp, err)
	}
	fp1, fp2 := Fingerprint(testKey(t)), Fingerprint(testKey(t))
	for _, add := range [][2]string{{"h:1", fp1}, {"h:2", fp2}, {"h:1", fp2}} {
		if err := kh.Add(add[0], add[1]); err != nil {
			t.Fatal(err)
		}
	}
	if fp, line, _ := kh.Lookup("h:1"); fp != fp2 || line != 2 {
		t.Errorf("h:1 pinned to %q on line %d after replacing", fp, line)
	}
	if fp, _, _ := kh.Lookup("h:2"); fp != fp2 {
		t.Errorf("h:2 pinned to %q", fp)
	}
	b, _ := os.ReadFile(kh.Path)
	if strings.Count(string(b), "\n") != 2 {
		t.Errorf("file:\n%s", b)
	}
}

func FuzzParseAuthorized(f *testing.F) {
	f.Add([]byte("# c\n" + FormatPublicKey(make(ed25519.PublicKey, 32), "me@h") + " user=a tree=main:rw,src:ro uid=1 gid=2 expires=2030-01-01\n"))
	f.Add([]byte("SHA256:Zmh6rfhivXdsj8GLjp+OIAiXFIVu4jOzkCpZHQ1fKSU user=s tree=*:rw multiuser uidmap=0:0,1:2 gidmap=3:4\n"))
	f.Add([]byte("SHA256:x user= tree=:\n\n\t#\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		grants, problems := ParseAuthorized(b, "F")
		for _, p := range problems {
			if p.Line < 1 || grants[p.Fingerprint] != nil && p.Fingerprint != "" {
				t.Fatalf("problem %v, and the key is granted: %+v", p, grants[p.Fingerprint])
			}
		}
		for fp, g := range grants {
			if fp != g.Fingerprint || !ValidFingerprint(fp) || g.User == "" || len(g.Trees) == 0 || g.Line < 1 {
				t.Fatalf("accepted a bad grant: %+v", g)
			}
			if !g.MultiUser && (g.UidMap != nil || g.GidMap != nil) {
				t.Fatalf("id maps on a single-user key: %+v", g)
			}
			for _, a := range g.Trees {
				if a != ReadOnly && a != ReadWrite {
					t.Fatalf("access %v", a)
				}
			}
		}
	})
}
