package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/module"
)

// asCommand, set in a test binary's environment, makes it the modcheck
// command: TestMain runs main with the binary's arguments.
const asCommand = "NODEPASS_TEST_RUN_MODCHECK_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asCommand) != "" {
		os.Args = append([]string{"modcheck"}, os.Args[1:]...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// modcheck runs the command with args as a user does, in this
// directory, with env added to the test's environment, and returns its
// stdout; stderr is logged.
func modcheck(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asCommand+"=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("modcheck %s:\n%s%s", strings.Join(args, " "), stdout.String(), stderr.String())
	return stdout.String(), err
}

// offline is the environment of the go commands of these tests: no
// network, no workspace, a module cache of the test's own.
func offline(t *testing.T) []string {
	return []string{"GOWORK=off", "GOPROXY=off", "GOFLAGS=-modcacherw", "GOMODCACHE=" + filepath.Join(t.TempDir(), "modcache")}
}

// writeFiles writes files (path: content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fakeRepo writes a workspace of the core, kube and prom modules, with no
// other requirement, in dir: the core's package tree has the constant
// Name, prom's package the constant Of, tree.Name again.
func fakeRepo(t *testing.T, dir, name string) {
	t.Helper()
	nested := func(path string) string {
		return "module " + core + "/" + path + "\n\ngo 1.26.0\n\nrequire " + core + " v0.1.0\n\nreplace " + core + " => ../\n"
	}
	writeFiles(t, dir, map[string]string{
		"go.work":      "go 1.26.0\n\nuse (\n\t.\n\t./kube\n\t./prom\n)\n",
		"go.mod":       "module " + core + "\n\ngo 1.26.0\n",
		"tree/tree.go": "package tree\n\nconst Name = \"" + name + "\"\n",
		"kube/go.mod":  nested("kube"),
		"kube/kube.go": "package kube\n",
		"prom/go.mod":  nested("prom"),
		"prom/prom.go": "package prom\n\nimport \"" + core + "/tree\"\n\nconst Of = tree.Name\n",
	})
}

// TestPinsFromPathWithSpace: -pins (make pins) works in a clone whose
// path has a space: the replace directives of the module it writes are
// quoted (modfile), not printed as they are.
func TestPinsFromPathWithSpace(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "a clone")
	fakeRepo(t, repo, "first")
	if _, err := modcheck(t, offline(t), "-repo", repo, "-pins"); err != nil {
		t.Errorf("-pins in %q: %v", repo, err)
	}
}

// goIn runs the go command with args in dir, with env added to the
// test's environment, and returns its stdout.
func goIn(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// TestProxyRepeated runs ADOPTING.md's way to require the tree before a
// release, as a user does, on a tree, again on the same tree, and again
// once the tree has changed: -proxy into one directory, then in a
// project go mod edit -require and go mod download of the version it
// printed, and a build. The same tree gets the same version; the changed
// tree another, which the project builds (neither the earlier tree from
// the module cache nor a checksum mismatch against its go.sum). A
// directory that is not such a proxy is refused.
func TestProxyRepeated(t *testing.T) {
	tmp := t.TempDir()
	repo, proxy, project := filepath.Join(tmp, "nodepass"), filepath.Join(tmp, "proxy"), filepath.Join(tmp, "project")
	env := append(offline(t), "GOPROXY=file://"+filepath.ToSlash(proxy), "GONOSUMDB="+core)
	writeFiles(t, project, map[string]string{
		"go.mod": "module example.com/project\n\ngo 1.26.0\n",
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\n\t\"" + core + "/prom\"\n\t\"" + core + "/tree\"\n)\n\n" +
			"func main() { fmt.Println(tree.Name, prom.Of) }\n",
	})
	proxyRun := func(run int) string {
		t.Helper()
		out, err := modcheck(t, env, "-repo", repo, "-proxy", proxy)
		if err != nil {
			t.Fatalf("-proxy, run %d: %v", run, err)
		}
		return strings.TrimSpace(out)
	}
	build := func(v, name string) {
		t.Helper()
		goIn(t, project, env, "mod", "edit", "-require="+core+"@"+v, "-require="+core+"/prom@"+v)
		goIn(t, project, env, "mod", "download", core+"@"+v, core+"/prom@"+v)
		if got := goIn(t, project, env, "run", "."); got != name+" "+name+"\n" {
			t.Errorf("at %s, the project printed %q, want the tree's %q twice", v, got, name)
		}
	}
	fakeRepo(t, repo, "first")
	v1, again := proxyRun(1), proxyRun(2)
	if !module.IsPseudoVersion(v1) || again != v1 {
		t.Fatalf("-proxy printed %q, then %q for the same tree; want one pseudo-version alone", v1, again)
	}
	build(v1, "first")
	fakeRepo(t, repo, "second")
	v2 := proxyRun(3)
	if !module.IsPseudoVersion(v2) || v2 == v1 {
		t.Fatalf("-proxy printed %q for a changed tree, %q before; want another pseudo-version", v2, v1)
	}
	build(v2, "second")

	other := t.TempDir()
	writeFiles(t, other, map[string]string{"notes.txt": "mine"})
	if out, err := modcheck(t, env, "-repo", repo, "-proxy", other); err == nil || out != "" {
		t.Errorf("-proxy into a directory of other files: %q, %v; want an error", out, err)
	}
}
