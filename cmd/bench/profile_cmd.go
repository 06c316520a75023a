package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/nodepass/nodepass/bench"
	"github.com/nodepass/nodepass/cmd/bench/internal/pprofreport"
)

const profileUsage = `usage:
  bench profile report [-json FILE] [-top N] [-markdown] PROFILE...
  bench profile diff [-base-json FILE] [-json FILE] [-top N] BASE NEW
  bench profile check [bench flags] BASELINE_DIR

Reads the CPU profiles bench -cpuprofile-dir writes (DIR/MODEL.cpu.pprof).

report: for each profile, the CPU sampled; its share in the scrypt work (by its
  label nodepass.verify=scrypt), the module's own code (the cache-miss request
  path by its label nodepass.verify=request, cache, httpauth, verify), TLS/HTTP,
  GC, the rest of the runtime and everything else; scrypt CPU per joined node
  and in units of one scrypt measured in the same process; the top functions
  flat and cumulative. -markdown prints one table for all profiles instead.
diff: each of those figures for BASE and NEW and its change.
check: runs bench with the flags given and -cpuprofile-dir, then fails (exit 1)
  when less than 95% of the scrypt work carries its label, when a model spends
  more than 1.25 × one scrypt of CPU per joined node, when
  the module's own code takes more than 2% of the sampled CPU, or when a share
  or per-node figure moved the wrong way from the profile of the same model in
  BASELINE_DIR by more than the noise (see profiles/README.md). The new
  profiles are kept in a temporary directory when the check fails.

The run's figures (joined nodes, for per-node values) come from the -json
file, by default herd.json in the profile's directory.
`

// runProfileCmd is bench profile ...; it returns the exit status.
func runProfileCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, profileUsage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	var err error
	switch args[0] {
	case "report":
		err = profileReport(args[1:], stdout)
	case "diff":
		err = profileDiff(args[1:], stdout)
	case "check":
		var failed bool
		failed, err = profileCheck(ctx, args[1:], stdout, stderr)
		if err == nil && failed {
			return 1
		}
	default:
		err = usageError{fmt.Sprintf("profile: unknown subcommand %q: want report, diff or check", args[0])}
	}
	var ue usageError
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stderr, profileUsage)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "bench: %v\nRun bench profile -h for the usage.\n", err)
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}

func newProfileFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("profile "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func parseProfileFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{fmt.Sprintf("profile %s: %v", strings.TrimPrefix(fs.Name(), "profile "), err)}
	}
	return nil
}

func profileReport(args []string, stdout io.Writer) error {
	fs := newProfileFlags("report")
	jsonPath := fs.String("json", "", "the run's results (default: herd.json beside each profile)")
	top := fs.Int("top", 10, "how many functions to list, flat and cumulative")
	markdown := fs.Bool("markdown", false, "one Markdown table for all profiles")
	if err := parseProfileFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageError{"profile report: no profile given"}
	}
	var reports []*pprofreport.Report
	for _, path := range fs.Args() {
		r, err := pprofreport.Load(path, *jsonPath)
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

func profileDiff(args []string, stdout io.Writer) error {
	fs := newProfileFlags("diff")
	baseJSON := fs.String("base-json", "", "BASE's run results (default: herd.json beside BASE)")
	newJSON := fs.String("json", "", "NEW's run results (default: herd.json beside NEW)")
	top := fs.Int("top", 10, "compare the flat share of the top functions of either")
	if err := parseProfileFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageError{fmt.Sprintf("profile diff: want two profiles, BASE and NEW; got %d", fs.NArg())}
	}
	base, err := pprofreport.Load(fs.Arg(0), *baseJSON)
	if err != nil {
		return err
	}
	cur, err := pprofreport.Load(fs.Arg(1), *newJSON)
	if err != nil {
		return err
	}
	pprofreport.WriteDiff(stdout, base, cur, *top)
	return nil
}

// checkOwnFlags are the bench flags profile check sets itself.
var checkOwnFlags = []string{"cpuprofile-dir", "json", "plot", "replot", "worker"}

// profileCheck runs the herd with profiles and checks them; failed says
// whether a check failed, err whether the checks could not be made.
func profileCheck(ctx context.Context, args []string, stdout, stderr io.Writer) (failed bool, err error) {
	if len(args) == 0 || strings.HasPrefix(args[len(args)-1], "-") {
		if len(args) > 0 && (args[len(args)-1] == "-h" || args[len(args)-1] == "-help") {
			return false, flag.ErrHelp
		}
		return false, usageError{"profile check: the last argument must be the baseline directory (e.g. profiles/ci)"}
	}
	baseDir, benchArgs := args[len(args)-1], args[:len(args)-1]
	c, err := parseFlags(benchArgs, io.Discard)
	if err != nil {
		return false, usageError{"profile check: " + err.Error()}
	}
	for _, a := range benchArgs {
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && slices.Contains(checkOwnFlags, name) {
			return false, usageError{fmt.Sprintf("profile check: -%s is set by the check itself", name)}
		}
	}
	if _, err := os.Stat(filepath.Join(baseDir, "herd.json")); err != nil {
		return false, fmt.Errorf("profile check: the baseline: %w", err)
	}

	dir, err := os.MkdirTemp("", "nodepass-profile-check-")
	if err != nil {
		return false, err
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(dir)
		}
	}()
	runArgs := append(append([]string{}, benchArgs...), "-cpuprofile-dir", dir, "-json", filepath.Join(dir, "herd.json"))
	if code := run(ctx, runArgs, strings.NewReader(""), stdout, stderr); code != 0 {
		keep = true
		return false, fmt.Errorf("profile check: the run failed (exit %d); its files are in %s", code, dir)
	}
	fmt.Fprintln(stdout)
	for _, model := range c.models {
		cur, err := pprofreport.Load(filepath.Join(dir, model+".cpu.pprof"), filepath.Join(dir, "herd.json"))
		if err != nil {
			keep = true
			return false, err
		}
		base, err := pprofreport.Load(filepath.Join(baseDir, model+".cpu.pprof"), filepath.Join(baseDir, "herd.json"))
		if err != nil {
			return false, fmt.Errorf("profile check: the baseline: %w", err)
		}
		if err := sameScenario(base.Run, cur.Run); err != nil {
			return false, fmt.Errorf("profile check: %s in %s: %w; make the baseline again with: go run ./cmd/bench %s -cpuprofile-dir %s -json %s",
				model, baseDir, err, strings.Join(benchArgs, " "), baseDir, filepath.Join(baseDir, "herd.json"))
		}
		pprofreport.WriteText(stdout, cur, 10)
		fmt.Fprintln(stdout)
		fmt.Fprintf(stdout, "against the baseline %s:\n", base.File)
		pprofreport.WriteDiff(stdout, base, cur, 0)
		fmt.Fprintln(stdout)
		verdicts := pprofreport.Check(cur, base, pprofreport.DefaultLimits)
		fmt.Fprintf(stdout, "profile check of %s:\n", model)
		for _, v := range verdicts {
			fmt.Fprintf(stdout, "  %v\n", v)
		}
		if pprofreport.Failed(verdicts) {
			failed = true
		}
	}
	if failed {
		keep = true
		fmt.Fprintf(stdout, "\nprofile check: FAILED. This run's profiles are kept in %s (go tool pprof -top %s);\n"+
			"compare with: go run ./cmd/bench profile diff %s %s\n",
			dir, filepath.Join(dir, c.models[0]+".cpu.pprof"), filepath.Join(baseDir, c.models[0]+".cpu.pprof"), filepath.Join(dir, c.models[0]+".cpu.pprof"))
		return true, nil
	}
	fmt.Fprintln(stdout, "\nprofile check: ok")
	return false, nil
}

// sameScenario says how the baseline's run differs from this one, in the
// figures that change what a profile shows.
func sameScenario(base, cur *bench.Result) error {
	if base == nil || cur == nil {
		return errors.New("no run figures")
	}
	type sc struct {
		nodes, logN int
		mode        bench.Mode
		agent       string
		servers     int
	}
	b := sc{base.Nodes, base.LogN, base.Mode, base.Agent, base.Servers}
	n := sc{cur.Nodes, cur.LogN, cur.Mode, cur.Agent, cur.Servers}
	if b != n {
		return fmt.Errorf("the baseline ran %d nodes, logN %d, %s mode, %s agents, %d server(s); this run %d nodes, logN %d, %s mode, %s agents, %d server(s)",
			b.nodes, b.logN, b.mode, b.agent, b.servers, n.nodes, n.logN, n.mode, n.agent, n.servers)
	}
	return nil
}
