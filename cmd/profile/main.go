// Command profile reads the CPU profiles `go run ./cmd/bench
// -cpuprofile-dir DIR` writes (DIR/MODEL.cpu.pprof, with the run's
// figures in DIR/herd.json) and says where each model's CPU went, or
// checks it against a baseline:
//
//	go run ./cmd/profile report profiles/nodepass.cpu.pprof
//	go run ./cmd/profile report -markdown profiles/*.cpu.pprof
//	go run ./cmd/profile diff profiles/ci/nodepass.cpu.pprof new/nodepass.cpu.pprof
//	go run ./cmd/profile check profiles/ci new
//
// make profile-check runs the herd of profiles/ci/herd.json with profiles
// into a temporary directory, then profile check against profiles/ci.
// profiles/README.md says what the check enforces and why.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/nodepass/nodepass/bench"
	"github.com/nodepass/nodepass/cmd/internal/buildinfo"
	"github.com/nodepass/nodepass/cmd/internal/pprofreport"
)

const usage = `usage:
  profile -version
  profile report [-top N] [-markdown] PROFILE...
  profile diff [-top N] BASE NEW
  profile check BASELINE_DIR NEW_DIR

Reads the CPU profiles cmd/bench -cpuprofile-dir writes (DIR/MODEL.cpu.pprof).

report: for each profile, the CPU sampled; its share in the scrypt work (by its
  label nodepass.verify=scrypt), the module's own code (the cache-miss request
  path by its label nodepass.verify=request, cache, httpauth, verify), TLS/HTTP,
  GC, the rest of the runtime and everything else; scrypt CPU per joined node
  and in units of one scrypt in the same run; the top functions flat and
  cumulative. -markdown prints one table for all profiles instead.
diff: each of those figures for BASE and NEW and its change.
check: for each model profiled in NEW_DIR, fails (exit 1) when less than 95% of
  the scrypt work carries its label, when a model spends more than 1.25 × one
  scrypt of CPU per joined node, when the module's own code takes more than 4%
  of the sampled CPU, or when a share or per-node figure moved the wrong way
  from the profile of the same model in BASELINE_DIR by more than the noise
  (see profiles/README.md). Both directories must hold the same scenario.

The run's figures (joined nodes, for per-node values) come from herd.json
in the profile's directory.
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// usageError is a command line that does not parse.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var err error
	switch args[0] {
	case "-version", "--version", "version":
		fmt.Fprintln(stdout, "profile", buildinfo.Version())
		return 0
	case "report":
		err = report(args[1:], stdout)
	case "diff":
		err = diff(args[1:], stdout)
	case "check":
		err = check(args[1:], stdout)
	default:
		err = usageError{fmt.Sprintf("unknown subcommand %q: want report, diff or check", args[0])}
	}
	var ue usageError
	switch {
	case errors.Is(err, errCheckFailed): // check said so on stdout
		return 1
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stderr, usage)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "profile: %v\nRun profile -h for the usage.\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "profile: %v\n", err)
		return 1
	}
	return 0
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{fmt.Sprintf("%s: %v", fs.Name(), err)}
	}
	return nil
}

func report(args []string, stdout io.Writer) error {
	fs := newFlags("report")
	top := fs.Int("top", 10, "how many functions to list, flat and cumulative")
	markdown := fs.Bool("markdown", false, "one Markdown table for all profiles")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{"report: no profile given"}
	}
	var reports []*pprofreport.Report
	for _, path := range fs.Args() {
		r, err := pprofreport.Load(path, "")
		if err != nil {
			return err
		}
		reports = append(reports, r)
	}
	if *markdown {
		pprofreport.WriteMarkdown(stdout, reports)
		return nil
	}
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		pprofreport.WriteText(stdout, r, *top)
	}
	return nil
}

func diff(args []string, stdout io.Writer) error {
	fs := newFlags("diff")
	top := fs.Int("top", 10, "compare the flat share of the top functions of either")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError{fmt.Sprintf("diff: want two profiles, BASE and NEW; got %d", fs.NArg())}
	}
	base, err := pprofreport.Load(fs.Arg(0), "")
	if err != nil {
		return err
	}
	cur, err := pprofreport.Load(fs.Arg(1), "")
	if err != nil {
		return err
	}
	pprofreport.WriteDiff(stdout, base, cur, *top)
	return nil
}

// errCheckFailed is check's error when a check failed.
var errCheckFailed = errors.New("profile check failed")

// check checks the profiles in newDir against those in baseDir.
func check(args []string, stdout io.Writer) error {
	fs := newFlags("check")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError{fmt.Sprintf("check: want BASELINE_DIR and NEW_DIR; got %d arguments", fs.NArg())}
	}
	baseDir, newDir, failed := fs.Arg(0), fs.Arg(1), false
	profiles, err := filepath.Glob(filepath.Join(newDir, "*.cpu.pprof"))
	if err != nil || len(profiles) == 0 {
		return fmt.Errorf("check: no MODEL.cpu.pprof in %s", newDir)
	}
	for _, path := range profiles {
		model := strings.TrimSuffix(filepath.Base(path), ".cpu.pprof")
		cur, err := pprofreport.Load(path, filepath.Join(newDir, "herd.json"))
		if err != nil {
			return err
		}
		base, err := pprofreport.Load(filepath.Join(baseDir, model+".cpu.pprof"), filepath.Join(baseDir, "herd.json"))
		if err != nil {
			return fmt.Errorf("check: the baseline: %w", err)
		}
		if err := sameScenario(base.Run, cur.Run); err != nil {
			return fmt.Errorf("check: %s in %s: %w; make the baseline again (see profiles/README.md)", model, baseDir, err)
		}
		pprofreport.WriteText(stdout, cur, 10)
		fmt.Fprintf(stdout, "\nagainst the baseline %s:\n", base.File)
		pprofreport.WriteDiff(stdout, base, cur, 0)
		verdicts := pprofreport.Check(cur, base, pprofreport.DefaultLimits)
		fmt.Fprintf(stdout, "\nprofile check of %s:\n", model)
		for _, v := range verdicts {
			fmt.Fprintf(stdout, "  %v\n", v)
		}
		failed = failed || pprofreport.Failed(verdicts)
	}
	if failed {
		fmt.Fprintf(stdout, "\nprofile check: FAILED; compare with: go run ./cmd/profile diff %s %s\n",
			filepath.Join(baseDir, filepath.Base(profiles[0])), profiles[0])
		return errCheckFailed
	}
	fmt.Fprintln(stdout, "\nprofile check: ok")
	return nil
}

// sameScenario says how the baseline's run differs from this one, in the
// figures that change what a profile shows.
func sameScenario(base, cur *bench.Result) error {
	if base == nil || cur == nil {
		return errors.New("no run figures")
	}
	desc := func(r *bench.Result) string {
		return fmt.Sprintf("%d nodes, logN %d, %s mode, %s agents, %d server(s)", r.Nodes, r.LogN, r.Mode, r.Agent, r.Servers)
	}
	if b, n := desc(base), desc(cur); b != n {
		return fmt.Errorf("the baseline ran %s; this run %s", b, n)
	}
	return nil
}
