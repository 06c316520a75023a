package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// command is a run function with one flag, as an example command has.
func command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	timeout := fs.Duration("timeout", time.Second, "how long to wait")
	if err := Parse(fs, args, stdout); err != nil {
		return err
	}
	if *timeout < 0 {
		return Usagef("-timeout %v: want 0 or more", *timeout)
	}
	if *timeout == 0 {
		return errors.New("demo: nothing to do")
	}
	return nil
}

func TestMain(t *testing.T) {
	for _, c := range []struct {
		args         []string
		code         int
		stdout, line string // line: stderr's one line, "" for none
	}{
		{nil, 0, "", ""},
		{[]string{"-h"}, 0, "Usage of demo:", ""},
		{[]string{"-help"}, 0, "Usage of demo:", ""},
		{[]string{"-version"}, 0, "demo (devel) go", ""},
		{[]string{"-nope"}, ExitUsage, "", "demo: flag provided but not defined: -nope"},
		{[]string{"-timeout", "soon"}, ExitUsage, "", `demo: invalid value "soon" for flag -timeout: parse error`},
		{[]string{"-timeout", "-1s"}, ExitUsage, "", "demo: -timeout -1s: want 0 or more"},
		{[]string{"extra"}, ExitUsage, "", `demo: unexpected arguments ["extra"]`},
		{[]string{"-timeout", "0"}, ExitFailure, "", "demo: nothing to do"},
	} {
		var stdout, stderr bytes.Buffer
		code := Main(t.Context(), "demo", c.args, &stdout, &stderr, command)
		lines := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
		if code != c.code || !strings.HasPrefix(stdout.String(), c.stdout) ||
			(c.line == "" && stderr.Len() > 0) || (c.line != "" && (len(lines) != 1 || lines[0] != c.line)) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q..., stderr %q",
				c.args, code, stdout.String(), stderr.String(), c.code, c.stdout, c.line)
		}
	}
}

// A constructor's error is a usage error unless a file or directory it
// names cannot be used.
func TestUsageUnlessIO(t *testing.T) {
	_, readErr := os.ReadFile(filepath.Join(t.TempDir(), "missing"))
	for _, c := range []struct {
		err   error
		usage bool
	}{
		{errors.New("agent: program \"k8s\" is not a lower-case name"), true},
		{fmt.Errorf("agent: reading the node password: %w", readErr), false},
		{fmt.Errorf("agent: %w", &os.LinkError{Op: "rename", Old: "a", New: "b", Err: fs.ErrPermission}), false},
		{os.NewSyscallError("gethostname", fs.ErrInvalid), false},
	} {
		var usage *UsageError
		if got := UsageUnlessIO(c.err); errors.As(got, &usage) != c.usage || !errors.Is(got, c.err) {
			t.Errorf("UsageUnlessIO(%v) = %#v; want a usage error: %v", c.err, got, c.usage)
		}
	}
	if UsageUnlessIO(nil) != nil {
		t.Error("UsageUnlessIO(nil) is not nil")
	}
}
