package flock

import "testing"

// The spellings the docker provider (terraform-provider-docker's
// nanoInt64ToDecimalString) reads back for these quotas, as seen on a real
// engine: one core is "1.0", not "1".
func TestCPUStringIsTheProvidersReadBack(t *testing.T) {
	for cores, want := range map[float64]string{
		0.5: "0.5", 1: "1.0", 2: "2.0", 1.5: "1.5", 0.25: "0.25", 0.125: "0.125",
		10: "10.", 20: "20.", 64: "64.0", 10.5: "10.5", 0.05: "0.1",
	} {
		if got := CPUString(cores); got != want {
			t.Errorf("CPUString(%v) = %q, want %q", cores, got, want)
		}
	}
}

func TestCPURoundTrips(t *testing.T) {
	for cores, want := range map[float64]bool{0.5: true, 1: true, 10: true, 1.25: true, 0.05: false, 0.01: false, 10.05: false} {
		if got := cpuRoundTrips(cores); got != want {
			t.Errorf("cpuRoundTrips(%v) = %v, want %v", cores, got, want)
		}
	}
}
