package atomicfile

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/nodepass/nodepass/internal/testexec"
)

// The child process: a test binary started with these variables set
// writes as childWrite says and stops for good at the step numbered
// childStop, after printing "at <step>". The parent kills it there.
const (
	childOp   = "NODEPASS_ATOMICFILE_CHILD_OP"
	childPath = "NODEPASS_ATOMICFILE_CHILD_PATH"
	childStop = "NODEPASS_ATOMICFILE_CHILD_STOP"
)

func TestMain(m *testing.M) {
	if op := os.Getenv(childOp); op != "" {
		stop, _ := strconv.Atoi(os.Getenv(childStop))
		n := 0
		step = func(name string) {
			if n++; n == stop {
				fmt.Println("at", name)
				time.Sleep(time.Hour) // until killed
			}
		}
		if err := childWrite(op, os.Getenv(childPath)); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("done")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// newContent is what the child writes: large enough that a torn write
// would show.
var newContent = bytes.Repeat([]byte("new content\n"), 1<<16)

// caFiles are what the child writes with CreateDir: a CA directory's.
var caFiles = []File{
	{"server-ca.crt", newContent, 0o644}, {"server-ca.key", newContent[:1000], 0o600},
	{"client-ca.crt", newContent, 0o644}, {"client-ca.key", newContent[:2000], 0o600},
}

func childWrite(op, path string) error {
	switch op {
	case "WriteFile":
		return WriteFile(path, newContent, 0o600)
	case "CreateFile":
		return CreateFile(path, newContent, 0o600)
	case "CreateDir":
		return CreateDir(path, caFiles)
	}
	return fmt.Errorf("unknown op %q", op)
}

// TestKilledAtEachStep runs a writer process and kills it (SIGKILL) at
// each step of the write in turn: after creating the temporary file,
// after writing it, after syncing it, after the rename (or link), after
// syncing the directory, and for a directory after each of its files.
// Every time, what a restart reads is the old content or the new one:
// never a torn or empty file, never a directory with some files missing.
func TestKilledAtEachStep(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGKILL")
	}
	old := []byte("old content\n")
	for _, c := range []struct {
		op    string
		setup func(t *testing.T, path string)      // the state before the write
		check func(t *testing.T, path string) bool // whether it holds the new content; fails on anything else
		steps int                                  // at least
	}{
		{"WriteFile", func(t *testing.T, path string) {
			if err := WriteFile(path, old, 0o600); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, path string) bool {
			b, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(b, old) && !bytes.Equal(b, newContent) {
				t.Fatalf("%s holds %d bytes (%v), neither the old content nor the new", path, len(b), err)
			}
			return bytes.Equal(b, newContent)
		}, 5},
		{"CreateFile", func(*testing.T, string) {}, func(t *testing.T, path string) bool {
			b, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				return false
			}
			if err != nil || !bytes.Equal(b, newContent) {
				t.Fatalf("%s holds %d bytes (%v), not the new content", path, len(b), err)
			}
			return true
		}, 5},
		{"CreateDir", func(*testing.T, string) {}, func(t *testing.T, path string) bool {
			ents, err := os.ReadDir(path)
			if errors.Is(err, fs.ErrNotExist) {
				return false
			}
			if err != nil || len(ents) != len(caFiles) {
				t.Fatalf("%s holds %d files (%v), want %d", path, len(ents), err, len(caFiles))
			}
			for _, f := range caFiles {
				if b, err := os.ReadFile(filepath.Join(path, f.Name)); err != nil || !bytes.Equal(b, f.Data) {
					t.Fatalf("%s holds %d bytes (%v), not its content", f.Name, len(b), err)
				}
			}
			return true
		}, 4*4 + 3},
	} {
		t.Run(c.op, func(t *testing.T) {
			var visited []string
			for stop := 1; ; stop++ {
				path := filepath.Join(t.TempDir(), "target")
				c.setup(t, path)
				at, finished := runChild(t, c.op, path, stop)
				isNew := c.check(t, path)
				if finished {
					if !isNew {
						t.Fatalf("the write finished and %s does not hold the new content", path)
					}
					break
				}
				visited = append(visited, at)
				// Once renamed (or linked) into place, the new content
				// stays.
				if slices.Contains(visited, "rename") || slices.Contains(visited, "link") {
					if !isNew {
						t.Fatalf("killed after %v: the old content is back", visited)
					}
				}
			}
			if len(visited) < c.steps {
				t.Fatalf("the writer stopped at %d steps (%v), want at least %d", len(visited), visited, c.steps)
			}
			t.Logf("killed at each of %v", visited)
		})
	}
}

// runChild starts the writer of op on path, stopping at step number stop,
// and kills it there. It returns the step's name, or finished when the
// write ended before that step.
func runChild(t *testing.T, op, path string, stop int) (at string, finished bool) {
	t.Helper()
	testexec.SkipUnlessExecutable(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childOp+"="+op, childPath+"="+path, childStop+"="+strconv.Itoa(stop))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	line := ""
	if sc.Scan() {
		line = sc.Text()
	}
	if name, ok := strings.CutPrefix(line, "at "); ok {
		cmd.Process.Kill()
		cmd.Wait()
		return name, false
	}
	if err := cmd.Wait(); err != nil || line != "done" {
		t.Fatalf("the writer said %q and ended with %v", line, err)
	}
	return "", true
}

// TestStepsInOrder: the data is synced before the name that points to it
// is written, and the directory after.
func TestStepsInOrder(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("directories are not synced")
	}
	var steps []string
	step = func(name string) { steps = append(steps, name) }
	defer func() { step = nil }()
	dir := t.TempDir()
	for _, c := range []struct {
		op   string
		want []string
	}{
		{"WriteFile", []string{"create", "write", "sync", "rename", "sync directory"}},
		{"CreateFile", []string{"create", "write", "sync", "link", "sync directory"}},
		{"CreateDir", []string{
			"create", "write", "sync", "write server-ca.crt", "create", "write", "sync", "write server-ca.key",
			"create", "write", "sync", "write client-ca.crt", "create", "write", "sync", "write client-ca.key",
			"sync directory", "rename", "sync directory"}},
	} {
		steps = nil
		if err := childWrite(c.op, filepath.Join(dir, c.op)); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(steps, c.want) {
			t.Errorf("%s: steps %q, want %q", c.op, steps, c.want)
		}
	}
}

// TestCreateRaces: CreateFile and CreateDir fail with fs.ErrExist where
// the target exists, and leave it and no temporary file.
func TestCreateRaces(t *testing.T) {
	dir := t.TempDir()
	file, sub := filepath.Join(dir, "f"), filepath.Join(dir, "d")
	if err := CreateFile(file, []byte("first"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(file, []byte("second"), 0o600); !errors.Is(err, fs.ErrExist) {
		t.Errorf("CreateFile over a file: %v, want fs.ErrExist", err)
	}
	if err := CreateDir(sub, []File{{"a", []byte("first"), 0o600}}); err != nil {
		t.Fatal(err)
	}
	if err := CreateDir(sub, []File{{"a", []byte("second"), 0o600}}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("CreateDir over a directory: %v, want fs.ErrExist", err)
	}
	for _, p := range []string{file, filepath.Join(sub, "a")} {
		if b, _ := os.ReadFile(p); string(b) != "first" {
			t.Errorf("%s holds %q, want the first", p, b)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%d entries left, want 2: %v", len(ents), ents)
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
}

// TestWriteFileMakesDirectories: missing directories are made, mode 0700.
func TestWriteFileMakesDirectories(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a", "b", "f")
	if err := WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Dir(path)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v (%v), want 0644", fi.Mode().Perm(), err)
	}
}

// TestLongNames: a target whose name has the most bytes a file name may
// have (255 on Linux and most file systems) is written and created: the
// temporary's name is bounded, not the target's plus a suffix. The
// example server names a node's file after its secret, up to 254 bytes.
// A name of more is refused with the system's error, which says so.
func TestLongNames(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("a path, not a name, is limited")
	}
	dir := t.TempDir()
	long := strings.Repeat("n", 63) + strings.Repeat("é", 96) // 255 bytes, a two-byte character across tempBase
	if len(long) != 255 {
		t.Fatalf("name of %d bytes", len(long))
	}
	for _, c := range []struct {
		op    string
		write func(path string) error
	}{
		{"WriteFile", func(path string) error { return WriteFile(path, []byte("x"), 0o600) }},
		{"CreateFile", func(path string) error { return CreateFile(path, []byte("x"), 0o600) }},
		{"CreateDir", func(path string) error { return CreateDir(path, []File{{"a", []byte("x"), 0o600}}) }},
	} {
		sub := filepath.Join(dir, c.op)
		if err := os.Mkdir(sub, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := c.write(filepath.Join(sub, long)); err != nil {
			t.Errorf("%s of a %d-byte name: %v", c.op, len(long), err)
		}
		if ents, _ := os.ReadDir(sub); len(ents) != 1 || ents[0].Name() != long {
			t.Errorf("%s left %v, want the target alone", c.op, ents)
		}
		if err := c.write(filepath.Join(sub, long+"y")); !errors.Is(err, syscall.ENAMETOOLONG) {
			t.Errorf("%s of a %d-byte name: %v, want ENAMETOOLONG", c.op, len(long)+1, err)
		}
	}
	if p := tempPrefix(long); len(p) > 1+tempBase+5 || !utf8.ValidString(p) {
		t.Errorf("temporary prefix %q: %d bytes, want at most %d and whole characters", p, len(p), 1+tempBase+5)
	}
}
