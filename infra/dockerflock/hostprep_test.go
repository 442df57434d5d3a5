package dockerflock_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/ai-flock/ai-flock/infra/dockerflock"
	"github.com/ai-flock/ai-flock/infra/flock"
)

// hostFlock validates a flock of n agents with directories of diskMiB under a
// temporary root, runs its layout script as root, and returns the model and
// a runner of host scripts. Every agent's cleanup script runs at the end, so
// no filesystem stays mounted.
func hostFlock(t *testing.T, n, diskMiB int) (flock.Model, func(string) (string, error)) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("FLOCK_REQUIRE_DOCKER") == "1" {
			t.Fatal("needs root to run the host script (CI runs as root)")
		}
		t.Skip("needs root to run the host script")
	}
	root := t.TempDir()
	m, err := flock.Config{
		Target: "docker", AgentCount: &n, Limits: flock.LimitsConfig{DiskMiB: &diskMiB},
		Shared: flock.SharedConfig{Root: filepath.Join(root, "shared"), StateRoot: filepath.Join(root, "state")},
	}.Validate()
	if err != nil {
		t.Fatal(err)
	}
	run := func(script string) (string, error) {
		cmd := exec.Command("sh", "-s")
		cmd.Stdin = strings.NewReader(script)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		for _, a := range m.Agents {
			if out, err := run(dockerflock.AgentCleanupScript(m, a)); err != nil {
				t.Errorf("cleanup of %s: %v\n%s", a.ID, err, out)
			}
		}
	})
	if out, err := run(dockerflock.LayoutScript(m)); err != nil {
		t.Fatalf("layout: %v\n%s", err, out)
	}
	return m, run
}

// The agent script runs as root on the host. An agent owns everything inside
// its directory, so it can swap anything there for a symlink to any host
// path; the script must never chown or chmod through one. Runs the real
// script with sh as root (CI is root).
func TestAgentScriptNeverFollowsAgentSymlinks(t *testing.T) {
	m, run := hostFlock(t, 2, 32)
	a1, a2 := m.Agents[0], m.Agents[1]
	for _, a := range m.Agents {
		if out, err := run(dockerflock.AgentScript(m, a, "SEED")); err != nil {
			t.Fatalf("%s: %v\n%s", a.ID, err, out)
		}
	}
	victim := m.Shared.AgentDir(a2.ID) // another agent's directory
	hostDir := filepath.Join(filepath.Dir(m.Shared.Root), "host-etc")
	if err := os.Mkdir(hostDir, 0o755); err != nil {
		t.Fatal(err)
	}
	owner := func(p string) (uint32, os.FileMode) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Uid, fi.Mode().Perm()
	}

	// What agent-1 can do with its own key inside its own directory: make
	// tasks/ and inbox/ symlinks to another agent's directory and to a host dir.
	dir1 := m.Shared.AgentDir(a1.ID)
	for name, target := range map[string]string{"tasks": victim, "inbox": hostDir} {
		_ = os.RemoveAll(filepath.Join(dir1, name))
		if err := os.Symlink(target, filepath.Join(dir1, name)); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := run(dockerflock.AgentScript(m, a1, "SEED2")); err != nil {
		t.Fatalf("re-running agent-1's script: %v\n%s", err, out)
	}
	if uid, mode := owner(victim); uid != uint32(a2.UID) || mode != 0o700 {
		t.Fatalf("agent-2's directory is now uid %d mode %o: the script followed agent-1's symlink", uid, mode)
	}
	if uid, mode := owner(hostDir); uid != 0 || mode != 0o755 {
		t.Fatalf("a host directory is now uid %d mode %o: the script followed agent-1's symlink", uid, mode)
	}

	// The directory and log themselves sit in root's directories; were they
	// ever not what they should be, the script refuses rather than follow.
	if out, err := run(dockerflock.AgentCleanupScript(m, a1)); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, out)
	}
	if err := os.Rename(dir1, dir1+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hostDir, dir1); err != nil {
		t.Fatal(err)
	}
	out, err := run(dockerflock.AgentScript(m, a1, "SEED3"))
	if err == nil || !strings.Contains(out, "refusing to prepare "+dir1+": a symbolic link") {
		t.Fatalf("agent directory replaced by a symlink: err %v, %q", err, out)
	}
	if uid, mode := owner(hostDir); uid != 0 || mode != 0o755 {
		t.Fatalf("host directory changed to uid %d mode %o", uid, mode)
	}
	log := m.Shared.LogFile(a2.ID)
	if err := os.Remove(log); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(hostDir, "passwd"), log); err != nil {
		t.Fatal(err)
	}
	out, err = run(dockerflock.AgentScript(m, a2, "SEED4"))
	if err == nil || !strings.Contains(out, "refusing to prepare "+log+": a symbolic link") {
		t.Fatalf("log replaced by a symlink: err %v, %q", err, out)
	}
	if _, err := os.Stat(filepath.Join(hostDir, "passwd")); !os.IsNotExist(err) {
		t.Fatalf("the script created the symlink's target: %v", err)
	}
}

// Every agent's script sources the host library the layout step installed:
// root's alone (0600 in a 0700 directory), and checked first, so a library
// that is missing or not the one this flock installed runs nothing as root.
func TestAgentScriptChecksItsHostLibrary(t *testing.T) {
	m, run := hostFlock(t, 1, 32)
	a := m.Agents[0]
	lib := dockerflock.AgentLibraryFile(m)
	for p, want := range map[string]os.FileMode{lib: 0o600, filepath.Dir(lib): 0o700 | os.ModeDir} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != 0 || fi.Mode() != want {
			t.Errorf("%s: uid %d mode %v, want root's %v", p, uid, fi.Mode(), want)
		}
	}
	f, err := os.OpenFile(lib, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	_, _ = fmt.Fprintf(f, "touch %s\n", marker)
	_ = f.Close()
	out, err := run(dockerflock.AgentScript(m, a, "SEED"))
	if err == nil || !strings.Contains(out, lib+" is missing or not this flock's") {
		t.Fatalf("a changed library: err %v, %q", err, out)
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the script ran a changed library: %v", err)
	}
	if _, err := os.Stat(m.Shared.DiskImage(a.ID)); !os.IsNotExist(err) {
		t.Fatalf("the script made a disk without its library: %v", err)
	}
	if err := os.Remove(lib); err != nil {
		t.Fatal(err)
	}
	if out, err := run(dockerflock.AgentScript(m, a, "SEED")); err == nil || !strings.Contains(out, "is missing or not this flock's") {
		t.Fatalf("no library: err %v, %q", err, out)
	}
	// The layout step installs it again.
	if out, err := run(dockerflock.LayoutScript(m)); err != nil {
		t.Fatalf("layout: %v\n%s", err, out)
	}
	if out, err := run(dockerflock.AgentScript(m, a, "SEED")); err != nil {
		t.Fatalf("after the layout step: %v\n%s", err, out)
	}
}

// An agent's directory is a filesystem of diskMiB: writing past it fails with
// ENOSPC there, while the host's free space and the other agent's directory
// are untouched. A larger diskMiB grows it in place, a smaller one is
// refused, files of a directory made before quotas move in, and when the
// filesystem is not mounted the agent can write nothing at all.
func TestAgentDiskQuota(t *testing.T) {
	const mib = 32
	m, run := hostFlock(t, 3, mib)
	a1, a2, a3 := m.Agents[0], m.Agents[1], m.Agents[2]
	// agent-3 comes from a flock without quotas: a plain directory with files.
	dir3 := m.Shared.AgentDir(a3.ID)
	if err := os.MkdirAll(filepath.Join(dir3, "tasks", "t1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir3, "tasks", "t1", "out"), []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, a := range m.Agents {
		if out, err := run(dockerflock.AgentScript(m, a, "SEED")); err != nil {
			t.Fatalf("%s: %v\n%s", a.ID, err, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir3, "tasks", "t1", "out")); err != nil || string(b) != "kept" {
		t.Fatalf("agent-3's earlier files did not move into its filesystem: %q %v", b, err)
	}
	if left, _ := filepath.Glob(dir3 + ".unquoted.*"); len(left) > 0 {
		t.Errorf("left behind: %v", left)
	}

	// What the host gives agent-1's filesystem is its image file's blocks
	// (the free space of the whole disk moves with whatever else writes to
	// it, say the tests beside this one).
	allocatedTo := func(id string) int64 {
		var st syscall.Stat_t
		if err := syscall.Stat(m.Shared.DiskImage(id), &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	allocated := func() int64 { return allocatedTo(a1.ID) }
	// Nothing may zero the filesystem's metadata through the loop device
	// later (the loop driver turns zeroing into hole punches in the image,
	// handing the reserved blocks back to the host): every inode table is
	// zeroed when the image is made, and the mount forbids the kernel's lazy
	// zeroing (for images grown offline, or made by an older flock).
	if out, err := exec.Command("dumpe2fs", m.Shared.DiskImage(a1.ID)).CombinedOutput(); err != nil {
		t.Fatalf("dumpe2fs: %v\n%s", err, out)
	} else if groups, zeroed := len(blockGroup.FindAll(out, -1)), strings.Count(string(out), "ITABLE_ZEROED"); groups == 0 || zeroed != groups {
		t.Errorf("agent-1's image: %d of %d block groups have their inode table zeroed; the kernel would zero the rest through the loop device", zeroed, groups)
	}
	if opts := mountOptions(t, m.Shared.AgentDir(a1.ID)); !strings.Contains(opts, "noinit_itable") {
		t.Errorf("agent-1's filesystem is mounted with %q: without noinit_itable the kernel zeroes inode tables through the loop device", opts)
	}
	before := allocated()
	if before < mib<<20 {
		t.Fatalf("agent-1's image holds %d bytes of the host's disk before it is used, want its %d MiB allocated", before, mib)
	}
	dir1 := m.Shared.AgentDir(a1.ID)
	written, err := fill(filepath.Join(dir1, "junk"), 4*mib<<20)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("agent-1 wrote %d bytes into a %d MiB directory, then: %v (want ENOSPC)", written, mib, err)
	}
	if written > mib<<20 {
		t.Fatalf("agent-1 wrote %d bytes, past its %d MiB", written, mib)
	}
	// The image was allocated up front: filling it takes nothing more from
	// the host.
	if grown := allocated() - before; grown != 0 {
		t.Errorf("agent-1's image took %d more bytes of the host's disk while agent-1 filled its %d MiB", grown, mib)
	}
	t.Logf("agent-1: %d bytes written, then ENOSPC; its image holds %d bytes of the host's disk, before and after", written, before)
	if _, err := fill(filepath.Join(m.Shared.AgentDir(a2.ID), "ok"), 1<<20); err != nil {
		t.Errorf("agent-2 cannot write after agent-1 filled its own directory: %v", err)
	}
	// A hole in an image (an older flock's lazy zeroing left some) is filled
	// by the next prepare step: the agent's blocks are reserved again.
	if out, err := run("fallocate -p -o 4194304 -l 8388608 " + m.Shared.DiskImage(a2.ID)); err != nil {
		t.Fatalf("punching a hole: %v\n%s", err, out)
	}
	if got := allocatedTo(a2.ID); got >= mib<<20 {
		t.Fatalf("agent-2's image holds %d bytes after a hole was punched in it: this host does not punch holes", got)
	}
	if out, err := run(dockerflock.AgentScript(m, a2, "SEED")); err != nil {
		t.Fatalf("%s: %v\n%s", a2.ID, err, out)
	}
	if got := allocatedTo(a2.ID); got < mib<<20 {
		t.Errorf("agent-2's image holds %d bytes of the host's disk after its prepare step ran again, want its %d MiB allocated", got, mib)
	}

	// Grow: online where the host allows it (this sandbox may not), and in
	// any case when the filesystem is next mounted; files kept.
	grow := m
	grow.Agents = append([]flock.Agent(nil), m.Agents...)
	grow.Agents[0].Limits.DiskMiB = 2 * mib
	if out, err := run(dockerflock.AgentScript(grow, grow.Agents[0], "SEED")); err != nil {
		t.Fatalf("growing agent-1: %v\n%s", err, out)
	}
	if out, err := run(dockerflock.AgentCleanupScript(m, a1) + "\n" + dockerflock.AgentScript(grow, grow.Agents[0], "SEED")); err != nil {
		t.Fatalf("re-mounting agent-1: %v\n%s", err, out)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir1, &fs); err != nil {
		t.Fatal(err)
	}
	if size := int64(fs.Blocks) * int64(fs.Bsize); size <= mib<<20 {
		t.Errorf("agent-1's filesystem is %d bytes after growing to %d MiB", size, 2*mib)
	}
	if got := allocated(); got < 2*mib<<20 {
		t.Errorf("agent-1's image holds %d bytes of the host's disk after growing, want its %d MiB allocated", got, 2*mib)
	}
	if _, err := os.Stat(filepath.Join(dir1, "junk")); err != nil {
		t.Errorf("growing lost agent-1's files: %v", err)
	}
	// Shrink: refused, with what to do.
	shrink := grow
	shrink.Agents = append([]flock.Agent(nil), grow.Agents...)
	shrink.Agents[0].Limits.DiskMiB = mib
	out, err := run(dockerflock.AgentScript(shrink, shrink.Agents[0], "SEED"))
	if err == nil || !strings.Contains(out, "cannot shrink") {
		t.Errorf("shrinking agent-1's filesystem: err %v, %q (want it refused)", err, out)
	}

	// Unmounted (the flock destroyed, or a host reboot): the directory under
	// the mount is root's and closed, so an agent cannot write past its quota.
	if out, err := run(dockerflock.AgentCleanupScript(m, a1)); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, out)
	}
	fi, err := os.Stat(dir1)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm() != 0 {
		t.Errorf("unmounted, agent-1's directory is uid %d mode %o: want root's, mode 0", st.Uid, fi.Mode().Perm())
	}
	// Mounted again, its files are there.
	if out, err := run(dockerflock.AgentScript(grow, grow.Agents[0], "SEED")); err != nil {
		t.Fatalf("re-preparing agent-1: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir1, "junk")); err != nil {
		t.Errorf("agent-1's files are gone after an unmount and mount: %v", err)
	}

	// A reboot unmounts every image; the VM's boot script mounts them again
	// (agent-1's and agent-2's), but not one whose agent was removed (the
	// cleanup took its mount point off the list).
	for _, a := range m.Agents {
		if out, err := exec.Command("umount", m.Shared.AgentDir(a.ID)).CombinedOutput(); err != nil {
			t.Fatalf("umount: %v %s", err, out)
		}
	}
	if out, err := run(dockerflock.AgentCleanupScript(m, a3)); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, out)
	}
	// An image with a hole (as an older flock's left) is whole again after boot.
	if out, err := run("fallocate -p -o 4194304 -l 8388608 " + m.Shared.DiskImage(a2.ID)); err != nil {
		t.Fatalf("punching a hole: %v\n%s", err, out)
	}
	boot := exec.Command("sh", "../../provision/flock-mount-disks.sh", m.Shared.StateRoot)
	if out, err := boot.CombinedOutput(); err != nil {
		t.Fatalf("boot mount: %v\n%s", err, out)
	}
	mounted := func(dir string) bool { return exec.Command("mountpoint", "-q", dir).Run() == nil }
	if !mounted(dir1) || !mounted(m.Shared.AgentDir(a2.ID)) || mounted(dir3) {
		t.Errorf("after the boot script: agent-1 mounted %v, agent-2 %v, removed agent-3 %v; want true, true, false", mounted(dir1), mounted(m.Shared.AgentDir(a2.ID)), mounted(dir3))
	}
	if _, err := os.Stat(filepath.Join(dir1, "junk")); err != nil {
		t.Errorf("agent-1's files after the boot script: %v", err)
	}
	if got := allocatedTo(a2.ID); got < mib<<20 {
		t.Errorf("agent-2's image holds %d bytes of the host's disk after the boot script, want its %d MiB allocated", got, mib)
	}
	if opts := mountOptions(t, m.Shared.AgentDir(a2.ID)); !strings.Contains(opts, "noinit_itable") {
		t.Errorf("the boot script mounts agent-2's filesystem with %q, want noinit_itable", opts)
	}
}

// fill writes up to n bytes of zeros to a new file, syncing, and returns how
// many it wrote and the error that stopped it.
func fill(path string, n int) (int, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	written := 0
	for written < n {
		k, err := f.Write(buf)
		written += k
		if err != nil {
			return written, err
		}
	}
	if err := f.Sync(); err != nil {
		return written, fmt.Errorf("sync: %w", err)
	}
	return written, nil
}

// An agent's log file is a host path its UID can write: it lives on a
// filesystem of its own (flock.LogDiskMiB), so however much the agent
// writes, the host's disk gives nothing more. A log of an older flock (a
// plain host file) moves in, its newest MiB kept. Runs the real script as
// root.
func TestAgentLogDisk(t *testing.T) {
	m, run := hostFlock(t, 1, 32)
	a1 := m.Agents[0]
	legacy := m.Shared.LegacyLogFile(a1.ID)
	old := append(bytes.Repeat([]byte("an old line of the log\n"), 200_000), "the last old line\n"...)
	if err := os.WriteFile(legacy, old, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := run(dockerflock.AgentScript(m, a1, "SEED")); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := os.Lstat(legacy); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the old host log file is still there: %v", err)
	}
	log := m.Shared.LogFile(a1.ID)
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(b, []byte("the last old line\n")) || len(b) > 1<<20 {
		t.Errorf("the old log moved in as %d bytes ending %q: want its newest MiB", len(b), b[max(0, len(b)-20):])
	}
	fi, err := os.Stat(log)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Uid) != a1.UID || fi.Mode().Perm() != 0o600 {
		t.Errorf("log file uid %d mode %o: want %d, 0600", st.Uid, fi.Mode().Perm(), a1.UID)
	}
	if di, err := os.Stat(m.Shared.LogDir(a1.ID)); err != nil {
		t.Fatal(err)
	} else if st := di.Sys().(*syscall.Stat_t); st.Uid != 0 || di.Mode().Perm() != 0o755 {
		t.Errorf("log directory uid %d mode %o: want root's, 0755", st.Uid, di.Mode().Perm())
	}

	// What the log takes from the host's disk is its image's allocation,
	// made in full up front (other writers on this disk make its free
	// space too noisy a measure here; the e2e probe measures that).
	allocated := func() int64 {
		var st syscall.Stat_t
		if err := syscall.Stat(m.Shared.LogImage(a1.ID), &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	before := allocated()
	// As the agent writes it: the file it was given, written over.
	written, err := fill(log, 512<<20)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("%d bytes written into the log, then: %v (want ENOSPC)", written, err)
	}
	if written > flock.LogDiskMiB<<20 {
		t.Errorf("%d bytes written into the log, past its %d MiB filesystem", written, flock.LogDiskMiB)
	}
	_ = exec.Command("sync").Run()
	if after := allocated(); after > before || after > flock.LogDiskMiB<<20+1<<20 {
		t.Errorf("the log's image took %d bytes of the host's disk before the fill and %d after", before, after)
	}
	t.Logf("log: %d bytes written, then ENOSPC; the image's allocation on the host: %d bytes", written, before)

	// Unmounted, the log file is not there to be mounted (the container
	// does not start) rather than a file on the host's disk.
	if out, err := run(dockerflock.AgentCleanupScript(m, a1)); err != nil {
		t.Fatalf("cleanup: %v\n%s", err, out)
	}
	if _, err := os.Stat(log); err == nil {
		t.Error("with its filesystem unmounted, the log file still exists on the host's disk")
	}
	if out, err := run(dockerflock.AgentScript(m, a1, "SEED")); err != nil {
		t.Fatalf("again: %v\n%s", err, out)
	}
	if out, err := exec.Command("umount", m.Shared.LogDir(a1.ID)).CombinedOutput(); err != nil {
		t.Fatalf("umount: %v %s", err, out)
	}
	if out, err := exec.Command("sh", "../../provision/flock-mount-disks.sh", m.Shared.StateRoot).CombinedOutput(); err != nil {
		t.Fatalf("boot mount: %v\n%s", err, out)
	}
	if err := exec.Command("mountpoint", "-q", m.Shared.LogDir(a1.ID)).Run(); err != nil {
		t.Error("the boot script did not mount the log's filesystem again")
	}
}

// blockGroup is the line dumpe2fs prints for each block group.
var blockGroup = regexp.MustCompile(`(?m)^Group [0-9]+:`)

// mountOptions returns the options of the filesystem mounted at dir (its
// mount and superblock options), or fails the test if none is.
func mountOptions(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == dir {
			return strings.Join(f[5:], " ")
		}
	}
	t.Fatalf("nothing is mounted at %s", dir)
	return ""
}
