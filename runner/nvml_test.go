package runner

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestDecodeClockReasons(t *testing.T) {
	tests := []struct {
		mask      uint64
		names     []string
		throttled bool
	}{
		{0, nil, false},
		{1, []string{"gpu_idle"}, false},
		{2, []string{"applications_clocks"}, false},
		{4, []string{"sw_power_cap"}, true},
		{8, []string{"hw_slowdown"}, true},
		{16, []string{"sync_boost"}, false},
		{32, []string{"sw_thermal_slowdown"}, true},
		{64, []string{"hw_thermal_slowdown"}, true},
		{128, []string{"hw_power_brake"}, true},
		{256, []string{"display_clocks"}, false},
		{1 | 4 | 64, []string{"gpu_idle", "sw_power_cap", "hw_thermal_slowdown"}, true},
		{1 << 40, []string{"bit_40"}, false},
	}
	for _, tt := range tests {
		names, thr := DecodeClockReasons(tt.mask)
		if !slices.Equal(names, tt.names) || thr != tt.throttled {
			t.Errorf("DecodeClockReasons(%#x) = %v, %v; want %v, %v", tt.mask, names, thr, tt.names, tt.throttled)
		}
	}
}

// TestOpenNVML runs on any machine: without a GPU (no library, or the CUDA
// toolkit's stub that says "Driver Not Loaded") OpenNVML must return an
// ErrNoGPU error, and with one it must describe and sample the devices.
func TestOpenNVML(t *testing.T) {
	n, err := OpenNVML()
	if err != nil {
		if !errors.Is(err, ErrNoGPU) {
			t.Fatalf("OpenNVML: %v, want an error wrapping ErrNoGPU", err)
		}
		if !strings.Contains(err.Error(), "no GPU here") {
			t.Errorf("error %q does not say there is no GPU", err)
		}
		t.Logf("no GPU: %v", err)
		return
	}
	defer n.Close()
	devs, err := n.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) == 0 {
		t.Fatal("NVML opened with no device")
	}
	for _, d := range devs {
		if d.Name == "" || d.UUID == "" || !strings.Contains(d.ComputeCap, ".") || d.Driver == "" {
			t.Errorf("device %+v is incomplete", d)
		}
	}
	tel, err := n.Sample(0)
	if err != nil {
		t.Fatal(err)
	}
	if tel.MaxSMClockMHz <= 0 || tel.TempC <= 0 {
		t.Errorf("telemetry %+v has no clock or temperature", tel)
	}
	if _, err := n.Sample(len(devs)); err == nil {
		t.Error("Sample past the last device succeeded")
	}
	t.Logf("%+v\n%+v", devs, tel)
}
