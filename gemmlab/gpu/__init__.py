"""The GPU side of a run: the driver and device (driver, device), the problem's inputs and a kernel's
checked launch (problem, launch), timing (bench, clocks), and the GPC map (gpc) and occupancy probe.
Only this package touches cupy, and only when called."""
