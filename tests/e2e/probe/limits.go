// The limit probes: a disk filled, a fork loop, a memory hog, CPU burnt.

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// fill writes mib MiB of zeros to path in 1 MiB writes; with last, it then
// takes the filesystem's last bytes too, in ever smaller writes (under
// gVisor a file the host removes may keep its space while the sandbox
// holds it, so a probe of a directory leaves the slack the 1 MiB writes
// leave).
func fill(path string, mib int, last bool) {
	f, err := os.Create(path)
	if err != nil {
		fail(err)
	}
	buf := make([]byte, 1<<20)
	written := 0
	for i := 0; i < mib && err == nil; i++ {
		var n int
		n, err = f.Write(buf)
		written += n
	}
	// As a hostile agent would: the last bytes too, in ever smaller writes.
	for chunk := len(buf) / 2; last && err != nil && chunk > 0; chunk /= 2 {
		for {
			n, werr := f.Write(buf[:chunk])
			written += n
			if werr != nil {
				break
			}
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if err != nil {
		fmt.Printf("wrote %d bytes\n", written)
		fail(err)
	}
	ok(fmt.Sprintf("wrote %d bytes", written))
}

// forkLoop starts sleeping children until the kernel refuses, up to max,
// prints how many ran at once, then stops them.
func forkLoop(maxArg string) {
	max, _ := strconv.Atoi(maxArg)
	self, _ := os.Executable()
	var kids []*exec.Cmd
	var lastErr error
	for len(kids) < max {
		c := exec.Command(self, "sleep", "60s")
		if err := c.Start(); err != nil {
			lastErr = err
			break
		}
		kids = append(kids, c)
	}
	fmt.Printf("started %d\n", len(kids))
	if lastErr != nil {
		fmt.Printf("refused: %v\n", lastErr)
	}
	for _, c := range kids {
		c.Process.Kill()
		c.Wait()
	}
	if lastErr == nil {
		os.Exit(1) // never refused: no limit held
	}
	os.Exit(0)
}

// hog touches memory until the kernel kills it, reporting progress.
func hog() {
	var chunks [][]byte
	for i := 1; ; i++ {
		b := make([]byte, 8<<20)
		for j := 0; j < len(b); j += 4096 {
			b[j] = 1
		}
		chunks = append(chunks, b)
		fmt.Printf("allocated %d MiB\n", i*8)
		if i*8 >= 4096 {
			os.Exit(1) // 4 GiB and alive: no limit
		}
	}
}

// burn spins every CPU for a while and reports the CPU time it got.
func burn(secs string) {
	d, _ := time.ParseDuration(secs)
	var stop atomic.Bool
	n := runtime.NumCPU()
	for i := 0; i < n; i++ {
		go func() {
			x := 0
			for !stop.Load() {
				x++
			}
		}()
	}
	start := time.Now()
	time.Sleep(d)
	stop.Store(true)
	wall := time.Since(start)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	json.NewEncoder(os.Stdout).Encode(map[string]float64{"wall": wall.Seconds(), "cpu": cpu.Seconds(), "cpus": float64(n)})
}
