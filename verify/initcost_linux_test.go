package verify

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/nodepass/nodepass/internal/testexec"
)

// TestNewHasherInInit: a process whose init makes a Hasher with the
// defaults and then idles, with GOMAXPROCS=4 as the issue measured it,
// computes no scrypt, maps nothing, starts no goroutine, and uses no more
// CPU and memory than the same process without the Hasher. On d6fdf27
// NewHasher computed a batch of throwaway hashes there, wherever the
// default budget binds (16 lanes of AVX-512 past 2 cores: about 1 s of
// CPU and 512 MiB more).
func TestNewHasherInInit(t *testing.T) {
	testexec.SkipUnlessExecutable(t)
	type child struct {
		out     string
		cpu     time.Duration
		peakRSS int64
	}
	run := func(mode string, c *child, done chan<- error) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), idleChild+"="+mode, "GOMAXPROCS=4")
		out, err := cmd.Output()
		if err == nil {
			ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
			c.out, c.cpu, c.peakRSS = string(out), time.Duration(ru.Utime.Nano()+ru.Stime.Nano()), ru.Maxrss<<10
		}
		done <- err
	}
	var with, without child
	done := make(chan error)
	go run("hasher", &with, done)
	go run("none", &without, done)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("with the Hasher: %s  %v CPU, %d KiB peak RSS", with.out, with.cpu, with.peakRSS>>10)
	t.Logf("without:         %s  %v CPU, %d KiB peak RSS", without.out, without.cpu, without.peakRSS>>10)
	var classes, goroutines, withoutGoroutines int
	var mapped int64
	var runs uint64
	if _, err := fmt.Sscanf(with.out, "classes=%d mapped=%d goroutines=%d runs=%d", &classes, &mapped, &goroutines, &runs); err != nil {
		t.Fatalf("child with the Hasher: %q: %v", with.out, err)
	}
	if _, err := fmt.Sscanf(without.out, "classes=0 mapped=0 goroutines=%d", &withoutGoroutines); err != nil {
		t.Fatalf("child without: %q: %v", without.out, err)
	}
	if classes != 0 || mapped != 0 || runs != 0 || goroutines != withoutGoroutines {
		t.Errorf("with the Hasher the idle process computed %d classes of scrypt (%d runs), has %d bytes mapped and %d goroutines (%d without)",
			classes, runs, mapped, goroutines, withoutGoroutines)
	}
	// Margins for noise, far below one hash at k3s's parameters (32 MiB,
	// tens of milliseconds).
	if with.cpu > without.cpu+50*time.Millisecond || with.peakRSS > without.peakRSS+8<<20 {
		t.Errorf("with the Hasher: %v of CPU and %d KiB peak RSS; without: %v and %d KiB",
			with.cpu, with.peakRSS>>10, without.cpu, without.peakRSS>>10)
	}
}
