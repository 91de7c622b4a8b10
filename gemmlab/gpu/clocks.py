"""The SM clock and the reasons it was held down, sampled while a kernel is timed.

Under a power cap an H100 runs the same kernel anywhere from ~1.4 to 1.98 GHz, so a slow row is often a
slow clock. NVML says both the clock and why (power cap, thermal slowdown, ...). It comes with the
optional `nvidia-ml-py` package (`pip install "gemmlab[nvml]"`); without it rows simply have no clock.
`summarize` is plain Python, so it is tested on a CPU.
"""

from __future__ import annotations

import threading

# NVML's clock event (throttle) reasons that explain a slower clock, by bit (nvml.h).
REASONS = {0x4: "power cap", 0x8: "hardware slowdown", 0x20: "thermal (software)", 0x40: "thermal (hardware)",
           0x80: "power brake"}
PERIOD_S = 0.005


def summarize(mhz: list[int], reasons: int) -> dict | None:
    """{"sm_mhz": [min, median, max], "throttle": [reasons seen]} from the samples, or None if none."""
    if not mhz:
        return None
    s = sorted(mhz)
    return {"sm_mhz": [s[0], s[len(s) // 2], s[-1]], "samples": len(s),
            "throttle": [name for bit, name in REASONS.items() if reasons & bit]}


class ClockWatch:
    """`with ClockWatch() as w: ...` samples the current GPU's SM clock every PERIOD_S in a thread;
    `w.summary()` afterwards. Does nothing (summary None) where NVML cannot be had."""

    def __init__(self):
        self.mhz, self.reasons, self.handle = [], 0, None
        self._stop = threading.Event()
        self._thread = None

    def __enter__(self):
        try:
            import cupy
            import pynvml
            pynvml.nvmlInit()
            self._nvml = pynvml
            self.handle = pynvml.nvmlDeviceGetHandleByPciBusId(cupy.cuda.Device().pci_bus_id)
            self._reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
                pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        except Exception:  # no package, no driver, or an NVML that does not know this GPU: no clocks
            self.handle = None
            return self
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        nvml = self._nvml
        while True:
            try:
                self.mhz.append(nvml.nvmlDeviceGetClockInfo(self.handle, nvml.NVML_CLOCK_SM))
                self.reasons |= int(self._reasons(self.handle))
            except Exception:
                return
            if self._stop.wait(PERIOD_S):
                return

    def __exit__(self, *exc):
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
        return False

    def summary(self) -> dict | None:
        return summarize(self.mhz, self.reasons) if self.handle is not None else None
