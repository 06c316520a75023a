package bench

import (
	"testing"
	"time"
)

// rebootScenario is a small in-process herd at testLogN with retries
// scaled down and timeouts long enough for a starved machine.
func rebootScenario(reboot Reboot) Scenario {
	return Scenario{Nodes: 30, LogN: testLogN, TimeScale: 0.05, Reboot: reboot,
		ClientTimeout: 100 * time.Second, Deadline: 40 * time.Minute}
}

// TestRebootNodepassNoScrypt checks that after a warm-up nodepass lets
// every node of a reboot in without scrypt: from its result cache when
// the servers stayed up (their clocks 2 h on), from the remembered digests
// when they restarted too (and the second certificate request from the
// cache); one server or three with failover.
func TestRebootNodepassNoScrypt(t *testing.T) {
	h := testHerd(t)
	for _, reboot := range []Reboot{RebootAgents, RebootAll} {
		for _, servers := range []int{1, 3} {
			t.Run(string(reboot)+"/"+string(rune('0'+servers)), func(t *testing.T) {
				sc := rebootScenario(reboot)
				sc.Servers, sc.LB = servers, LBFailover
				res, err := Run(t.Context(), sc, h, ModelNodepass)
				if err != nil {
					t.Fatal(err)
				}
				if res.Joined != 30 || res.Stopped != "" || res.FirstAttempt != 30 || res.Attempts != 30 {
					t.Errorf("joined %d (%d on the first attempt, %d attempts), stopped %q", res.Joined, res.FirstAttempt, res.Attempts, res.Stopped)
				}
				if res.ScryptRuns != 0 {
					t.Errorf("%d scrypt runs during the reboot, want 0", res.ScryptRuns)
				}
				if res.WarmupScrypt != 30 || res.WarmupDigests != 30 || !res.DigestKey || res.Reboot != reboot {
					t.Errorf("warm-up: %d scrypt, %d digests; digest key %v, reboot %q", res.WarmupScrypt, res.WarmupDigests, res.DigestKey, res.Reboot)
				}
				// Each node asks for two certificates, and its seven
				// requests' tokens are cache hits (known since the servers
				// loaded them).
				tokens := uint64(30 * len(inprocSteps))
				switch reboot {
				case RebootAgents: // the servers stayed up: their caches answer both
					if res.CacheHits != 60+tokens || res.DigestHits != 0 {
						t.Errorf("cache hits %d, digest hits %d; want %d, 0", res.CacheHits, res.DigestHits, 60+tokens)
					}
				case RebootAll: // new servers: the digests answer the first, the cache the second
					if res.DigestHits != 30 || res.CacheHits != 30+tokens {
						t.Errorf("digest hits %d, cache hits %d; want 30, %d", res.DigestHits, res.CacheHits, 30+tokens)
					}
				}
			})
		}
	}
}

// TestRebootK3sScrypt checks that a k3s model, which remembers nothing,
// computes at least one scrypt per node in either reboot, and that no
// warm-up is counted for it.
func TestRebootK3sScrypt(t *testing.T) {
	h := testHerd(t)
	for _, reboot := range []Reboot{RebootAgents, RebootAll} {
		for _, model := range []string{ModelK3sLatest, ModelK3s128} {
			t.Run(string(reboot)+"/"+model, func(t *testing.T) {
				res, err := Run(t.Context(), rebootScenario(reboot), h, model)
				if err != nil {
					t.Fatal(err)
				}
				if res.Joined != 30 || res.Stopped != "" {
					t.Errorf("joined %d, stopped %q", res.Joined, res.Stopped)
				}
				if res.ScryptRuns < 30 || res.DigestHits != 0 || res.CacheHits != 0 || res.DigestKey {
					t.Errorf("%d scrypt runs, %d digest hits, %d cache hits, digest key %v; want at least 30, 0, 0, false",
						res.ScryptRuns, res.DigestHits, res.CacheHits, res.DigestKey)
				}
				if res.WarmupScrypt != 0 || res.Reboot != reboot {
					t.Errorf("warm-up %d scrypt, reboot %q", res.WarmupScrypt, res.Reboot)
				}
			})
		}
	}
}

// TestRebootAttackers checks a restart of every server under attack: no
// guess gets in, no warm-up computation is counted against the reboot, and
// the honest nodes need no scrypt.
func TestRebootAttackers(t *testing.T) {
	h := testHerd(t)
	sc := rebootScenario(RebootAll)
	sc.Attackers = 6
	res, err := Run(t.Context(), sc, h, ModelNodepass)
	if err != nil {
		t.Fatal(err)
	}
	a := res.Attack
	if a == nil || a.Accepted() != 0 || a.HonestRejected != 0 || a.HonestScrypt != 0 || a.UnattributedScrypt != 0 {
		t.Fatalf("attack figures %+v", a)
	}
	if res.Joined != 30 || res.DigestHits < 30 {
		t.Errorf("joined %d, digest hits %d", res.Joined, res.DigestHits)
	}
}

// TestColdServersShareDigests checks that without a reboot nodepass
// servers get a DigestKey, the same for all (a node verified by one is
// known to the others through the store), and none with NoDigestKey.
func TestColdServersShareDigests(t *testing.T) {
	h := testHerd(t)
	sc := rebootScenario("")
	sc.Servers, sc.LB = 3, LBFailover
	res, err := Run(t.Context(), sc, h, ModelNodepass)
	if err != nil {
		t.Fatal(err)
	}
	if !res.DigestKey || res.Reboot != RebootNone || res.WarmupScrypt != 0 || res.Joined != 30 {
		t.Errorf("digest key %v, reboot %q, warm-up %d scrypt, joined %d", res.DigestKey, res.Reboot, res.WarmupScrypt, res.Joined)
	}
	if res.ScryptRuns < 30 {
		t.Errorf("%d scrypt runs for 30 cold nodes", res.ScryptRuns)
	}
	sc.NoDigestKey = true
	if res, err = Run(t.Context(), sc, h, ModelNodepass); err != nil {
		t.Fatal(err)
	}
	if res.DigestKey || res.DigestHits != 0 {
		t.Errorf("NoDigestKey: digest key %v, %d digest hits", res.DigestKey, res.DigestHits)
	}
}

func TestParseReboot(t *testing.T) {
	for _, name := range []string{"none", "agents", "ALL"} {
		if err := new(Reboot).Set(name); err != nil {
			t.Error(err)
		}
	}
	if err := new(Reboot).Set("servers"); err == nil {
		t.Error("Reboot.Set(servers) succeeded")
	}
	if err := (Scenario{Reboot: "x"}).WithDefaults().Validate(); err == nil {
		t.Error("reboot x validated")
	}
}
