package main

import (
	"context"
	"fmt"
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
	return fmt.Errorf("devices: not wired to NVML yet")
}
