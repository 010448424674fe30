"""NVML clocks-event (throttle) reason bits, defined once for the GPU sampler and the analysis.

The bits are fixed by NVML's ABI. The sampler records the mask and its names;
the analysis groups them into power and thermal slow-downs.
"""

from __future__ import annotations

REASONS: dict[int, str] = {
    0x001: "gpu_idle",
    0x002: "applications_clocks_setting",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}
_BITS = {name: bit for bit, name in REASONS.items()}

# Reasons that mean the GPU slowed itself down.
POWER = _BITS["sw_power_cap"] | _BITS["hw_power_brake_slowdown"]
THERMAL = _BITS["sw_thermal_slowdown"] | _BITS["hw_thermal_slowdown"] | _BITS["hw_slowdown"]


def names(mask: int) -> str:
    """Names of the reason bits set in a mask, joined by ','."""
    return ",".join(name for bit, name in REASONS.items() if mask & bit)


def mask(reason_names: str) -> int:
    """The mask of a ','-joined list of reason names (unknown names are ignored)."""
    return sum(_BITS.get(n, 0) for n in set(reason_names.split(",")))
