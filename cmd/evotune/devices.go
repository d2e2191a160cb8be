package main

import (
	"context"
	"fmt"
	"strconv"

	"evotune/kernels"
	"evotune/runner"
)

func devicesCommand() command {
	return command{
		name:     "devices",
		summary:  "list the GPUs that NVML sees: name, UUID, compute capability, driver, clocks, temperature",
		synopsis: "evotune devices",
		examples: "  evotune devices\n",
		run:      runDevices,
	}
}

func runDevices(ctx context.Context, c *cli, args []string) error {
	fs := newFlagSet("devices")
	if _, err := c.parseFlags(fs, args, false); err != nil {
		return err
	}
	n, err := runner.OpenNVML()
	if err != nil { // with no GPU: "no GPU here: NVML init: Driver Not Loaded"
		return fmt.Errorf("devices: %w", err)
	}
	defer n.Close()
	devs, err := n.Devices()
	if err != nil {
		return fmt.Errorf("devices: %w", err)
	}
	// "unsupported" is said of the family the command line tunes.
	family, err := kernels.FamilyOf(kernels.DefaultFamily)
	if err != nil {
		return fmt.Errorf("devices: %w", err)
	}
	var rows [][]string
	for _, d := range devs {
		arch, err := runner.ArchForComputeCap(d.ComputeCap, family.Archs)
		if err != nil {
			arch = "unsupported"
		}
		row := []string{strconv.Itoa(d.Index), d.Name, d.UUID, d.ComputeCap + " (" + arch + ")", d.Driver,
			fmt.Sprintf("%.0f GiB", float64(d.MemoryBytes)/(1<<30))}
		if tel, err := n.Sample(d.Index); err == nil {
			row = append(row, fmt.Sprintf("%d / %d MHz", tel.SMClockMHz, tel.MaxSMClockMHz), fmt.Sprintf("%d °C", tel.TempC),
				fmt.Sprintf("%.0f / %.0f W", tel.PowerW, d.PowerLimitW))
		} else {
			row = append(row, "-", "-", "-")
		}
		rows = append(rows, row)
	}
	return writeTable(c.stdout, "table", []string{"#", "name", "UUID", "compute capability", "driver", "memory", "SM clock", "temperature", "power"}, rows)
}
