// Command modcheck shows that nodepass's modules can be required by a
// project outside this repository, at the versions k3s pins.
//
// It makes a module proxy of the workspace's modules as they are in the
// tree (the file layout of `go help goproxy`, zips made by
// golang.org/x/mod/zip), all at the version the nested modules require of
// the core. In a directory outside the repository it then builds and runs
// testdata/consumer, a module that requires the library modules, and
// builds the commands of the other modules, with GOWORK=off and the proxy
// first in GOPROXY. Last, it checks that the consumer's build list keeps
// every module of [pins] at or below k3s's version.
//
//	cd tools/modcheck && GOWORK=off go run . -repo ../..          # make module-check
//	cd tools/modcheck && GOWORK=off go run . -repo ../.. -set-version v0.2.0
//
// -set-version makes every module of the workspace require the others at
// that version (the first step of a release, see ADOPTING.md).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

// pins are the versions k3s pins (by replace in its go.mod, at 469d009f,
// 2026-08-20). A consumer of nodepass's library modules must not select a
// newer one: under minimal version selection it would raise k3s's.
var pins = map[string]string{
	"golang.org/x/crypto":                 "v0.47.0",
	"golang.org/x/sys":                    "v0.40.0",
	"k8s.io/client-go":                    "v0.36.3",
	"k8s.io/api":                          "v0.36.3",
	"k8s.io/apimachinery":                 "v0.36.3",
	"github.com/prometheus/client_golang": "v1.23.2",
	"github.com/hashicorp/golang-lru/v2":  "v2.0.7",
}

// core is the module the others require; its version names the release.
const core = "github.com/nodepass/nodepass"

// libraries are the modules a server imports (the consumer requires them);
// the other modules of the workspace hold commands, built by path.
var libraries = []string{core, core + "/kube", core + "/prom"}

// commands are built from outside as `go build PATH` in a module that
// requires their modules.
var commands = []string{core + "/examples/agent", core + "/examples/server", core + "/cmd/bench", core + "/cmd/profile"}

type mod struct {
	path, dir string
	file      *modfile.File
	data      []byte
}

func main() {
	repo := flag.String("repo", "../..", "the repository's root `dir` (where go.work is)")
	setVersion := flag.String("set-version", "", "make the workspace's modules require each other at this `version`, then stop")
	keep := flag.Bool("keep", false, "keep the temporary directory (its path is printed)")
	pinsOnly := flag.Bool("pins", false, "only check that the workspace's own build list keeps k3s's pins (make test), then stop")
	flag.Parse()
	var err error
	if *pinsOnly {
		err = workspacePins(*repo)
	} else {
		err = run(*repo, *setVersion, *keep)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "modcheck:", err)
		os.Exit(1)
	}
}

func run(repo, setVersion string, keep bool) error {
	mods, err := workspace(repo)
	if err != nil {
		return err
	}
	if setVersion != "" {
		return requireAt(mods, setVersion)
	}
	version, err := release(mods)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "modcheck-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("modcheck: keeping", tmp)
	} else {
		defer os.RemoveAll(tmp)
	}
	proxy := filepath.Join(tmp, "proxy")
	for _, m := range mods {
		if err := publish(proxy, m, version); err != nil {
			return err
		}
	}
	fmt.Printf("modcheck: %d modules at %s in a proxy at %s\n", len(mods), version, proxy)
	env := goEnv(proxy)

	consumer := filepath.Join(tmp, "consumer")
	src, err := os.ReadFile("testdata/consumer/main.go")
	if err != nil {
		return err
	}
	if err := writeModule(consumer, mods[0].file.Go.Version, libraries, version, src); err != nil {
		return err
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", "consumer", "."}} {
		if err := goCmd(consumer, env, args...); err != nil {
			return err
		}
	}
	if err := command(consumer, env, filepath.Join(consumer, "consumer")); err != nil {
		return err
	}
	if err := checkPins("the consumer", consumer, env, true); err != nil {
		return err
	}

	cmds := filepath.Join(tmp, "commands")
	var cmdMods []string
	for _, m := range mods {
		if !slices.Contains(libraries, m.path) {
			cmdMods = append(cmdMods, m.path)
		}
	}
	if err := writeModule(cmds, mods[0].file.Go.Version, append(libraries, cmdMods...), version, nil); err != nil {
		return err
	}
	if err := goCmd(cmds, env, append([]string{"build", "-o", os.DevNull}, commands...)...); err != nil {
		return err
	}
	fmt.Printf("modcheck: built %s from outside the repository\n", strings.Join(commands, ", "))
	return nil
}

// workspace reads go.work's modules, the core first.
func workspace(repo string) ([]mod, error) {
	data, err := os.ReadFile(filepath.Join(repo, "go.work"))
	if err != nil {
		return nil, err
	}
	wf, err := modfile.ParseWork("go.work", data, nil)
	if err != nil {
		return nil, err
	}
	var mods []mod
	for _, u := range wf.Use {
		dir := filepath.Join(repo, u.Path)
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err != nil {
			return nil, err
		}
		f, err := modfile.Parse(filepath.Join(dir, "go.mod"), data, nil)
		if err != nil {
			return nil, err
		}
		mods = append(mods, mod{path: f.Module.Mod.Path, dir: dir, file: f, data: data})
	}
	sort.SliceStable(mods, func(i, j int) bool { return mods[i].path == core && mods[j].path != core })
	if len(mods) == 0 || mods[0].path != core {
		return nil, fmt.Errorf("go.work does not use %s", core)
	}
	return mods, nil
}

// release is the version every other module requires of the core; they
// must agree.
func release(mods []mod) (string, error) {
	version := ""
	for _, m := range mods[1:] {
		for _, r := range m.file.Require {
			if !strings.HasPrefix(r.Mod.Path, core) {
				continue
			}
			if version == "" {
				version = r.Mod.Version
			}
			if r.Mod.Version != version {
				return "", fmt.Errorf("%s requires %s %s, another module %s: run with -set-version", m.path, r.Mod.Path, r.Mod.Version, version)
			}
		}
	}
	if !semver.IsValid(version) || version == "v0.0.0" {
		return "", fmt.Errorf("the modules require the core at %q: a release version is needed (-set-version)", version)
	}
	return version, nil
}

// requireAt rewrites every go.mod of the workspace to require the others
// at version, keeping its replace directives (Go ignores them in a
// dependency; inside the repository they point at the tree).
func requireAt(mods []mod, version string) error {
	if !semver.IsValid(version) || semver.Canonical(version) != version {
		return fmt.Errorf("-set-version %q: want a canonical semantic version such as v0.2.0", version)
	}
	for _, m := range mods {
		changed := false
		for _, r := range m.file.Require {
			if strings.HasPrefix(r.Mod.Path, core) && r.Mod.Version != version {
				if err := m.file.AddRequire(r.Mod.Path, version); err != nil {
					return err
				}
				changed = true
			}
		}
		if !changed {
			continue
		}
		out, err := m.file.Format()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(m.dir, "go.mod"), out, 0o644); err != nil {
			return err
		}
		fmt.Printf("modcheck: %s requires the others at %s\n", m.path, version)
	}
	return nil
}

// publish writes m at version into the proxy directory: list, .info, .mod
// and .zip, as a module proxy serves them. The zip holds the module's
// directory without its nested modules, as `go mod download` would get it
// from a tag.
func publish(proxy string, m mod, version string) error {
	escaped, err := module.EscapePath(m.path)
	if err != nil {
		return err
	}
	dir := filepath.Join(proxy, escaped, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	info, err := json.Marshal(struct{ Version, Time string }{version, time.Now().UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	files := map[string][]byte{"list": []byte(version + "\n"), version + ".info": info, version + ".mod": m.data}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	f, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		return err
	}
	err = zip.CreateFromDir(f, module.Version{Path: m.path, Version: version}, m.dir)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("zip of %s: %w", m.path, err)
	}
	return nil
}

// writeModule makes a module example.com/<dir's name> in dir that
// requires paths at version, with main.go holding src (none when nil).
func writeModule(dir, goVersion string, paths []string, version string, src []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "module example.com/%s\n\ngo %s\n\nrequire (\n", filepath.Base(dir), goVersion)
	for _, p := range paths {
		fmt.Fprintf(&b, "\t%s %s\n", p, version)
	}
	b.WriteString(")\n")
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	if src == nil {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644)
}

// goEnv is the environment of the go commands run outside the repository:
// no workspace, the proxy first, no checksum database for the modules
// only it serves.
func goEnv(proxy string) []string {
	upstream := os.Getenv("GOPROXY")
	if upstream == "" {
		upstream = "https://proxy.golang.org,direct"
	}
	env := os.Environ()
	return append(env,
		"GOWORK=off",
		"GOPROXY=file://"+filepath.ToSlash(proxy)+","+upstream,
		"GONOSUMDB="+core,
		"GOFLAGS=-mod=mod",
	)
}

func goCmd(dir string, env []string, args ...string) error {
	return command(dir, env, "go", args...)
}

func command(dir string, env []string, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s in %s: %w", name, strings.Join(args, " "), dir, err)
	}
	return nil
}

// workspacePins checks each module of the workspace on its own (GOWORK=off,
// its replace directives in effect), as make test does.
func workspacePins(repo string) error {
	mods, err := workspace(repo)
	if err != nil {
		return err
	}
	env := append(os.Environ(), "GOWORK=off")
	var errs []error
	for _, m := range mods {
		errs = append(errs, checkPins(m.path, m.dir, env, false))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("modcheck: the %d modules of the workspace select nothing above k3s's pins\n", len(mods))
	return nil
}

// checkPins lists the build list of the module in dir (called name) and
// fails if it selects any module of pins above k3s's version; verbose, it
// prints each pinned module's version.
func checkPins(name, dir string, env []string, verbose bool) error {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Version}}", "all")
	cmd.Dir, cmd.Env, cmd.Stderr = dir, env, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list -m all: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, version, _ := strings.Cut(line, " ")
		pin, ok := pins[path]
		if !ok {
			continue
		}
		if verbose {
			fmt.Printf("modcheck: %s selects %s %s (k3s pins %s)\n", name, path, version, pin)
		}
		if semver.Compare(version, pin) > 0 {
			errs = append(errs, fmt.Errorf("%s: %s %s is newer than k3s's %s", name, path, version, pin))
		}
	}
	return errors.Join(errs...)
}
