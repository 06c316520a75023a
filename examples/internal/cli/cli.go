// Package cli is what the example commands share, so that they behave
// alike: how they parse flags, answer -h and -version, and end.
//
// A command's run function parses its flags with [Parse] and returns an
// error; [Main] turns that error into one line on stderr and an exit
// code. -h and -version print to stdout and exit 0. A wrong flag or value
// prints one line and exits 2. A failure prints one line and exits 1.
//
// A flag value is wrong when it is wrong in itself: a port of 99999, an
// unknown program, a malformed token. A file or directory that a right
// flag names but that cannot be read or written (a missing -token-file,
// a -data-dir without permission) is a failure, not a usage error: the
// command line was right, the machine was not. [UsageUnlessIO] applies
// that rule to an error that may be either.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// Exit codes of the example commands.
const (
	ExitFailure = 1 // the command ran and failed
	ExitUsage   = 2 // a wrong flag or flag value
)

// ErrDone is returned by [Parse] when it has answered -h or -version. The
// command should return it; [Main] exits 0.
var ErrDone = errors.New("cli: done")

// UsageError is a wrong flag or flag value. [Main] prints it and exits
// [ExitUsage].
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a [UsageError] with the formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{fmt.Errorf(format, args...)}
}

// UsageUnlessIO returns err as a [UsageError], unless it comes from a
// file or directory that cannot be used (it wraps an *fs.PathError,
// *os.LinkError or *os.SyscallError): that is a failure, returned as it
// is. For an error of a constructor that checks its options and also
// reads files, such as agent.New.
func UsageUnlessIO(err error) error {
	var pathErr *fs.PathError
	var linkErr *os.LinkError
	var sysErr *os.SyscallError
	if err == nil || errors.As(err, &pathErr) || errors.As(err, &linkErr) || errors.As(err, &sysErr) {
		return err
	}
	return &UsageError{err}
}

// Parse parses args into fs, which must not have a flag named version:
// Parse adds it. With -h or -help it prints fs's usage to stdout, with
// -version the command's name and [Version], and returns [ErrDone]. A
// wrong flag, a wrong value or a positional argument is a [UsageError]
// whose message is one line; Parse prints nothing then.
func Parse(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	version := fs.Bool("version", false, "print the version and exit")
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return ErrDone
	case err != nil:
		return &UsageError{err}
	case fs.NArg() > 0:
		return Usagef("unexpected arguments %q", fs.Args())
	case *version:
		fmt.Fprintln(stdout, fs.Name(), Version())
		return ErrDone
	}
	return nil
}

// Version is the version of the module the running binary was built
// from ("(devel)" when built inside its own repository) and the Go
// release that built it, for example "v0.1.0 go1.26.8".
func Version() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	return v + " " + runtime.Version()
}

// Main runs run with the command's arguments and returns its exit code: 0
// when run returns nil or [ErrDone], [ExitUsage] for a [UsageError] and
// [ExitFailure] for any other error. An error is printed to stderr as
// one line that starts with name.
func Main(ctx context.Context, name string, args []string, stdout, stderr io.Writer,
	run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) int {
	err := run(ctx, args, stdout, stderr)
	if err == nil || errors.Is(err, ErrDone) {
		return 0
	}
	msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", " ")
	if !strings.HasPrefix(msg, name+":") {
		msg = name + ": " + msg
	}
	fmt.Fprintln(stderr, msg)
	var usage *UsageError
	if errors.As(err, &usage) {
		return ExitUsage
	}
	return ExitFailure
}
