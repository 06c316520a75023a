package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// stream is what `go test -json` prints for a package that passes (its
// tests' output unseen), one without tests, one whose test fails (a
// subtest's error and a log line of its parent), and one that does not
// build.
const stream = `{"Action":"start","Package":"ex/ok"}
{"Action":"run","Package":"ex/ok","Test":"TestFine"}
{"Action":"output","Package":"ex/ok","Test":"TestFine","Output":"=== RUN   TestFine\n"}
{"Action":"output","Package":"ex/ok","Test":"TestFine","Output":"    fine_test.go:9: all well\n"}
{"Action":"pass","Package":"ex/ok","Test":"TestFine","Elapsed":0.5}
{"Action":"output","Package":"ex/ok","Output":"ok  \tex/ok\t1.2s\n"}
{"Action":"pass","Package":"ex/ok","Elapsed":1.2}
{"Action":"start","Package":"ex/none"}
{"Action":"output","Package":"ex/none","Output":"?   \tex/none\t[no test files]\n"}
{"Action":"skip","Package":"ex/none","Elapsed":0}
{"Action":"start","Package":"ex/bad"}
{"Action":"output","Package":"ex/bad","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Action":"output","Package":"ex/bad","Test":"TestBad/sub","Output":"    bad_test.go:7: sub broke\n"}
{"Action":"output","Package":"ex/bad","Test":"TestBad/sub","Output":"--- FAIL: TestBad/sub (0.00s)\n"}
{"Action":"fail","Package":"ex/bad","Test":"TestBad/sub","Elapsed":0}
{"Action":"output","Package":"ex/bad","Test":"TestBad","Output":"    bad_test.go:8: parent log\n"}
{"Action":"output","Package":"ex/bad","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"ex/bad","Test":"TestBad","Elapsed":0}
{"Action":"output","Package":"ex/bad","Output":"FAIL\n"}
{"Action":"output","Package":"ex/bad","Output":"FAIL\tex/bad\t0.3s\n"}
{"Action":"fail","Package":"ex/bad","Elapsed":0.3}
{"ImportPath":"ex/broken [ex/broken.test]","Action":"build-output","Output":"# ex/broken [ex/broken.test]\n./x_test.go:6:17: undefined: nothing\n"}
{"ImportPath":"ex/broken [ex/broken.test]","Action":"build-fail"}
{"Action":"start","Package":"ex/broken"}
{"Action":"fail","Package":"ex/broken","Elapsed":0,"FailedBuild":"ex/broken [ex/broken.test]"}
go: a line of go's own
`

// clock is a fake time that moves when told.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestPrinter(t *testing.T) {
	c := &clock{time.Unix(1e9, 0)}
	var b bytes.Buffer
	p := newPrinter(&b, c.now)
	for i, l := range strings.Split(strings.TrimSuffix(stream, "\n"), "\n") {
		c.t = c.t.Add(time.Duration(i) * time.Second)
		p.line(l)
	}
	got := b.String()
	want := ` 0:00 start  ex/ok
 0:21 ok     ex/ok  1.2s
 0:28 start  ex/none
 0:45 ?      ex/none  [no test files]
 0:55 start  ex/bad
 1:45 FAIL   ex/bad  TestBad/sub
    bad_test.go:7: sub broke
--- FAIL: TestBad/sub (0.00s)
 2:33 FAIL   ex/bad  TestBad
    bad_test.go:8: parent log
--- FAIL: TestBad (0.00s)
 3:30 FAIL   ex/bad  0.3s
# ex/broken [ex/broken.test]
./x_test.go:6:17: undefined: nothing
 4:36 start  ex/broken
 5:00 FAIL   ex/broken  [build failed]
go: a line of go's own
`
	if got != want {
		t.Errorf("printed:\n%s\nwant:\n%s", got, want)
	}
	if p.packages != 4 || p.failed != 2 {
		t.Errorf("%d packages, %d failed; want 4, 2", p.packages, p.failed)
	}
}

// TestHeartbeat: after 30 s without a line, one names the packages still
// running and for how long; before, nothing.
func TestHeartbeat(t *testing.T) {
	c := &clock{time.Unix(1e9, 0)}
	var b bytes.Buffer
	p := newPrinter(&b, c.now)
	p.heartbeat()
	c.t = c.t.Add(quiet)
	p.heartbeat()
	p.line(`{"Action":"start","Package":"ex/slow"}`)
	c.t = c.t.Add(10 * time.Second)
	p.line(`{"Action":"start","Package":"ex/slower"}`)
	c.t = c.t.Add(quiet - time.Second)
	p.heartbeat()
	c.t = c.t.Add(time.Second)
	p.heartbeat()
	want := ` 0:30 ...    building and vetting
 0:30 start  ex/slow
 0:40 start  ex/slower
 1:10 ...    still running: ex/slow (40s), ex/slower (30s)
`
	if got := b.String(); got != want {
		t.Errorf("printed:\n%s\nwant:\n%s", got, want)
	}
}

// TestMain lets the test binary stand in for go test: with
// TESTPROGRESS_FAKE set it prints the stream and exits with that status.
func TestMain(m *testing.M) {
	if code := os.Getenv("TESTPROGRESS_FAKE"); code != "" {
		fmt.Print(stream)
		fmt.Fprintln(os.Stderr, "go test's standard error")
		var n int
		fmt.Sscan(code, &n)
		os.Exit(n)
	}
	os.Exit(m.Run())
}

// TestExitStatus: testprogress exits with the command's status, passes its
// standard error through, and says so on its last line.
func TestExitStatus(t *testing.T) {
	for _, code := range []int{0, 1, 3} {
		t.Setenv("TESTPROGRESS_FAKE", fmt.Sprint(code))
		var out, errb bytes.Buffer
		got := run([]string{os.Args[0]}, &out, &errb)
		want := max(code, 1) // the stream has failures: never exit 0
		if got != want || errb.String() != "go test's standard error\n" ||
			!strings.HasSuffix(out.String(), fmt.Sprintf("done: 4 packages, 2 failed, exit status %d\n", want)) {
			t.Errorf("exit %d: got %d, stderr %q, stdout:\n%s", code, got, errb.String(), out.String())
		}
	}
	var out, errb bytes.Buffer
	if got := run([]string{"/nonexistent/go"}, &out, &errb); got != 1 || !strings.HasPrefix(errb.String(), "testprogress: ") {
		t.Errorf("a command that cannot start: exit %d, stderr %q", got, errb.String())
	}
}
