package fargate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Fargate limits a task's CPU and memory as a whole (the task size): the
// replay puts every container of a task (and its pause container) under
// one cgroup per task, with the task's memory (no swap) and CPU (a CFS
// quota) as its limits, and gives the engine that cgroup as each
// container's parent. cgroup v1 (cgroupfs), as on the engines this runs on.

const cgroupRoot = "/sys/fs/cgroup"

// cgroupParent is task id's cgroup, as the engine's cgroupParent.
func cgroupParent(id string) string { return "/flock-fargate/" + id }

// makeCgroup makes task id's cgroup with its limits: memory MiB, CPU units
// (1024 a vCPU).
func makeCgroup(id string, cpu, memoryMiB int) error {
	if _, err := os.Stat(filepath.Join(cgroupRoot, "memory")); err != nil {
		return fmt.Errorf("the replay limits each task with cgroup v1 (cgroupfs): no %s/memory here", cgroupRoot)
	}
	mem := filepath.Join(cgroupRoot, "memory", cgroupParent(id))
	cpuDir := filepath.Join(cgroupRoot, "cpu", cgroupParent(id))
	for _, d := range []string{mem, cpuDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("task cgroup: %w", err)
		}
	}
	limit := strconv.FormatInt(int64(memoryMiB)<<20, 10)
	write := func(dir, file, v string) error {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
			return fmt.Errorf("task cgroup %s: %w", file, err)
		}
		return nil
	}
	if err := write(mem, "memory.limit_in_bytes", limit); err != nil {
		return err
	}
	// No swap: memory and swap together are held to the same limit, where
	// the kernel accounts swap.
	if _, err := os.Stat(filepath.Join(mem, "memory.memsw.limit_in_bytes")); err == nil {
		if err := write(mem, "memory.memsw.limit_in_bytes", limit); err != nil {
			return err
		}
	}
	const period = 100000
	return errors.Join(write(cpuDir, "cpu.cfs_period_us", strconv.Itoa(period)),
		write(cpuDir, "cpu.cfs_quota_us", strconv.Itoa(cpu*period/1024)))
}

// removeCgroups removes task id's cgroup (every task's with id ""), once
// its containers are gone.
func removeCgroups(id string) error {
	var errs []error
	for _, ctrl := range []string{"memory", "cpu", "cpuacct", "cpuset", "pids", "blkio", "devices", "freezer", "systemd"} {
		dir := filepath.Join(cgroupRoot, ctrl, "flock-fargate")
		if id != "" {
			dir = filepath.Join(dir, id)
		}
		errs = append(errs, removeTree(dir))
	}
	return errors.Join(errs...)
}

// removeTree removes a cgroup directory and the ones below it (rmdir only:
// a cgroup's files cannot be removed).
func removeTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}
