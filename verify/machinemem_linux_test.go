package verify

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupMemoryLimit reads the memory limit of a process's cgroup
// from /proc/self/cgroup, /proc/self/mountinfo and the cgroup files, as
// the kernel lays them out under cgroup v2, v1 and both (hybrid), in a
// temporary directory in place of /.
func TestCgroupMemoryLimit(t *testing.T) {
	const (
		v2Mount     = "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
		hybridMount = "40 30 0:37 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n" +
			"34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n" +
			"31 30 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
		unlimitedV1 = "9223372036854771712"
	)
	for _, c := range []struct {
		name  string
		files map[string]string // path under the root: content
		limit int64
	}{
		{"v2: the service's limit", map[string]string{
			"proc/self/cgroup":    "0::/system.slice/k3s.service\n",
			"proc/self/mountinfo": v2Mount,
			"sys/fs/cgroup/system.slice/k3s.service/memory.max":  "2147483648\n",
			"sys/fs/cgroup/system.slice/memory.max":              "max\n",
			"sys/fs/cgroup/system.slice/k3s.service/memory.high": "1073741824\n",
		}, 2 << 30},
		{"v2: an ancestor's limit is lower", map[string]string{
			"proc/self/cgroup":    "0::/system.slice/k3s.service\n",
			"proc/self/mountinfo": v2Mount,
			"sys/fs/cgroup/system.slice/k3s.service/memory.max": "max\n",
			"sys/fs/cgroup/system.slice/memory.max":             "1073741824\n",
		}, 1 << 30},
		{"v2: both set, the ancestor's lower", map[string]string{
			"proc/self/cgroup":    "0::/system.slice/k3s.service\n",
			"proc/self/mountinfo": v2Mount,
			"sys/fs/cgroup/system.slice/k3s.service/memory.max": "2147483648\n",
			"sys/fs/cgroup/system.slice/memory.max":             "1073741824\n",
		}, 1 << 30},
		{"v2: none set", map[string]string{
			"proc/self/cgroup":    "0::/system.slice/k3s.service\n",
			"proc/self/mountinfo": v2Mount,
			"sys/fs/cgroup/system.slice/k3s.service/memory.max": "max\n",
			"sys/fs/cgroup/system.slice/memory.max":             "max\n",
		}, 0},
		{"v2: a container in its own cgroup namespace", map[string]string{
			"proc/self/cgroup":           "0::/\n",
			"proc/self/mountinfo":        "1205 1200 0:26 / /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n",
			"sys/fs/cgroup/memory.max":   "536870912\n",
			"sys/fs/cgroup/cgroup.procs": "1\n",
		}, 512 << 20},
		{"v2: a container that mounts its own cgroup", map[string]string{
			"proc/self/cgroup":         "0::/kubepods/burstable/pod1/abc\n",
			"proc/self/mountinfo":      "700 690 0:26 /kubepods/burstable/pod1/abc /sys/fs/cgroup ro - cgroup2 cgroup rw\n",
			"sys/fs/cgroup/memory.max": "805306368\n",
		}, 768 << 20},
		{"v2: a mount point with a space", map[string]string{
			"proc/self/cgroup":    "0::/a\n",
			"proc/self/mountinfo": `30 22 0:26 / /cg\040two rw - cgroup2 cgroup2 rw` + "\n",
			"cg two/a/memory.max": "300000000\n",
		}, 300000000},
		{"hybrid, this machine's layout: v1 unlimited, v2 without the memory controller", map[string]string{
			"proc/self/cgroup":    "9:name=systemd:/\n4:memory:/process_api/7da4\n1:cpu:/\n0::/\n",
			"proc/self/mountinfo": hybridMount,
			"sys/fs/cgroup/memory/process_api/7da4/memory.limit_in_bytes": unlimitedV1,
			"sys/fs/cgroup/memory/process_api/memory.limit_in_bytes":      unlimitedV1,
			"sys/fs/cgroup/memory/memory.limit_in_bytes":                  unlimitedV1,
			"sys/fs/cgroup/unified/cgroup.procs":                          "1\n",
		}, 0},
		{"v1: a limit", map[string]string{
			"proc/self/cgroup":    "4:memory:/docker/abc\n0::/\n",
			"proc/self/mountinfo": hybridMount,
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1073741824\n",
			"sys/fs/cgroup/memory/docker/memory.limit_in_bytes":     unlimitedV1,
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            unlimitedV1,
		}, 1 << 30},
		{"v1 and v2 both set: the lower", map[string]string{
			"proc/self/cgroup":                             "4:cpu,memory:/a\n0::/a\n",
			"proc/self/mountinfo":                          hybridMount,
			"sys/fs/cgroup/memory/a/memory.limit_in_bytes": "536870912\n",
			"sys/fs/cgroup/unified/a/memory.max":           "1073741824\n",
		}, 512 << 20},
		{"v1 mounted without its memory controller", map[string]string{
			"proc/self/cgroup":                          "4:memory:/a\n",
			"proc/self/mountinfo":                       "31 30 0:28 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n",
			"sys/fs/cgroup/cpu/a/memory.limit_in_bytes": "1073741824\n",
		}, 0},
		{"unreadable values", map[string]string{
			"proc/self/cgroup":           "0::/a\n",
			"proc/self/mountinfo":        v2Mount,
			"sys/fs/cgroup/a/memory.max": "lots\n",
		}, 0},
		{"no /proc", map[string]string{}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range c.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if got := cgroupMemoryLimit(root); got != c.limit {
				t.Errorf("limit %d, want %d", got, c.limit)
			}
		})
	}
}

// TestMachineMemory: Linux tells the machine's memory.
func TestMachineMemory(t *testing.T) {
	if _, physical := machineMemory(); physical <= 0 {
		t.Fatalf("physical memory %d", physical)
	}
}
