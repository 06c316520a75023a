//go:build linux

package verify

import (
	"bufio"
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

// A cgroupVersion is where one version of cgroups keeps a memory limit.
type cgroupVersion struct {
	fstype string            // of its mounts in mountinfo
	owns   func(string) bool // whether a line of /proc/self/cgroup, its controllers field, is this version's memory controller
	file   string            // the limit of a cgroup, in its directory
	unset  func(string) bool // whether the file's value sets no limit
}

// cgroupVersions are v2 (memory.max, "max" when unset) and v1
// (memory.limit_in_bytes, a number past 2^62 when unset).
var cgroupVersions = []cgroupVersion{
	{"cgroup2", func(c string) bool { return c == "" }, "memory.max", func(v string) bool { return v == "max" }},
	{"cgroup", func(c string) bool { return slices.Contains(strings.Split(c, ","), "memory") }, "memory.limit_in_bytes",
		func(v string) bool { n, err := strconv.ParseInt(v, 10, 64); return err != nil || n >= 1<<62 }},
}

// cgroupMemoryLimit returns the lowest memory limit set on this process's
// cgroup or one above it, in either version, as the files under root
// ("/" but in tests) show them: /proc/self/cgroup names the cgroup,
// /proc/self/mountinfo where its hierarchy is mounted. 0: none.
func cgroupMemoryLimit(root string) int64 {
	var limit int64
	for _, v := range cgroupVersions {
		cg, ok := v.cgroup(root)
		if !ok {
			continue
		}
		mountpoint, dir, ok := v.mounted(root, cg)
		if !ok {
			continue
		}
		for {
			if n, ok := v.read(path.Join(root, dir, v.file)); ok && (limit == 0 || n < limit) {
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

// cgroup returns the path of the process's cgroup in v's hierarchy.
func (v cgroupVersion) cgroup(root string) (string, bool) {
	var cg string
	found := false
	scanLines(path.Join(root, "/proc/self/cgroup"), func(line string) {
		// hierarchy-ID:controller-list:cgroup-path
		f := strings.SplitN(line, ":", 3)
		if len(f) == 3 && !found && v.owns(f[1]) && (v.fstype != "cgroup2" || f[0] == "0") {
			cg, found = f[2], true
		}
	})
	return cg, found && strings.HasPrefix(cg, "/")
}

// mounted returns the mount point of v's hierarchy that holds cgroup cg,
// and cg's directory under it (in a container, the mount's root may be
// cg or an ancestor of it).
func (v cgroupVersion) mounted(root, cg string) (mountpoint, dir string, ok bool) {
	scanLines(path.Join(root, "/proc/self/mountinfo"), func(line string) {
		// id parent major:minor root mount-point options [optional...] - fstype source super-options
		f := strings.Fields(line)
		sep := slices.Index(f, "-")
		if ok || sep < 6 || len(f) < sep+4 || f[sep+1] != v.fstype {
			return
		}
		if v.fstype == "cgroup" && !slices.Contains(strings.Split(f[sep+3], ","), "memory") {
			return
		}
		mroot, mp := unescapeMount(f[3]), unescapeMount(f[4])
		switch {
		case mroot == "/":
			mountpoint, dir, ok = mp, path.Join(mp, cg), true
		case cg == mroot || strings.HasPrefix(cg, mroot+"/"):
			mountpoint, dir, ok = mp, path.Join(mp, strings.TrimPrefix(cg, mroot)), true
		}
	})
	return mountpoint, dir, ok
}

// read returns the limit in file, if it is set.
func (v cgroupVersion) read(file string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if v.unset(s) {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n > 0
}

// scanLines calls f with each line of file, if it can be read.
func scanLines(file string, f func(line string)) {
	fd, err := os.Open(file)
	if err != nil {
		return
	}
	defer fd.Close()
	sc := bufio.NewScanner(fd)
	for sc.Scan() {
		f(sc.Text())
	}
}

// unescapeMount undoes mountinfo's octal escapes (a space is \040).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
