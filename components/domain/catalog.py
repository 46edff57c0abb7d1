"""The fake GPU card models: the only place their memory and core figures live.

Figures are what NVML reports on the real cards, so the mock inventory looks like a real
HAMi registration (A100-SXM4-80GB: 81920 MiB; L4: 23034 MiB, sold as "24GB").
"""

from __future__ import annotations

from dataclasses import dataclass

# HAMi expresses compute as a percentage of one card.
CORES_PER_CARD = 100
# Concurrent vGPU tasks per card (HAMi chart default deviceSplitCount).
DEFAULT_SPLIT_COUNT = 10
# The mock device plugin advertises one kubelet device per MB; above about 120,000 MB per node
# its ListAndWatch message exceeds gRPC's 4 MiB limit and the node shows no gpumem at all.
MOCK_PLUGIN_MAX_MB_PER_NODE = 120_000


@dataclass(frozen=True)
class GpuModel:
    """One card model as HAMi sees it."""

    key: str
    display_name: str
    hami_type: str
    memory_mb: int
    cores: int = CORES_PER_CARD
    split_count: int = DEFAULT_SPLIT_COUNT


GPU_MODELS: dict[str, GpuModel] = {
    m.key: m
    for m in (
        GpuModel(
            key="A100-80GB",
            display_name="NVIDIA A100 80GB",
            hami_type="NVIDIA A100-SXM4-80GB",
            memory_mb=81920,
        ),
        GpuModel(
            key="L4",
            display_name="NVIDIA L4 24GB",
            hami_type="NVIDIA L4",
            memory_mb=23034,
        ),
    )
}
