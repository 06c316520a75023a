// Command testprogress runs a `go test -json` command and says what it is
// doing, for make test: a line as each package starts and as it ends (ok
// with its time, FAIL, or no test files), a line after 30 s without one
// naming the packages still running, and for each test that fails, as it
// fails, a FAIL line naming it and its package, then its output as go
// test prints it (without the === lines); a failed package's own output
// comes before its FAIL line. It passes go test's standard error and any
// line that is not JSON through, and exits with go test's status.
//
//	testprogress go test -json -race -count=1 ./...
//
// Each line starts with the time since testprogress started (m:ss).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testprogress go test -json [flags] [packages]")
		os.Exit(2)
	}
	// Ctrl-C reaches go test too: keep reading until it has said why it
	// stopped.
	signal.Notify(make(chan os.Signal, 1), os.Interrupt)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// quiet is how long testprogress stays silent before it names what is
// still running.
const quiet = 30 * time.Second

// run runs the command args, prints its progress to stdout, and returns
// its exit status (1 if it could not be run).
func run(args []string, stdout, stderr io.Writer) int {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		fmt.Fprintf(stderr, "testprogress: %v\n", err)
		return 1
	}
	p := newPrinter(stdout, time.Now)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				p.heartbeat()
			}
		}
	})
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		p.line(sc.Text())
	}
	close(stop)
	wg.Wait()
	err = cmd.Wait()
	code := 0
	if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		fmt.Fprintf(stderr, "testprogress: %v\n", err)
		code = 1
	}
	if code == 0 && p.failed > 0 { // cannot happen with go test; never hide a failure
		code = 1
	}
	p.done(code)
	return code
}

// event is one line of `go test -json`: a test2json TestEvent or a
// BuildEvent (Action build-output or build-fail, ImportPath).
type event struct {
	Action, Package, Test, Output, FailedBuild, ImportPath string
	Elapsed                                                float64
}

// printer turns events into progress lines. It is safe for concurrent
// use: the heartbeat runs beside the reading.
type printer struct {
	w   io.Writer
	now func() time.Time

	mu       sync.Mutex
	start    time.Time // when testprogress started
	last     time.Time // when a line was last printed
	running  map[string]time.Time
	output   map[string]*packageOutput
	packages int
	failed   int
}

// packageOutput is a package's output not yet printed: each test's lines
// ("" the package's own), the tests in the order they first printed.
type packageOutput struct {
	tests []string
	lines map[string][]string
}

func newPrinter(w io.Writer, now func() time.Time) *printer {
	t := now()
	return &printer{w: w, now: now, start: t, last: t, running: map[string]time.Time{}, output: map[string]*packageOutput{}}
}

// printf prints one progress line, with the time since the start.
func (p *printer) printf(format string, args ...any) {
	t := p.now()
	d := t.Sub(p.start).Round(time.Second)
	fmt.Fprintf(p.w, "%2d:%02d %s\n", int(d.Minutes()), int(d.Seconds())%60, fmt.Sprintf(format, args...))
	p.last = t
}

// print prints lines as they came, after the time of the line before.
func (p *printer) print(lines []string) {
	for _, l := range lines {
		fmt.Fprintln(p.w, l)
	}
}

// line handles one line of go test's standard output.
func (p *printer) line(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var e event
	if !strings.HasPrefix(s, "{") || json.Unmarshal([]byte(s), &e) != nil {
		p.print([]string{s}) // go test said something itself
		return
	}
	switch {
	case e.Action == "build-output":
		p.print(strings.Split(strings.TrimSuffix(e.Output, "\n"), "\n"))
	case e.Action == "start":
		p.running[e.Package] = p.now()
		p.printf("start  %s", e.Package)
	case e.Action == "output":
		o := p.output[e.Package]
		if o == nil {
			o = &packageOutput{lines: map[string][]string{}}
			p.output[e.Package] = o
		}
		if _, ok := o.lines[e.Test]; !ok {
			o.tests = append(o.tests, e.Test)
		}
		line := strings.TrimSuffix(e.Output, "\n")
		if !strings.HasPrefix(strings.TrimSpace(line), "=== ") {
			o.lines[e.Test] = append(o.lines[e.Test], line)
		}
	case e.Test != "":
		p.testDone(e)
	default:
		p.packageDone(e)
	}
}

// testDone prints a failed test's name and output; a test that passed
// or was skipped says nothing.
func (p *printer) testDone(e event) {
	o := p.output[e.Package]
	if o == nil || (e.Action != "fail" && e.Action != "pass" && e.Action != "skip") {
		return
	}
	if e.Action == "fail" {
		p.printf("FAIL   %s  %s", e.Package, e.Test)
		p.print(o.lines[e.Test])
	}
	delete(o.lines, e.Test)
}

// packageDone prints a package's end, and for a failure whatever it
// printed that no test's end printed.
func (p *printer) packageDone(e event) {
	delete(p.running, e.Package)
	o := p.output[e.Package]
	delete(p.output, e.Package)
	switch e.Action {
	case "pass":
		p.packages++
		p.printf("ok     %s  %.1fs", e.Package, e.Elapsed)
	case "skip":
		p.packages++
		p.printf("?      %s  [no test files]", e.Package)
	case "fail":
		p.packages++
		p.failed++
		if o != nil {
			for _, t := range o.tests {
				p.print(slices.DeleteFunc(o.lines[t], func(l string) bool { return l == "FAIL" || strings.HasPrefix(l, "FAIL\t") }))
			}
		}
		why := fmt.Sprintf("%.1fs", e.Elapsed)
		if e.FailedBuild != "" {
			why = "[build failed]"
		}
		p.printf("FAIL   %s  %s", e.Package, why)
	}
}

// heartbeat names what is still running once nothing has been printed
// for quiet.
func (p *printer) heartbeat() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if now.Sub(p.last) < quiet {
		return
	}
	if len(p.running) == 0 {
		p.printf("...    building and vetting")
		return
	}
	var names []string
	for pkg, t := range p.running {
		names = append(names, fmt.Sprintf("%s (%v)", pkg, now.Sub(t).Round(time.Second)))
	}
	slices.Sort(names)
	p.printf("...    still running: %s", strings.Join(names, ", "))
}

// done prints the last line: how many packages, how many failed, the
// exit status.
func (p *printer) done(code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.printf("done: %d packages, %d failed, exit status %d", p.packages, p.failed, code)
}
