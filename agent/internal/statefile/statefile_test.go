package statefile

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "etc", "k3s-agent-load-balancer.json")
	want := Servers{Default: "10.0.0.1:9345", Addresses: []string{"10.0.0.1:9345", "10.0.0.2:9345"}}
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Default != want.Default || !slices.Equal(got.Addresses, want.Addresses) {
		t.Fatalf("Load = %+v, want %+v", got, want)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	// No temporary file is left beside it.
	ents, _ := os.ReadDir(filepath.Dir(path))
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want 1: %v", len(ents), ents)
	}
}

func TestLoadMissing(t *testing.T) {
	s, err := Load(filepath.Join(t.TempDir(), "none.json"))
	if err != nil || s.Default != "" || len(s.Addresses) != 0 {
		t.Fatalf("Load(missing) = %+v, %v; want empty, nil", s, err)
	}
}

func TestLoadCorrupt(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"truncated": `{"ServerURL":"a:1","ServerAddresses":["a:1",`,
		"not json":  "\x00\x01garbage",
		"too large": `{"ServerURL":"` + strings.Repeat("a", maxFile) + `"}`,
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Load error %v, want ErrCorrupt", name, err)
		}
	}
}

// An address that cannot be dialed is left out and reported, with
// CheckAddress's reason; the others are kept.
func TestLoadDropsBadAddresses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	body := `{"ServerURL":"https://10.0.0.1:9345","ServerAddresses":["10.0.0.1:9345","","10.0.0.2","10.0.0.3:","10.0.0.4:0","10.0.0.5:abc","10.0.0.6:99999",":9345","10.0.0.7:9345"]}`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"10.0.0.1:9345", "10.0.0.7:9345"}; !slices.Equal(s.Addresses, want) {
		t.Errorf("Addresses %q, want %q", s.Addresses, want)
	}
	if want := []string{"", "10.0.0.2", "10.0.0.3:", "10.0.0.4:0", "10.0.0.5:abc", "10.0.0.6:99999", ":9345"}; !slices.Equal(s.Dropped, want) {
		t.Errorf("Dropped %q, want %q", s.Dropped, want)
	}
}

func TestCheckAddress(t *testing.T) {
	for _, ok := range []string{"10.0.0.1:1", "10.0.0.1:65535", "[2001:db8::1]:9345", "server.example:6443"} {
		if err := CheckAddress(ok); err != nil {
			t.Errorf("CheckAddress(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "10.0.0.1", "10.0.0.1:", "10.0.0.1:0", "10.0.0.1:abc", "10.0.0.1:65536", "10.0.0.1:99999", ":9345", "2001:db8::1:9345"} {
		if err := CheckAddress(bad); err == nil {
			t.Errorf("CheckAddress(%q) accepted it", bad)
		}
	}
}

// A write that fails leaves the old file whole and no temporary file.
func TestWriteFileKeepsOldOnFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A directory where the file should go makes the rename fail.
	bad := filepath.Join(dir, "d")
	if err := os.MkdirAll(filepath.Join(bad, "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(bad, []byte("new"), 0o600); err == nil {
		t.Fatal("WriteFile over a non-empty directory succeeded")
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Fatalf("old file holds %q", b)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}
