package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/nodepass/nodepass/bench"
)

// prepareProfileDir makes the -cpuprofile-dir directory, if any, and
// removes the profiles an earlier run left there for the models about to
// run, so that a model whose worker dies without writing its profiles is
// reported without them rather than with another run's.
func prepareProfileDir(c *config) error {
	if c.cpuprofileDir == "" {
		return nil
	}
	if err := os.MkdirAll(c.cpuprofileDir, 0o755); err != nil {
		return err
	}
	for _, m := range c.models {
		for _, kind := range []string{".cpu.pprof", ".heap.pprof"} {
			if err := os.Remove(filepath.Join(c.cpuprofileDir, m+kind)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// writeProfileDir finishes a -cpuprofile-dir run: the run's JSON as
// DIR/herd.json (beside the profiles, where cmd/profile looks for it) and
// DIR/meta.json: how the files were made (command, commit, Go, machine,
// date, load, scenario, lower bound). profiles/README.md says how to read
// them.
func writeProfileDir(c *config, args []string, h *bench.Herd, results []*bench.Result) error {
	dir := c.cpuprofileDir
	jsonPath := filepath.Join(dir, "herd.json")
	if c.jsonPath == "" || filepath.Clean(c.jsonPath) != filepath.Clean(jsonPath) {
		if err := writeResults(jsonPath, results); err != nil {
			return err
		}
	}
	commit, tree := gitState(dir)
	cpu, osName := machine()
	meta := struct {
		Command, Commit, WorkingTree, Go, Machine, OS, Date, LoadAverage, Scenario string
		LowerBoundS                                                                float64 `json:"lower_bound_s"`
		Workers                                                                    int
		CPUProfileHz                                                               int `json:"cpu_profile_hz"`
	}{
		Command: commandLine(args), Commit: commit, WorkingTree: tree, Go: runtime.Version(),
		Machine: cpu, OS: osName, Date: time.Now().UTC().Format("2006-01-02 15:04 UTC"),
		LoadAverage: loadAverage(), Scenario: describeScenario(c.sc),
		LowerBoundS: h.LowerBound.Seconds(), Workers: h.Workers, CPUProfileHz: 100,
	}
	b, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "meta.json"), append(b, '\n'), 0o644)
}

// commandLine is the command that made this run, for a reader to run again.
func commandLine(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = shellQuote(a)
	}
	return strings.TrimSpace("go run ./cmd/bench " + strings.Join(quoted, " "))
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=,:+@%", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// gitState returns the commit checked out and whether the working tree
// differs from it, outside dir (where this run writes), or "unknown"
// without git.
func gitState(dir string) (commit, tree string) {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "unknown (git rev-parse HEAD failed)", ""
	}
	commit = strings.TrimSpace(string(out))
	args := []string{"status", "--porcelain", "--untracked-files=no"}
	if rel, err := filepath.Rel(".", dir); err == nil && !filepath.IsAbs(rel) && !strings.HasPrefix(rel, "..") {
		args = append(args, "--", ".", ":(exclude)"+rel)
	}
	out, err = exec.Command("git", args...).Output()
	switch {
	case err != nil:
		tree = "unknown"
	case len(bytes.TrimSpace(out)) == 0:
		tree = "clean"
	default:
		var files []string
		for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
			files = append(files, line[min(3, len(line)):]) // "XY path"
		}
		tree = fmt.Sprintf("%d file(s) changed and not committed: %s", len(files), strings.Join(files, ", "))
	}
	return commit, tree
}

// machine describes this computer: CPU model, cores, memory and OS.
func machine() (cpu, osName string) {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	cpu = fmt.Sprintf("%s, %d logical CPUs, GOMAXPROCS %d", model, runtime.NumCPU(), runtime.GOMAXPROCS(0))
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			cpu += fmt.Sprintf(", %.0f GiB memory", float64(kb)/(1<<20))
		}
	}
	osName = runtime.GOOS + "/" + runtime.GOARCH
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
				osName += ", " + strings.Trim(v, `"`)
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		osName += ", kernel " + strings.TrimSpace(string(b))
	}
	return cpu, osName
}

// writeResults writes results as the JSON array -json documents, one
// model's object per line: indenting their per-node arrays would double
// the file.
func writeResults(path string, results []*bench.Result) error {
	b := []byte("[\n")
	for i, r := range results {
		o, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("encoding results: %w", err)
		}
		b = append(b, o...)
		if i < len(results)-1 {
			b = append(b, ',')
		}
		b = append(b, '\n')
	}
	return os.WriteFile(path, append(b, "]\n"...), 0o644)
}
