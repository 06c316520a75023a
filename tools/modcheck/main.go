// Command modcheck shows that nodepass's modules can be required by a
// project outside this repository, and that requiring them raises none of
// k3s's requirements.
//
// It makes a module proxy of the workspace's modules as they are in the
// tree (the file layout of `go help goproxy`, zips made by
// golang.org/x/mod/zip), all at the version the nested modules require of
// the core. In a directory outside the repository it then builds and runs
// testdata/consumer, a module that requires the library modules, and
// builds the commands of the other modules, with GOWORK=off and the proxy
// first in GOPROXY. Last, it runs the two checks that -pins runs alone.
//
//	cd tools/modcheck && GOWORK=off go run . -repo ../..          # make module-check
//	cd tools/modcheck && GOWORK=off go run . -repo ../.. -pins    # make pins (in make test)
//	cd tools/modcheck && GOWORK=off go run . -repo ../.. -proxy /tmp/nodepass-proxy
//	cd tools/modcheck && GOWORK=off go run . -repo ../.. -set-version v0.2.0
//
// The checks start from k3s's go.mod (testdata/k3s-469d009f.go.mod, see
// [k3sGoMod]). The first: a module that requires the core, kube and prom
// selects no module k3s requires at a version above k3s's (see
// [checkRises]). The second: no module of the workspace selects a module
// of [pinned] above the version k3s builds.
//
// -proxy writes the proxy into a directory, prints the version it
// serves the tree at (a version of the tree's own, see [treeVersion]),
// and stops: with GOPROXY=file://DIR a project can require the modules
// before they are published (ADOPTING.md). -set-version makes every
// module of the workspace require the others at that version (the first
// step of a release, see ADOPTING.md).
package main

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
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
	"golang.org/x/mod/sumdb/dirhash"
	"golang.org/x/mod/zip"
)

// k3sGoMod is k3s's go.mod at the commit the checks hold nodepass to.
const k3sGoMod = "testdata/k3s-469d009f.go.mod"

// pinned are the modules whose packages nodepass imports and whose
// version k3s fixes. A module of the workspace must not select a newer
// one than k3s builds ([k3s.built]): nodepass would be tested against
// code k3s does not have.
var pinned = []string{
	"golang.org/x/crypto",
	"golang.org/x/sys",
	"golang.org/x/time",
	"k8s.io/client-go",
	"k8s.io/api",
	"k8s.io/apimachinery",
	"github.com/prometheus/client_golang",
	"github.com/hashicorp/golang-lru/v2",
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
	proxyDir := flag.String("proxy", "", "write the module proxy of the tree into `dir` (new, empty, or written by -proxy before), print its version, then stop")
	pinsOnly := flag.Bool("pins", false, "only run the checks against k3s's go.mod, from the tree (make test), then stop")
	flag.Parse()
	var err error
	switch {
	case *pinsOnly:
		err = checkTree(*repo)
	case *proxyDir != "":
		var version string
		if version, err = writeProxy(*repo, *proxyDir); err == nil {
			fmt.Println(version)
		}
	default:
		err = run(*repo, *setVersion, *keep)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "modcheck:", err)
		os.Exit(1)
	}
}

func run(repo, setVersion string, keep bool) error {
	if setVersion != "" {
		mods, err := workspace(repo)
		if err != nil {
			return err
		}
		return requireAt(mods, setVersion)
	}
	k, err := loadK3s()
	if err != nil {
		return err
	}
	mods, version, err := atRelease(repo)
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
	if err := publishAll(os.Stdout, proxy, mods, version); err != nil {
		return err
	}
	env, err := goEnv(proxy, tmp)
	if err != nil {
		return err
	}

	consumer := filepath.Join(tmp, "consumer")
	src, err := os.ReadFile("testdata/consumer/main.go")
	if err != nil {
		return err
	}
	if err := writeModule(consumer, mods[0].file.Go.Version, libraries, version, nil, src); err != nil {
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
	if err := checkPins("the consumer", consumer, env, k, true); err != nil {
		return err
	}
	adopter := filepath.Join(tmp, "adopter")
	if err := writeModule(adopter, mods[0].file.Go.Version, libraries, version, nil, nil); err != nil {
		return err
	}
	if err := checkRises(adopter, env, k); err != nil {
		return err
	}

	cmds := filepath.Join(tmp, "commands")
	var cmdMods []string
	for _, m := range mods {
		if !slices.Contains(libraries, m.path) {
			cmdMods = append(cmdMods, m.path)
		}
	}
	if err := writeModule(cmds, mods[0].file.Go.Version, append(libraries, cmdMods...), version, nil, nil); err != nil {
		return err
	}
	if err := goCmd(cmds, env, append([]string{"build", "-o", os.DevNull}, commands...)...); err != nil {
		return err
	}
	fmt.Printf("modcheck: built %s from outside the repository\n", strings.Join(commands, ", "))
	return nil
}

// writeProxy writes the workspace's modules into dir as a module proxy,
// for GOPROXY=file://dir, at the tree's version (treeVersion), which it
// returns. Each module requires the others at that version. dir is new,
// empty, or a proxy writeProxy wrote: the versions it holds stay, for a
// project that still requires an earlier tree.
func writeProxy(repo, dir string) (string, error) {
	mods, err := workspace(repo)
	if err != nil {
		return "", err
	}
	if err := checkProxyDir(dir); err != nil {
		return "", err
	}
	version, err := treeVersion(mods)
	if err != nil {
		return "", err
	}
	for i := range mods {
		if _, err := requireOthers(&mods[i], version); err != nil {
			return "", err
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", err
	}
	// stdout is for the version alone.
	if err := publishAll(os.Stderr, dir, mods, version); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "modcheck: use it with GOPROXY=file://%s,%s GONOSUMDB=%s\n", filepath.ToSlash(dir), upstreamProxy(), core)
	return version, nil
}

// checkProxyDir refuses a dir that is neither missing, nor empty, nor a
// proxy of the core module.
func checkProxyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) || err == nil && len(entries) == 0:
		return nil
	case err != nil:
		return err
	}
	escaped, err := module.EscapePath(core)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, escaped, "@v", "list")); err != nil {
		return fmt.Errorf("-proxy %s: neither empty nor a proxy of %s", dir, core)
	}
	return nil
}

// treeVersion is the version of the tree's modules in a proxy that
// writeProxy makes: a pseudo-version, v0.0.0-<time>-<hash>, whose time is
// the newest file's and whose hash is of the modules' files (not a
// commit's). The same tree gets the same version, and a changed tree
// another: Go's module cache and a go.sum keep one content per version,
// so a changed tree at the same version is never fetched (from the cache)
// or fails (checksum mismatch).
func treeVersion(mods []mod) (string, error) {
	var names []string
	files := map[string]zip.File{}
	var newest time.Time
	for _, m := range mods {
		mfiles, err := moduleFiles(m)
		if err != nil {
			return "", err
		}
		for _, f := range mfiles {
			name := m.path + "@/" + f.Path()
			names = append(names, name)
			files[name] = f
			info, err := f.Lstat()
			if err != nil {
				return "", err
			}
			if info.ModTime().After(newest) {
				newest = info.ModTime()
			}
		}
	}
	h1, err := dirhash.Hash1(names, func(name string) (io.ReadCloser, error) { return files[name].Open() })
	if err != nil {
		return "", err
	}
	sum, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(h1, "h1:"))
	if err != nil {
		return "", err
	}
	return module.PseudoVersion("", "", newest, hex.EncodeToString(sum[:6])), nil
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

// atRelease reads go.work's modules and their release version.
func atRelease(repo string) ([]mod, string, error) {
	mods, err := workspace(repo)
	if err != nil {
		return nil, "", err
	}
	version, err := release(mods)
	return mods, version, err
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
	for i := range mods {
		m := &mods[i]
		changed, err := requireOthers(m, version)
		if err != nil {
			return err
		}
		if !changed {
			continue
		}
		if err := os.WriteFile(filepath.Join(m.dir, "go.mod"), m.data, 0o644); err != nil {
			return err
		}
		fmt.Printf("modcheck: %s requires the others at %s\n", m.path, version)
	}
	return nil
}

// requireOthers makes m require the other modules of the workspace at
// version, in m.file and m.data, and reports whether that changed them.
func requireOthers(m *mod, version string) (bool, error) {
	changed := false
	for _, r := range m.file.Require {
		if strings.HasPrefix(r.Mod.Path, core) && r.Mod.Version != version {
			if err := m.file.AddRequire(r.Mod.Path, version); err != nil {
				return false, err
			}
			changed = true
		}
	}
	if !changed {
		return false, nil
	}
	data, err := m.file.Format()
	if err != nil {
		return false, err
	}
	m.data = data
	return true, nil
}

// publishAll writes every module of mods at version into the proxy
// directory and says so on w.
func publishAll(w io.Writer, proxy string, mods []mod, version string) error {
	for _, m := range mods {
		if err := publish(proxy, m, version); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "modcheck: %d modules at %s in a proxy at %s\n", len(mods), version, proxy)
	return nil
}

// publish writes m at version into the proxy directory: .info, .mod
// (m.data) and .zip, as a module proxy serves them, and adds version to
// the list. The zip holds the module's directory without its nested
// modules, as `go mod download` would get it from a tag, and m.data as
// its go.mod.
func publish(proxy string, m mod, version string) error {
	escaped, err := module.EscapePath(m.path)
	if err != nil {
		return err
	}
	dir := filepath.Join(proxy, escaped, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	versions, err := os.ReadFile(filepath.Join(dir, "list"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	list := strings.Fields(string(versions))
	if !slices.Contains(list, version) {
		list = append(list, version)
	}
	semver.Sort(list)
	at := time.Now()
	if t, err := module.PseudoVersionTime(version); err == nil {
		at = t
	}
	info, err := json.Marshal(struct{ Version, Time string }{version, at.UTC().Format(time.RFC3339)})
	if err != nil {
		return err
	}
	files := map[string][]byte{"list": []byte(strings.Join(list, "\n") + "\n"), version + ".info": info, version + ".mod": m.data}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	zfiles, err := moduleFiles(m)
	if err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, version+".zip"))
	if err != nil {
		return err
	}
	err = zip.Create(f, module.Version{Path: m.path, Version: version}, zfiles)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("zip of %s: %w", m.path, err)
	}
	return nil
}

// moduleFiles lists the files of m's zip: those of its directory that
// zip.CreateFromDir takes, with m.data as go.mod.
func moduleFiles(m mod) ([]zip.File, error) {
	checked, err := zip.CheckDir(m.dir)
	if err != nil {
		return nil, fmt.Errorf("files of %s: %w", m.path, err)
	}
	var files []zip.File
	for _, p := range checked.Valid {
		rel, err := filepath.Rel(m.dir, p)
		if err != nil {
			return nil, err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		f := treeFile{path: filepath.ToSlash(rel), file: p, info: info}
		if f.path == "go.mod" {
			f.data = m.data
		}
		files = append(files, f)
	}
	return files, nil
}

// treeFile is a zip.File of a module's directory, or, with data, one
// whose content is data.
type treeFile struct {
	path, file string // in the module, with slashes; on disk
	info       fs.FileInfo
	data       []byte
}

func (f treeFile) Path() string { return f.path }

func (f treeFile) Lstat() (fs.FileInfo, error) {
	if f.data != nil {
		return sizedInfo{f.info, int64(len(f.data))}, nil
	}
	return f.info, nil
}

func (f treeFile) Open() (io.ReadCloser, error) {
	if f.data != nil {
		return io.NopCloser(bytes.NewReader(f.data)), nil
	}
	return os.Open(f.file)
}

// sizedInfo is a file's information with another size: that of the
// content a treeFile has instead of the file's.
type sizedInfo struct {
	fs.FileInfo
	size int64
}

func (i sizedInfo) Size() int64 { return i.size }

// writeModule makes a module example.com/<dir's name> in dir that
// requires paths at version, replaces the modules of replace by the
// directories it maps them to, and has main.go holding src (none when
// nil).
func writeModule(dir, goVersion string, paths []string, version string, replace map[string]string, src []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f := new(modfile.File)
	if err := f.AddModuleStmt("example.com/" + filepath.Base(dir)); err != nil {
		return err
	}
	if err := f.AddGoStmt(goVersion); err != nil {
		return err
	}
	for _, p := range paths {
		f.AddNewRequire(p, version, false)
	}
	for _, p := range slices.Sorted(maps.Keys(replace)) {
		if err := f.AddReplace(p, "", replace[p], ""); err != nil {
			return err
		}
	}
	data, err := f.Format()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), data, 0o644); err != nil {
		return err
	}
	if src == nil {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644)
}

// goEnv is the environment of the go commands run outside the repository,
// in tmp: no workspace, the proxy first, no checksum database for the
// modules only it serves, and a module cache of their own. Go caches a
// module version once, so the machine's cache may hold another tree's
// nodepass at the same version (from an earlier run, or another
// worktree's). Other modules come from the machine's cache as a proxy,
// then from GOPROXY.
func goEnv(proxy, tmp string) ([]string, error) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	shared := filepath.Join(strings.TrimSpace(string(out)), "cache", "download")
	return append(os.Environ(),
		"GOWORK=off",
		"GOMODCACHE="+filepath.Join(tmp, "modcache"),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+",file://"+filepath.ToSlash(shared)+","+upstreamProxy(),
		"GONOSUMDB="+core,
		"GOFLAGS=-mod=mod -modcacherw",
	), nil
}

// upstreamProxy is GOPROXY as set, or Go's default.
func upstreamProxy() string {
	if p := os.Getenv("GOPROXY"); p != "" {
		return p
	}
	return "https://proxy.golang.org,direct"
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

// k3s is what k3s's go.mod requires and replaces.
type k3s struct {
	commit  string            // of k3s, from the file name
	require map[string]string // module path: version
	replace map[string]module.Version
}

// loadK3s reads k3sGoMod.
func loadK3s() (k3s, error) {
	data, err := os.ReadFile(k3sGoMod)
	if err != nil {
		return k3s{}, err
	}
	f, err := modfile.Parse(k3sGoMod, data, nil)
	if err != nil {
		return k3s{}, err
	}
	k := k3s{
		commit:  strings.TrimSuffix(strings.TrimPrefix(filepath.Base(k3sGoMod), "k3s-"), ".go.mod"),
		require: map[string]string{},
		replace: map[string]module.Version{},
	}
	for _, r := range f.Require {
		k.require[r.Mod.Path] = r.Mod.Version
	}
	for _, r := range f.Replace {
		if r.Old.Version != "" {
			return k3s{}, fmt.Errorf("%s: replace of %s at one version: not handled", k3sGoMod, r.Old)
		}
		k.replace[r.Old.Path] = r.New
	}
	return k, nil
}

// built is the version of path that k3s builds: its replacement's when
// k3s replaces it by the same module at another version (x/crypto
// v0.54.0 => v0.47.0), else the version it requires (k3s's fork of
// client-go v1.36.3-k3s1 is client-go v0.36.3).
func (k k3s) built(path string) string {
	if r, ok := k.replace[path]; ok && r.Path == path {
		return r.Version
	}
	return k.require[path]
}

// checkRises checks the module in dir, which requires the core, kube and
// prom and nothing else, as a k3s that adopts nodepass would. Its module
// graph (go mod graph) holds what requiring them adds to k3s's: every
// module their go.mod files require, indirect and test-only ones too,
// since minimal version selection counts them all. Under module graph
// pruning (k3s and nodepass are at go 1.17 or later) that is all it adds.
// It fails for every module k3s requires that the graph has at a newer
// version: k3s would select that version, so its go.mod would change.
// Where none rises, k3s selects what it selected before, everywhere.
func checkRises(dir string, env []string, k k3s) error {
	cmd := exec.Command("go", "mod", "graph")
	cmd.Dir, cmd.Env, cmd.Stderr = dir, env, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go mod graph in %s: %w", dir, err)
	}
	type need struct {
		version string
		by      []string
	}
	top := map[string]*need{} // the newest version of each module in the graph, and who requires it
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		from, to, ok := strings.Cut(line, " ")
		if !ok {
			return fmt.Errorf("go mod graph: unexpected line %q", line)
		}
		path, version, _ := strings.Cut(to, "@")
		from, _, _ = strings.Cut(from, "@")
		n := top[path]
		switch {
		case n == nil || semver.Compare(version, n.version) > 0:
			top[path] = &need{version: version, by: []string{from}}
		case version == n.version && !slices.Contains(n.by, from):
			n.by = append(n.by, from)
		}
	}
	var rises, unnamed []string
	for _, path := range slices.Sorted(maps.Keys(top)) {
		n := top[path]
		if strings.HasPrefix(path, core) || path == "go" || path == "toolchain" {
			continue
		}
		want, ok := k.require[path]
		switch {
		case !ok:
			unnamed = append(unnamed, path+" "+n.version)
		case semver.Compare(n.version, want) > 0:
			rises = append(rises, fmt.Sprintf("\t%s %s -> %s (required by %s)", path, want, n.version, strings.Join(n.by, ", ")))
		}
	}
	if len(rises) > 0 {
		return fmt.Errorf("requiring %s raises %d of the %d requirements of k3s at %s (%s):\n%s",
			strings.Join(libraries, ", "), len(rises), len(k.require), k.commit, k3sGoMod, strings.Join(rises, "\n"))
	}
	fmt.Printf("modcheck: requiring %s raises none of the %d requirements of k3s at %s (%s)\n",
		strings.Join(libraries, ", "), len(k.require), k.commit, k3sGoMod)
	if len(unnamed) > 0 {
		fmt.Printf("modcheck: and adds modules k3s's go.mod does not name: %s\n", strings.Join(unnamed, ", "))
	}
	return nil
}

// checkTree runs the checks against k3s's go.mod on the tree: each module
// of the workspace on its own (GOWORK=off, its replace directives in
// effect) keeps the pins, and a module that requires the library modules
// from the tree raises none of k3s's requirements.
func checkTree(repo string) error {
	k, err := loadK3s()
	if err != nil {
		return err
	}
	mods, version, err := atRelease(repo)
	if err != nil {
		return err
	}
	env := append(os.Environ(), "GOWORK=off")
	var errs []error
	for _, m := range mods {
		errs = append(errs, checkPins(m.path, m.dir, env, k, false))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("modcheck: the %d modules of the workspace select nothing above what k3s builds of %s\n", len(mods), strings.Join(pinned, ", "))

	tmp, err := os.MkdirTemp("", "modcheck-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// The library modules from the tree (replace directives to their
	// directories: the go.mod files a proxy would serve), with their
	// go.sum lines, so that no checksum is looked up.
	var sums []byte
	replace := map[string]string{}
	for _, m := range mods {
		if !slices.Contains(libraries, m.path) {
			continue
		}
		if replace[m.path], err = filepath.Abs(m.dir); err != nil {
			return err
		}
		sum, err := os.ReadFile(filepath.Join(m.dir, "go.sum"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		sums = append(sums, sum...)
	}
	if err := writeModule(tmp, mods[0].file.Go.Version, libraries, version, replace, nil); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(tmp, "go.sum"), sums, 0o644); err != nil {
		return err
	}
	return checkRises(tmp, env, k)
}

// checkPins lists the build list of the module in dir (called name) and
// fails if it selects any module of pinned above what k3s builds;
// verbose, it prints each pinned module's version.
func checkPins(name, dir string, env []string, k k3s, verbose bool) error {
	cmd := exec.Command("go", "list", "-m", "-f", "{{.Path}} {{.Version}}", "all")
	cmd.Dir, cmd.Env, cmd.Stderr = dir, env, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list -m all: %w", err)
	}
	var errs []error
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, version, _ := strings.Cut(line, " ")
		if !slices.Contains(pinned, path) {
			continue
		}
		pin := k.built(path)
		if verbose {
			fmt.Printf("modcheck: %s selects %s %s (k3s builds %s)\n", name, path, version, pin)
		}
		if semver.Compare(version, pin) > 0 {
			errs = append(errs, fmt.Errorf("%s: %s %s is newer than k3s's %s", name, path, version, pin))
		}
	}
	return errors.Join(errs...)
}
