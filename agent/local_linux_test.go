package agent

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A node out of file descriptors (EMFILE) fails its attempts, but counts
// that against no server: once descriptors are free again, every server
// is asked at once, none left out for RecoveryDelay.
func TestOutOfFileDescriptors(t *testing.T) {
	cl := newCluster(t)
	a, b := newSupervisor(t, cl), newSupervisor(t, cl)
	opts := testOptions(cl, a.addr, t.TempDir(), nil)
	opts.Servers = []string{b.addr}
	opts.RecoveryDelay = time.Hour
	c := newClient(t, opts)

	var orig syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Skip(err)
	}
	limit := lowestFreeFD(t)
	lowered := orig
	lowered.Cur = limit
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, err := c.Get(ctx)
	cancel()
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &orig); err != nil {
		t.Fatal(err)
	}
	if err == nil || !strings.Contains(err.Error(), "too many open files") {
		t.Fatalf("Get: %v, want too many open files", err)
	}
	if st := c.Stats(); st.Failovers != 0 {
		t.Errorf("%d failovers: the shortage was counted against a server", st.Failovers)
	}
	if o := c.servers.order(time.Now()); len(o) != 2 {
		t.Errorf("servers up %v, want both", o)
	}
	get(t, c)
}

// lowestFreeFD is the lowest file descriptor number not in use: with the
// limit there, the next descriptor opened fails with EMFILE.
func lowestFreeFD(t *testing.T) uint64 {
	t.Helper()
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	names, err := d.Readdirnames(-1)
	self := d.Fd()
	d.Close()
	if err != nil {
		t.Skip(err)
	}
	var used []uint64
	for _, n := range names {
		if fd, err := strconv.ParseUint(n, 10, 64); err == nil && fd != uint64(self) {
			used = append(used, fd)
		}
	}
	for fd := uint64(0); ; fd++ {
		if !slices.Contains(used, fd) {
			return fd
		}
	}
}
