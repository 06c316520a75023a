package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
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
