package agent

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodepass/nodepass/agent/internal/statefile"
)

// stateFile is where testOptions' Client keeps the servers of program.
func stateFile(dir, program string) string {
	return filepath.Join(dir, "agent", "etc", program+"-agent-load-balancer.json")
}

// rke2 starts two RKE2 servers, 127.0.0.1 and 127.0.0.2, each a
// supervisor and an API server on two ports (9345 and 6443 in RKE2). Both
// supervisors announce the API servers in /v1-rke2/apiservers, as k3s's
// handlers do (pkg/server/handlers/handlers.go APIServers lists the
// kubernetes endpoints). It returns the supervisors, the API servers and
// the API servers' request counts.
func rke2(t *testing.T, cl *cluster) (sups [2]*supervisor, apis [2]string, hits func() int32) {
	api1, n1 := apiServer(t, cl, "127.0.0.1:0")
	_, apiPort, _ := net.SplitHostPort(api1)
	api2, n2 := apiServer(t, cl, "127.0.0.2:"+apiPort)
	port, _ := strconv.Atoi(apiPort)
	s1 := startSupervisor(t, cl, "rke2", "127.0.0.1:0", port)
	_, supPort, _ := net.SplitHostPort(s1.addr)
	s2 := startSupervisor(t, cl, "rke2", "127.0.0.2:"+supPort, port)
	s1.announce, s2.announce = []string{api1, api2}, []string{api1, api2}
	return [2]*supervisor{s1, s2}, [2]string{api1, api2}, func() int32 { return n1.Load() + n2.Load() }
}

// RKE2: the agent learns the API servers' addresses and uses each host
// with the supervisor's port, as k3s's agent does when the servers'
// configuration gives two ports (pkg/agent/proxy/apiproxy.go
// setSupervisorPort, called from pkg/agent/config/config.go). The API
// servers get no request; a restart uses both supervisors.
func TestRKE2SupervisorPort(t *testing.T) {
	cl := newCluster(t)
	sups, _, apiHits := rke2(t, cl)
	dir := t.TempDir()
	opts := func() *Options {
		o := testOptions(cl, sups[0].addr, dir, nil)
		o.Program, o.StopOnRejection = "rke2", true
		return o
	}
	learnServers(t, opts())
	st, err := statefile.Load(stateFile(dir, "rke2"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{sups[0].addr, sups[1].addr}
	if !slices.Equal(st.Addresses, want) {
		t.Errorf("servers kept %v, want the supervisors %v", st.Addresses, want)
	}
	get(t, newClient(t, opts()))
	if sups[1].total() == 0 {
		t.Error("the second supervisor got no request after a restart")
	}
	if n := apiHits(); n != 0 {
		t.Errorf("the API servers got %d requests, want 0", n)
	}
}

// A state file that an older agent kept with the API servers' ports: a
// server that answers 401 and is not the configured one is left out,
// and once the configuration gives the ports, the list moves to the
// supervisors' and is saved.
func TestRKE2StateFileWithAPIPorts(t *testing.T) {
	cl := newCluster(t)
	sups, apis, _ := rke2(t, cl)
	dir := t.TempDir()
	old := statefile.Servers{Default: "https://" + sups[0].addr, Addresses: []string{apis[0], apis[1], sups[0].addr}}
	if err := statefile.Save(stateFile(dir, "rke2"), old); err != nil {
		t.Fatal(err)
	}
	opts := testOptions(cl, sups[0].addr, dir, nil)
	opts.Program, opts.StopOnRejection = "rke2", true
	c := newClient(t, opts)
	get(t, c)
	want := []string{sups[0].addr, sups[1].addr}
	if got := c.servers.addresses(); !slices.Equal(got, want) {
		t.Errorf("servers %v, want %v", got, want)
	}
	if st, _ := statefile.Load(stateFile(dir, "rke2")); !slices.Equal(st.Addresses, want) {
		t.Errorf("state file %v, want %v", st.Addresses, want)
	}
}

// k3s answers /apiservers with [] only after 5 s when its datastore does
// not answer. The join never asks it (k3s's own join, pkg/agent/config
// get(), does not), and Renew asks it once, not again on a restart
// within the hour: a struggling server is asked once per agent.
func TestSlowAPIServers(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	s.slowAPIServers.Store(true)
	dir := t.TempDir()
	c := learnServers(t, testOptions(cl, s.addr, dir, nil))
	if st := c.Stats(); st.Attempts != 1 {
		t.Errorf("%d attempts, want 1", st.Attempts)
	}
	if n := s.count("GET /v1-k3s/apiservers"); n != 1 {
		t.Errorf("/apiservers asked %d times, want 1", n)
	}
	renewFor(t, testOptions(cl, s.addr, dir, nil), 1)
	if n := s.count("GET /v1-k3s/apiservers"); n != 1 {
		t.Errorf("/apiservers asked %d times after a restart, want 1", n)
	}
}

// A server that announces 200,000 servers: the agent keeps the first
// hundred, and a state file it can read back.
func TestHugeServerList(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	for i := range 200000 {
		s.announce = append(s.announce, fmt.Sprintf("10.%d.%d.%d:6443", i>>16, i>>8&255, i&255))
	}
	dir := t.TempDir()
	opts := testOptions(cl, s.addr, dir, nil)
	opts.HeaderTimeout, opts.RequestTimeout = 10*time.Second, 10*time.Second // 3 MB of JSON, under -race
	c := learnServers(t, opts)
	if n := len(c.servers.addresses()); n != maxServers+1 {
		t.Errorf("%d servers, want %d and the configured one", n, maxServers)
	}
	if _, err := statefile.Load(stateFile(dir, "k3s")); err != nil {
		t.Error(err)
	}
}

// A state file kept for another server (the node moved to another
// cluster) is ignored, as k3s's load balancer ignores it.
func TestStateFileOfAnotherServer(t *testing.T) {
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	dir := t.TempDir()
	if err := statefile.Save(stateFile(dir, "k3s"), statefile.Servers{Default: "https://10.9.9.9:6443", Addresses: []string{"10.9.9.9:6443"}}); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	c := newClient(t, testOptions(cl, s.addr, dir, &logs))
	if got := c.servers.addresses(); !slices.Equal(got, []string{s.addr}) {
		t.Errorf("servers %v, want only the configured one", got)
	}
	if !strings.Contains(logs.String(), "for another server") {
		t.Errorf("not logged:\n%s", logs.String())
	}
	if _, err := os.Stat(stateFile(dir, "k3s")); err != nil {
		t.Error(err)
	}
}

// An address that cannot be dialed (a port of "", 0, "abc" or 99999)
// is dropped and logged wherever it enters: the state file and the
// servers' /apiservers answer. It never reaches the rotation, nor
// Client.Servers, which a load balancer is made from.
func TestBadAddressesDropped(t *testing.T) {
	bad := []string{"127.0.0.1:", "127.0.0.1:0", "127.0.0.1:abc", "127.0.0.1:99999", ":6443"}
	cl := newCluster(t)
	s := newSupervisor(t, cl)
	good := newSupervisor(t, cl)
	s.announce = append([]string{good.addr, s.addr}, bad...)
	good.announce = s.announce
	dir := t.TempDir()
	path := stateFile(dir, "k3s")
	if err := statefile.Save(path, statefile.Servers{Default: "https://" + s.addr, Addresses: append([]string{s.addr}, bad...)}); err != nil {
		t.Fatal(err)
	}
	var logs logBuffer
	c := newClient(t, testOptions(cl, s.addr, dir, &logs))
	if _, all := c.Servers(); !slices.Equal(all, []string{s.addr}) {
		t.Errorf("servers %q from the state file, want %q", all, []string{s.addr})
	}
	if !strings.Contains(logs.String(), "ignoring addresses in the server list kept from an earlier run") || !strings.Contains(logs.String(), "127.0.0.1:99999") {
		t.Errorf("no log line of the addresses ignored:\n%s", logs.String())
	}

	old := time.Now().Add(-2 * learnEvery) // the servers are due to be asked
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	c = learnServers(t, testOptions(cl, s.addr, dir, nil))
	if _, all := c.Servers(); !slices.Equal(all, []string{good.addr, s.addr}) {
		t.Errorf("servers %q learnt, want %q", all, []string{good.addr, s.addr})
	}
	if st, err := statefile.Load(path); err != nil || len(st.Dropped) != 0 || !slices.Equal(st.Addresses, []string{good.addr, s.addr}) {
		t.Errorf("state file %+v, %v; want the two servers alone", st, err)
	}
}

func TestParseServers(t *testing.T) {
	list, dropped, err := parseServers([]byte(`["10.0.0.1:9345", "10.0.0.2:99999", "10.0.0.3", "10.0.0.4:0", "[2001:db8::1]:9345"]`))
	if err != nil || !slices.Equal(list, []string{"10.0.0.1:9345", "[2001:db8::1]:9345"}) ||
		!slices.Equal(dropped, []string{"10.0.0.2:99999", "10.0.0.3", "10.0.0.4:0"}) {
		t.Errorf("parseServers = %q, %q, %v", list, dropped, err)
	}
}
