package awsflock

import (
	"fmt"
	"math"

	"github.com/ai-flock/ai-flock/infra/flock"
)

// TaskSize is a Fargate task size: CPU units (1024 = 1 vCPU) and memory MiB.
type TaskSize struct {
	CPU    int
	Memory int
}

// fargateSizes lists the Fargate Linux CPU sizes and, for each, the memory
// range and step it allows (AWS ECS task size table).
var fargateSizes = []struct{ cpu, lo, hi, step int }{
	{256, 512, 2048, 0}, // 512, 1024, 2048
	{512, 1024, 4096, 1024},
	{1024, 2048, 8192, 1024},
	{2048, 4096, 16384, 1024},
	{4096, 8192, 30720, 1024},
	{8192, 16384, 61440, 4096},
	{16384, 32768, 122880, 8192},
}

// ContainerCPU is the container's CPU share in units (1024 = 1 vCPU).
func ContainerCPU(l flock.Limits) int { return int(math.Ceil(l.CPUs * 1024)) }

// SizeFor returns the smallest Fargate task size that holds a container with
// limits l: the container keeps the model's exact CPU units and memory limit,
// the task around it is what Fargate can bill.
func SizeFor(l flock.Limits) (TaskSize, error) {
	cpu := ContainerCPU(l)
	for _, s := range fargateSizes {
		if s.cpu < cpu {
			continue
		}
		if s.step == 0 {
			for _, m := range []int{512, 1024, 2048} {
				if m >= l.MemoryMiB {
					return TaskSize{s.cpu, m}, nil
				}
			}
			continue
		}
		if l.MemoryMiB > s.hi {
			continue
		}
		m := s.lo
		for m < l.MemoryMiB {
			m += s.step
		}
		return TaskSize{s.cpu, m}, nil
	}
	return TaskSize{}, fmt.Errorf("%v vCPU and %d MiB exceed the largest Fargate task (16 vCPU, 120 GiB)", l.CPUs, l.MemoryMiB)
}
