package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
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
