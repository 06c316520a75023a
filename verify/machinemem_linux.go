//go:build linux

package verify

import (
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// machineMemory returns what bounds this process's memory, for
// defaultScryptMemory: its cgroup's limit and the machine's (0: unknown).
func machineMemory() (cgroup, physical int64) {
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		physical = int64(si.Totalram) * int64(si.Unit)
	}
	return cgroupMemoryLimit("/"), physical
}

// cgroupMemoryLimit returns the lowest memory limit set on this process's
// cgroup or one above it, v2's memory.max or v1's memory.limit_in_bytes,
// as the files under root ("/" but in tests) show them:
// /proc/self/cgroup names the cgroup in each hierarchy,
// /proc/self/mountinfo where that hierarchy is mounted. 0: none.
func cgroupMemoryLimit(root string) int64 {
	cgroups, _ := os.ReadFile(path.Join(root, "/proc/self/cgroup"))
	mounts, _ := os.ReadFile(path.Join(root, "/proc/self/mountinfo"))
	var limit int64
	for line := range strings.Lines(string(cgroups)) {
		// hierarchy-ID:controller-list:cgroup-path
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) < 3 || !strings.HasPrefix(f[2], "/") {
			continue
		}
		v1 := hasMemory(f[1])
		if !v1 && (f[0] != "0" || f[1] != "") { // v2 is hierarchy 0
			continue
		}
		mountpoint, dir, ok := mountOf(string(mounts), v1, f[2])
		if !ok {
			continue
		}
		file := "memory.max"
		if v1 {
			file = "memory.limit_in_bytes"
		}
		for {
			if n, ok := readLimit(path.Join(root, dir, file)); ok && (limit == 0 || n < limit) {
				limit = n
			}
			if dir == mountpoint || dir == "/" || dir == "." {
				break
			}
			dir = path.Dir(dir)
		}
	}
	return limit
}

// hasMemory reports whether a comma-separated list names the memory
// controller.
func hasMemory(list string) bool { return slices.Contains(strings.Split(list, ","), "memory") }

// mountOf returns the mount point of v1's memory hierarchy, or v2's,
// that holds cgroup cg, and cg's directory under it (in a container, the
// mount's root may be cg or an ancestor of it).
func mountOf(mountinfo string, v1 bool, cg string) (mountpoint, dir string, ok bool) {
	for line := range strings.Lines(mountinfo) {
		// id parent major:minor root mount-point options [optional...] - fstype source super-options
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if sep < 6 || len(f) < sep+4 || v1 && (f[sep+1] != "cgroup" || !hasMemory(f[sep+3])) ||
			!v1 && f[sep+1] != "cgroup2" {
			continue
		}
		mroot, mp := unescapeMount.Replace(f[3]), unescapeMount.Replace(f[4])
		if rel, ok := strings.CutPrefix(cg, mroot); ok && (mroot == "/" || rel == "" || rel[0] == '/') {
			return mp, path.Join(mp, rel), true
		}
	}
	return "", "", false
}

// unescapeMount undoes the escapes mountinfo writes in a path.
var unescapeMount = strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)

// readLimit returns the limit in file, if one is set: v2 writes "max"
// for none, v1 a number past 2^62.
func readLimit(file string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil && n > 0 && n < 1<<62
}
