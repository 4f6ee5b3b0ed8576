"""What an engine may use of the GPU that schedules it: the interface every queue is given at construction.

The engines sit below the GPU (docs/architecture.md): `hcqsim.gpu` imports them, they never import it. A queue
receives its GPU as an object (`EngineQueue(gpu, ...)`) and reaches memory, the clock and the GPU's hooks (tick,
interrupt, trace) only through the members listed here; `EmulatedGPU` is the one implementation, and a test may
hand in any object that has them. `tests/test_layers.py` checks that no module of hcqsim/engines/ names
`hcqsim.gpu` in an import, at module level or inside a function.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol


class EngineHost(Protocol):
    """The GPU as the engines see it."""

    # state the engines read (and, for `clock`, advance by a packet's cost on their hot paths)
    memory: Any  # memory.AddressSpace: checked reads and writes at GPU virtual addresses
    clock: int  # the virtual reference clock (what timestamps read)
    cost: Any  # the cost model: `packet`, `wave`, `copy(n)`, `bytes_per_tick`
    target: Any  # targets.Target: family, SDMA version, copy count widths
    coherence: Any  # coherence.CacheModel, or None for the coherent memory model
    hdp: Any  # coherence.hdp.HostDataPath
    shader_core: Any  # shader.core.ShaderCore: launches dispatches
    policy: Any  # the scheduler policy (placement and order choices the shader core asks)
    uconfig: dict  # UCONFIG register values (SET_UCONFIG_REG, COPY_DATA from registers)
    trace: list  # (clock, queue name, kind, data) entries; the PM4 hot path appends packets itself
    label: str  # how messages name this GPU (errors.gpu_label)

    # the hooks the engines call back into
    canonical: Callable[[int], int]  # an address as traces and messages print it
    tick: Callable[[int], None]  # advance the clock by a cost
    interrupt: Callable[..., None]  # (source, ctxid, queue[, fault]): raise an interrupt to the driver
    trace_packet: Callable[..., None]  # (queue, stream, pos, fmt, dws)
    trace_write: Callable[..., None]  # (queue, addr, size, value)
    trace_copy: Callable[..., None]  # (queue, dst, src, size)
    ring_doorbell: Callable[..., None]  # (queue, value): a direct-API submission's doorbell
    run: Callable[..., Any]  # a progress point (a direct-API submission that needs ring space)
