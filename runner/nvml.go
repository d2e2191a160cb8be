package runner

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// ErrNoGPU says that this machine has no usable NVIDIA GPU: no NVML
// library, a driver that is not loaded (the CUDA toolkit's stub library),
// or no device. Callers test for it with errors.Is and go on without a GPU.
var ErrNoGPU = errors.New("no GPU here")

// An NVML reads GPU identity and telemetry through NVIDIA's management
// library. It is safe for concurrent use (NVML is thread-safe).
type NVML struct {
	lib     nvml.Interface
	devices []nvml.Device
	// eventReasons says whether the library has the clock event reasons
	// call (drivers from 535); older ones only have the throttle reasons
	// call, which reads the same bitmask.
	eventReasons bool
}

// OpenNVML loads and initialises NVML. Every way of not having a GPU comes
// back as an error wrapping ErrNoGPU, never as a panic.
func OpenNVML() (n *NVML, err error) {
	defer func() {
		// go-nvml calls into the library through cgo; a library that loads
		// but misbehaves must still mean "no GPU", not a crash of the tool.
		if r := recover(); r != nil {
			n, err = nil, fmt.Errorf("%w: NVML failed: %v", ErrNoGPU, r)
		}
	}()
	lib := nvml.New()
	switch ret := lib.Init(); ret {
	case nvml.SUCCESS:
	case nvml.ERROR_LIBRARY_NOT_FOUND:
		return nil, fmt.Errorf("%w: the NVML library (libnvidia-ml.so.1) is not installed", ErrNoGPU)
	default:
		return nil, fmt.Errorf("%w: NVML init: %s", ErrNoGPU, nvmlError(ret))
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, fmt.Errorf("%w: counting devices: %s", ErrNoGPU, nvmlError(ret))
	}
	if count == 0 {
		lib.Shutdown()
		return nil, fmt.Errorf("%w: NVML sees no device", ErrNoGPU)
	}
	n = &NVML{lib: lib}
	for i := range count {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			lib.Shutdown()
			return nil, fmt.Errorf("NVML: device %d: %s", i, nvmlError(ret))
		}
		n.devices = append(n.devices, d)
	}
	if ext, ok := lib.(interface{ Extensions() nvml.ExtendedInterface }); ok {
		n.eventReasons = ext.Extensions().LookupSymbol("nvmlDeviceGetCurrentClocksEventReasons") == nil
	}
	return n, nil
}

// nvmlError names a return code; the library's own text when it has one.
func nvmlError(r nvml.Return) string {
	return fmt.Sprintf("%s (code %d)", r.Error(), int32(r))
}

// Close shuts NVML down.
func (n *NVML) Close() error {
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %s", nvmlError(ret))
	}
	return nil
}

// A DeviceInfo identifies one GPU.
type DeviceInfo struct {
	Index       int
	Name        string // "NVIDIA L4"
	UUID        string
	ComputeCap  string // "8.9"
	Driver      string // "550.54.15"
	MemoryBytes uint64
	PowerLimitW float64 // the enforced power limit; 0 when not readable
}

// Devices describes every GPU NVML sees, in NVML's index order. The SM
// count is not among them: NVML does not report it; the worker's info
// request does.
func (n *NVML) Devices() ([]DeviceInfo, error) {
	driver, ret := n.lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("NVML: driver version: %s", nvmlError(ret))
	}
	out := make([]DeviceInfo, 0, len(n.devices))
	for i, d := range n.devices {
		info := DeviceInfo{Index: i, Driver: driver}
		var ret nvml.Return
		if info.Name, ret = d.GetName(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML: device %d name: %s", i, nvmlError(ret))
		}
		if info.UUID, ret = d.GetUUID(); ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML: device %d UUID: %s", i, nvmlError(ret))
		}
		major, minor, ret := d.GetCudaComputeCapability()
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("NVML: device %d compute capability: %s", i, nvmlError(ret))
		}
		info.ComputeCap = fmt.Sprintf("%d.%d", major, minor)
		if mem, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			info.MemoryBytes = mem.Total
		}
		if mw, ret := d.GetEnforcedPowerLimit(); ret == nvml.SUCCESS {
			info.PowerLimitW = float64(mw) / 1000
		}
		out = append(out, info)
	}
	return out, nil
}

// Telemetry is one reading of a GPU's clocks, temperature, power and
// clock event reasons. Figures NVML cannot read on a device stay zero.
type Telemetry struct {
	SMClockMHz    int
	MaxSMClockMHz int
	TempC         int
	PowerW        float64
	// EnergyMJ is the device's total energy counter (millijoules since
	// the driver loaded), valid when EnergyOK: the difference of two
	// readings is the energy spent between them.
	EnergyMJ uint64
	EnergyOK bool
	// ThrottleReasons names every clock event reason set; Throttled says
	// whether one of them is a power or thermal limit (idle and
	// application-clock settings are not).
	ThrottleReasons []string
	Throttled       bool
}

// Sample reads device i's telemetry.
func (n *NVML) Sample(i int) (Telemetry, error) {
	if i < 0 || i >= len(n.devices) {
		return Telemetry{}, fmt.Errorf("NVML: no device %d (have %d)", i, len(n.devices))
	}
	d := n.devices[i]
	var t Telemetry
	if v, ret := d.GetClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
		t.SMClockMHz = int(v)
	}
	if v, ret := d.GetMaxClockInfo(nvml.CLOCK_SM); ret == nvml.SUCCESS {
		t.MaxSMClockMHz = int(v)
	}
	if v, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); ret == nvml.SUCCESS {
		t.TempC = int(v)
	}
	if mw, ret := d.GetPowerUsage(); ret == nvml.SUCCESS {
		t.PowerW = float64(mw) / 1000
	}
	if mj, ret := d.GetTotalEnergyConsumption(); ret == nvml.SUCCESS {
		t.EnergyMJ, t.EnergyOK = mj, true
	}
	var mask uint64
	var ret nvml.Return
	if n.eventReasons {
		mask, ret = d.GetCurrentClocksEventReasons()
	} else {
		mask, ret = d.GetCurrentClocksThrottleReasons()
	}
	if ret != nvml.SUCCESS {
		return t, fmt.Errorf("NVML: device %d clock event reasons: %s", i, nvmlError(ret))
	}
	t.ThrottleReasons, t.Throttled = DecodeClockReasons(mask)
	return t, nil
}

// clockReasons are NVML's clock event reason bits, in bit order, with
// whether each one means the measurement ran slower than the card can.
func clockReasons() []struct {
	bit      uint64
	name     string
	throttle bool
} {
	return []struct {
		bit      uint64
		name     string
		throttle bool
	}{
		{nvml.ClocksEventReasonGpuIdle, "gpu_idle", false},
		{nvml.ClocksEventReasonApplicationsClocksSetting, "applications_clocks", false},
		{nvml.ClocksEventReasonSwPowerCap, "sw_power_cap", true},
		{nvml.ClocksThrottleReasonHwSlowdown, "hw_slowdown", true},
		{nvml.ClocksEventReasonSyncBoost, "sync_boost", false},
		{nvml.ClocksEventReasonSwThermalSlowdown, "sw_thermal_slowdown", true},
		{nvml.ClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown", true},
		{nvml.ClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake", true},
		{nvml.ClocksEventReasonDisplayClockSetting, "display_clocks", false},
	}
}

// DecodeClockReasons names the bits of an NVML clock event reasons mask
// (unknown bits as "bit_N") and says whether any is a power or thermal
// limit.
func DecodeClockReasons(mask uint64) (names []string, throttled bool) {
	known := uint64(0)
	for _, r := range clockReasons() {
		known |= r.bit
		if mask&r.bit != 0 {
			names = append(names, r.name)
			throttled = throttled || r.throttle
		}
	}
	for bit := range 64 {
		if b := uint64(1) << bit; mask&b != 0 && known&b == 0 {
			names = append(names, fmt.Sprintf("bit_%d", bit))
		}
	}
	return names, throttled
}
