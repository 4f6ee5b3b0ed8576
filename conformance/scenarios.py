"""The conformance scenarios: declarative programs of runtime operations, as plain data.

Every scenario is a dict:

    name      unique, used on the command line and in records
    doc       what it checks (the kfdtest area it mirrors, or the runtime pattern)
    devices   how many GPUs (default 1)
    buffers   name -> size in bytes, or {"size": n, "device": d, "uncached": bool, "init": "pattern"|"zero"|u32}
              ("pattern", the default: word j of the k-th buffer (0-based, declaration order) holds
              (k + 1) * 0x01000000 + j, mod 2^32; an int: every word holds it)
    signals   name -> initial value, or {"value": v, "device": d}
    orders    [[t_a, t_b], ...]: timestamp t_a must not be later than t_b (the scenario orders them)
    steps     the program, in order (below)

Queues are named `compute<i>` / `copy<i>` (device 0) or `d<k>.compute<i>` / `d<k>.copy<i>` (device k): hardware
queue i of that engine. A queue step is recorded into the queue's pending commands; `submit` hands them to the
hardware. Host steps run when reached; GPU work runs concurrently with them.

Queue steps (first element, then arguments):
    fill Q buf off size value32          copy Q dst doff src soff size     kernel Q name [args] global local
    signal Q sig value                   wait Q sig value (>=)             timestamp Q ts
    barrier Q  (memory barrier)          timeline Q (signal the device timeline's next value)
    submit Q (an empty submit is a NOP submit)
Host steps:
    host_write buf off [u32 words]       set_signal sig value              host_wait sig value
    copyin buf off [u32 words]           copyout name buf off size         transfer dst src size (waits)
    synchronize d                        checkpoint name {"buffers": [buf | [buf, off, size]], "signals": [..]}
    repeat count [steps] ("$n" is 1..count)       each_queue engine [steps] ("$q" queue name, "$i" its index)
    schedule name {options} [ops]        run name {"bind": {buf: other_buf}, "params": {name: value}}
Word lists may be {"pattern": [words], "words": count} (the pattern repeated). `each_queue` takes an optional
third argument: use only the first that many queues. Numbers and names may be strings starting with "=": an expression in n and i (e.g. "=4*i", "=i+1").
Kernel args are buffer names ("buf+off": that many bytes into it) or integers; kernels are hcqsim.kernels' (conformance/reference.py says what each
computes). Schedule ops: fill buf off size value, copy dst doff src soff size, kernel name [args] global local,
host_write buf off [words]; a fill value may be {"param": name, "default": v}. Schedule options: devices
(indices), compute_queues, copy_queues, batch_limit.

Effects recorded per scenario (conformance/effects.py): the final bytes of every buffer, the final value of every
signal, each checkpoint's values, and the truth of every timestamp relation (monotonic per queue; `orders`).
All scenarios here are race-free: their effects do not depend on how the queues interleave.
"""
from __future__ import annotations

KiB, MiB = 1 << 10, 1 << 20


def _scenario(name, doc, steps, *, buffers=None, signals=None, devices=1, orders=()):
    return {"name": name, "doc": doc, "devices": devices, "buffers": buffers or {}, "signals": signals or {},
            "orders": [list(o) for o in orders], "steps": steps}


def cp(name, *, buffers=(), signals=()):
    """A checkpoint step (host snapshot)."""
    return ["checkpoint", name, {"buffers": list(buffers), "signals": list(signals)}]


SCENARIOS = [
    # -- queues: create, NOP submits, every queue, ring wrap-around (kfdtest's queue manager tests) ---------
    _scenario("compute_queue_create_signal", "create a compute queue, one submit that signals, host waits",
              [["signal", "compute0", "s", 1], ["submit", "compute0"], ["host_wait", "s", 1],
               cp("done", signals=["s"])], signals={"s": 0}),
    _scenario("copy_queue_create_signal", "create an SDMA queue, one submit that signals (FENCE + TRAP)",
              [["signal", "copy0", "s", 7], ["submit", "copy0"], ["host_wait", "s", 7]], signals={"s": 0}),
    _scenario("compute_nop_submits", "64 empty (NOP) submits on a compute queue, then a signalling one",
              [["repeat", 64, [["submit", "compute0"]]], ["signal", "compute0", "s", 1], ["submit", "compute0"],
               ["host_wait", "s", 1]], signals={"s": 0}),
    _scenario("copy_nop_submits", "64 empty (NOP) submits on a copy queue, then a signalling one",
              [["repeat", 64, [["submit", "copy0"]]], ["signal", "copy0", "s", 1], ["submit", "copy0"],
               ["host_wait", "s", 1]], signals={"s": 0}),
    _scenario("every_compute_queue", "every compute queue of the device at once: each writes its own word",
              [["each_queue", "compute", [["fill", "$q", "out", "=4*i", 4, "=i+1"], ["signal", "$q", "s", 1],
                                          ["submit", "$q"]]],
               ["each_queue", "compute", [["wait", "$q", "s", 1], ["submit", "$q"]]],
               ["synchronize", 0]],
              buffers={"out": {"size": 256, "init": "zero"}}, signals={"s": 0}),
    _scenario("every_copy_queue", "every SDMA queue of the device at once (all engines): each fills its word",
              [["each_queue", "copy", [["fill", "$q", "out", "=4*i", 4, "=0x100+i"], ["submit", "$q"]]],
               ["synchronize", 0]],
              buffers={"out": {"size": 256, "init": "zero"}}),
    _scenario("compute_ring_wraparound", "1500 signalling submits wrap the 64 KiB compute ring several times",
              [["repeat", 1500, [["signal", "compute0", "s", "$n"], ["submit", "compute0"]]],
               ["host_wait", "s", 1500]], signals={"s": 0}),
    _scenario("copy_ring_wraparound", "1500 fill+signal submits wrap the SDMA ring; the last fill wins",
              [["repeat", 1500, [["fill", "copy0", "b", 0, 64, "$n"], ["signal", "copy0", "s", "$n"],
                                 ["submit", "copy0"]]],
               ["host_wait", "s", 1500]], buffers={"b": 256}, signals={"s": 0}),
    _scenario("queue_reuse_after_idle", "a queue drained, then used again: submits keep their order",
              [["fill", "copy0", "b", 0, 256, 1], ["signal", "copy0", "s", 1], ["submit", "copy0"],
               ["host_wait", "s", 1], cp("first", buffers=["b"]),
               ["fill", "copy0", "b", 128, 128, 2], ["signal", "copy0", "s", 2], ["submit", "copy0"],
               ["host_wait", "s", 2]], buffers={"b": 256}, signals={"s": 0}),
    # -- memory: CPU write coherence, fills, copies -----------------------------------------------------------
    _scenario("cpu_write_then_gpu_copy", "CPU stores are visible to the next GPU copy (CPU write coherence)",
              [["host_write", "src", 0, [0xCAFE0001, 0xCAFE0002, 0xCAFE0003]],
               ["copy", "copy0", "dst", 16, "src", 0, 12], ["signal", "copy0", "s", 1], ["submit", "copy0"],
               ["host_wait", "s", 1], cp("copied", buffers=[["dst", 0, 32]])],
              buffers={"src": 4 * KiB, "dst": 4 * KiB}, signals={"s": 0}),
    _scenario("gpu_write_then_cpu_read", "GPU fill, host waits, then reads and rewrites; the GPU sees the rewrite",
              [["fill", "compute0", "a", 0, 4096, 0x5A5A5A5A], ["signal", "compute0", "s", 1], ["submit", "compute0"],
               ["host_wait", "s", 1], cp("filled", buffers=[["a", 0, 16]]),
               ["host_write", "a", 0, [1, 2, 3, 4]],
               ["copy", "compute0", "b", 0, "a", 0, 16], ["signal", "compute0", "s", 2], ["submit", "compute0"],
               ["host_wait", "s", 2]], buffers={"a": 4096, "b": 4096}, signals={"s": 0}),
    _scenario("uncached_gtt_coherence", "GTT (uncached) memory: GPU writes, host reads, host writes, GPU copies",
              [["fill", "copy0", "g", 0, 1024, 0x11111111], ["signal", "copy0", "s", 1], ["submit", "copy0"],
               ["host_wait", "s", 1], cp("filled", buffers=[["g", 1020, 8]]),
               ["host_write", "g", 1024, [0x22222222] * 4],
               ["copy", "copy0", "v", 0, "g", 1016, 24], ["signal", "copy0", "s", 2], ["submit", "copy0"],
               ["host_wait", "s", 2]],
              buffers={"g": {"size": 4096, "uncached": True}, "v": 4096}, signals={"s": 0}),
    _scenario("sdma_fill_sizes", "SDMA fills of 4 B .. 64 KiB at dword offsets, one submit",
              [["fill", "copy0", "b", 0, 4, 0xA0000001], ["fill", "copy0", "b", 8, 12, 0xA0000002],
               ["fill", "copy0", "b", 1024, 3072, 0xA0000003], ["fill", "copy0", "b", 65536, 65536, 0xA0000004],
               ["signal", "copy0", "s", 1], ["submit", "copy0"], ["host_wait", "s", 1]],
              buffers={"b": 256 * KiB}, signals={"s": 0}),
    _scenario("sdma_fill_splits_at_4mib", "a 9 MiB fill is split into 4 MiB packets; every byte is written",
              [["fill", "copy0", "b", 4, 9 * MiB, 0x0BADF00D], ["signal", "copy0", "s", 1], ["submit", "copy0"],
               ["host_wait", "s", 1]], buffers={"b": 10 * MiB}, signals={"s": 0}),
    _scenario("sdma_copy_splits_at_4mib", "a 9 MiB + 12 B copy at odd offsets splits into 4 MiB packets",
              [["copy", "copy0", "dst", 3, "src", 5, 9 * MiB + 12], ["signal", "copy0", "s", 1], ["submit", "copy0"],
               ["host_wait", "s", 1]], buffers={"src": 10 * MiB, "dst": 10 * MiB}, signals={"s": 0}),
    _scenario("pm4_dma_copy_and_fill", "compute-queue DMA_DATA copies and fills (the CP's copy engine)",
              [["fill", "compute0", "a", 0, 8192, 0x01020304], ["copy", "compute0", "b", 100, "a", 4090, 200],
               ["fill", "compute0", "a", 4096, 16, 0xFFFFFFFF], ["signal", "compute0", "s", 1], ["submit", "compute0"],
               ["host_wait", "s", 1]], buffers={"a": 8192, "b": 8192}, signals={"s": 0}),
    _scenario("overlapping_copies_in_order", "copies on one queue that overlap run in order (FIFO)",
              [["copy", "copy0", "b", 0, "a", 0, 256], ["copy", "copy0", "b", 128, "a", 512, 256],
               ["copy", "copy0", "a", 0, "b", 64, 128], ["signal", "copy0", "s", 1], ["submit", "copy0"],
               ["host_wait", "s", 1]], buffers={"a": 4096, "b": 4096}, signals={"s": 0}),
    _scenario("concurrent_sdma_copies", "four copy queues (both engines) copy disjoint quarters at once",
              [["each_queue", "copy", [["copy", "$q", "dst", "=16384*i", "src", "=16384*(3-i)", 16384],
                                       ["signal", "$q", "s", 1], ["submit", "$q"]], 4],
               ["synchronize", 0], cp("done", buffers=[["dst", 0, 64]])],
              buffers={"src": 64 * KiB, "dst": 64 * KiB}, signals={"s": 0}),
    _scenario("staged_copyin_copyout", "the runtime's staged copyin / copyout through host staging buffers",
              [["copyin", "b", 64, [0xD0000000 + k for k in range(64)]], ["copyout", "back", "b", 60, 272]],
              buffers={"b": 8192}),
    _scenario("staged_copy_multi_chunk", "copyin and copyout larger than one 16 MiB staging chunk",
              [["copyin", "b", 0, {"pattern": [0x01010101], "words": 5 * MiB}], ["copyout", "tail", "b", 20 * MiB - 16, 32]],
              buffers={"b": 21 * MiB}),
    # -- events and signals ----------------------------------------------------------------------------------
    _scenario("signal_sequence_checkpoints", "a signal advanced 1, 2, 3 by three submits; host sees each",
              [["fill", "copy0", "b", 0, 64, 1], ["signal", "copy0", "s", 1], ["submit", "copy0"],
               ["host_wait", "s", 1], cp("one", buffers=[["b", 0, 8]], signals=["s"]),
               ["fill", "copy0", "b", 0, 64, 2], ["signal", "copy0", "s", 2], ["submit", "copy0"],
               ["host_wait", "s", 2], cp("two", buffers=[["b", 0, 8]], signals=["s"]),
               ["fill", "compute0", "b", 0, 64, 3], ["signal", "compute0", "s", 3], ["submit", "compute0"],
               ["host_wait", "s", 3], cp("three", buffers=[["b", 0, 8]], signals=["s"])],
              buffers={"b": 256}, signals={"s": 0}),
    _scenario("host_releases_gpu_wait", "queues wait for a signal the host sets later (a deferred release)",
              [["wait", "compute0", "go", 1], ["fill", "compute0", "b", 0, 64, 0xC0C0C0C0],
               ["signal", "compute0", "done", 1], ["submit", "compute0"],
               ["wait", "copy0", "go", 1], ["fill", "copy0", "b", 64, 64, 0xD0D0D0D0],
               ["signal", "copy0", "done2", 1], ["submit", "copy0"],
               cp("before_release", signals=["done", "done2"]),
               ["set_signal", "go", 1], ["host_wait", "done", 1], ["host_wait", "done2", 1]],
              buffers={"b": 256}, signals={"go": 0, "done": 0, "done2": 0}),
    _scenario("wait_is_greater_or_equal", "WAIT_REG_MEM / POLL_REGMEM pass on a larger value (>=)",
              [["set_signal", "s", 9], ["wait", "compute0", "s", 5], ["signal", "compute0", "r1", 1],
               ["submit", "compute0"], ["wait", "copy0", "s", 9], ["signal", "copy0", "r2", 1], ["submit", "copy0"],
               ["host_wait", "r1", 1], ["host_wait", "r2", 1]], signals={"s": 0, "r1": 0, "r2": 0}),
    _scenario("signal_reset_and_reuse", "host resets a signal to 0 and it is signalled again",
              [["signal", "copy0", "s", 5], ["submit", "copy0"], ["host_wait", "s", 5],
               ["set_signal", "s", 0], cp("reset", signals=["s"]),
               ["signal", "compute0", "s", 2], ["submit", "compute0"], ["host_wait", "s", 2]], signals={"s": 0}),
    _scenario("many_signals_one_submit", "one submit sets eight signals; each ends with its value",
              [["repeat", 8, [["signal", "compute0", "=f's{n}'", "=n*11"]]], ["submit", "compute0"],
               ["host_wait", "s8", 88]], signals={f"s{k}": 0 for k in range(1, 9)}),
    # -- timestamps --------------------------------------------------------------------------------------------
    _scenario("compute_timestamps_monotonic", "RELEASE_MEM timestamps around work on one compute queue",
              [["timestamp", "compute0", "t0"], ["fill", "compute0", "b", 0, 64 * KiB, 1],
               ["timestamp", "compute0", "t1"], ["timestamp", "compute0", "t2"], ["signal", "compute0", "s", 1],
               ["submit", "compute0"], ["host_wait", "s", 1]],
              buffers={"b": 64 * KiB}, signals={"s": 0}, orders=[["t0", "t1"], ["t1", "t2"]]),
    _scenario("copy_timestamps_monotonic", "SDMA TIMESTAMP GET_GLOBAL around a copy",
              [["timestamp", "copy0", "t0"], ["copy", "copy0", "b", 0, "a", 0, 32 * KiB],
               ["timestamp", "copy0", "t1"], ["signal", "copy0", "s", 1], ["submit", "copy0"], ["host_wait", "s", 1]],
              buffers={"a": 32 * KiB, "b": 32 * KiB}, signals={"s": 0}, orders=[["t0", "t1"]]),
    _scenario("cross_queue_timestamps_ordered", "a wait orders timestamps of two engines: copy's before compute's",
              [["timestamp", "copy0", "t_copy"], ["signal", "copy0", "s", 1], ["submit", "copy0"],
               ["wait", "compute0", "s", 1], ["timestamp", "compute0", "t_compute"], ["signal", "compute0", "d", 1],
               ["submit", "compute0"], ["host_wait", "d", 1]],
              signals={"s": 0, "d": 0}, orders=[["t_copy", "t_compute"]]),
    # -- the runtime's own patterns ------------------------------------------------------------------------
    _scenario("cross_queue_wait_copy_to_compute", "compute waits for the copy queue's signal, then reads its data",
              [["wait", "compute0", "s", 1], ["copy", "compute0", "c", 0, "b", 0, 1024], ["signal", "compute0", "d", 1],
               ["submit", "compute0"],
               ["copy", "copy0", "b", 0, "a", 0, 1024], ["signal", "copy0", "s", 1], ["submit", "copy0"],
               ["host_wait", "d", 1]],
              buffers={"a": 4096, "b": 4096, "c": 4096}, signals={"s": 0, "d": 0}),
    _scenario("three_queue_chain", "copy0 -> compute1 -> copy1, each waiting for the previous",
              [["wait", "copy1", "s2", 1], ["copy", "copy1", "d", 0, "c", 0, 512], ["signal", "copy1", "s3", 1],
               ["submit", "copy1"],
               ["wait", "compute1", "s1", 1], ["copy", "compute1", "c", 0, "b", 0, 512], ["signal", "compute1", "s2", 1],
               ["submit", "compute1"],
               ["fill", "copy0", "b", 0, 512, 0x77777777], ["signal", "copy0", "s1", 1], ["submit", "copy0"],
               ["host_wait", "s3", 1]],
              buffers={"b": 1024, "c": 1024, "d": 1024}, signals={"s1": 0, "s2": 0, "s3": 0}),
    _scenario("timeline_synchronize", "work on several queues, then the device timeline synchronize",
              [["fill", "copy0", "a", 0, 4096, 0xABABABAB], ["submit", "copy0"],
               ["fill", "compute0", "b", 0, 4096, 0xCDCDCDCD], ["submit", "compute0"],
               ["fill", "copy1", "c", 0, 4096, 0xEFEFEFEF], ["submit", "copy1"], ["synchronize", 0]],
              buffers={"a": 4096, "b": 4096, "c": 4096}),
    _scenario("barrier_between_writes", "memory barriers between dependent work on one queue",
              [["fill", "compute0", "a", 0, 256, 9], ["barrier", "compute0"], ["copy", "compute0", "b", 0, "a", 0, 256],
               ["signal", "compute0", "s", 1], ["submit", "compute0"],
               ["wait", "copy0", "s", 1], ["barrier", "copy0"], ["copy", "copy0", "c", 0, "b", 0, 256],
               ["signal", "copy0", "s", 2], ["submit", "copy0"], ["host_wait", "s", 2]],
              buffers={"a": 256, "b": 256, "c": 256}, signals={"s": 0}),
    # -- kernels -----------------------------------------------------------------------------------------------
    _scenario("kernel_iota", "a kernel writes base + i (256 work-items in groups of 64)",
              [["kernel", "compute0", "iota", ["out", 1000, 256], 256, 64], ["signal", "compute0", "s", 1],
               ["submit", "compute0"], ["host_wait", "s", 1]], buffers={"out": 2048}, signals={"s": 0}),
    _scenario("kernel_partial_workgroup", "global size 200 in groups of 64: the last group is partial",
              [["kernel", "compute0", "iota", ["out", 7, 200], 200, 64], ["signal", "compute0", "s", 1],
               ["submit", "compute0"], ["host_wait", "s", 1]], buffers={"out": 1024}, signals={"s": 0}),
    _scenario("kernel_chain_same_queue", "iota, scale, add on one queue: each sees the previous one's output",
              [["kernel", "compute0", "iota", ["a", 1, 128], 128, 32], ["kernel", "compute0", "scale", ["a", "b", 3, 128], 128, 32],
               ["kernel", "compute0", "add", ["a", "b", "c", 128], 128, 64], ["signal", "compute0", "s", 1],
               ["submit", "compute0"], ["host_wait", "s", 1]],
              buffers={"a": 512, "b": 512, "c": 512}, signals={"s": 0}),
    _scenario("kernel_read_modify_write_twice", "inc twice on one queue: every word ends +2",
              [["kernel", "compute0", "inc", ["x", 96], 96, 32], ["kernel", "compute0", "inc", ["x", 96], 96, 32],
               ["signal", "compute0", "s", 1], ["submit", "compute0"], ["host_wait", "s", 1]],
              buffers={"x": 512}, signals={"s": 0}),
    _scenario("kernel_after_copy_other_queue", "a kernel on compute1 waits for copy0's data, then reverses it",
              [["wait", "compute1", "s", 1], ["kernel", "compute1", "reverse", ["b", "c", 64], 64, 64],
               ["signal", "compute1", "d", 1], ["submit", "compute1"],
               ["copy", "copy0", "b", 0, "a", 64, 256], ["signal", "copy0", "s", 1], ["submit", "copy0"],
               ["host_wait", "d", 1]], buffers={"a": 1024, "b": 1024, "c": 1024}, signals={"s": 0, "d": 0}),
    _scenario("kernels_on_every_compute_queue", "each compute queue runs iota on its own 64-word slice",
              [["each_queue", "compute", [["kernel", "$q", "iota", ["=f'out+{256*i}'", "=1000*i", 64], 64, 64],
                                          ["submit", "$q"]], 4], ["synchronize", 0]],
              buffers={"out": 1024}),
    # -- several devices -------------------------------------------------------------------------------------
    _scenario("cross_device_wait", "GPU 1 waits for a signal GPU 0 sets, then copies GPU 0's data to itself",
              [["wait", "d1.copy0", "s", 1], ["copy", "d1.copy0", "b1", 0, "a0", 0, 2048],
               ["signal", "d1.copy0", "done", 1], ["submit", "d1.copy0"],
               ["fill", "copy0", "a0", 0, 2048, 0x0D0D0D0D], ["signal", "copy0", "s", 1], ["submit", "copy0"],
               ["host_wait", "done", 1]], devices=2,
              buffers={"a0": 4096, "b1": {"size": 4096, "device": 1}}, signals={"s": 0, "done": {"value": 0, "device": 1}}),
    _scenario("peer_copy_push", "GPU 0's SDMA writes into GPU 1's memory (peer-mapped destination)",
              [["copy", "copy0", "b1", 100, "a0", 0, 1000], ["signal", "copy0", "s", 1], ["submit", "copy0"],
               ["host_wait", "s", 1]], devices=2,
              buffers={"a0": 4096, "b1": {"size": 4096, "device": 1}}, signals={"s": 0}),
    _scenario("transfer_between_devices", "Device.transfer: GPU 0 to GPU 1 and back, with the device timeline",
              [["transfer", "b1", "a0", 3000], ["host_write", "b1", 0, [42, 43]], ["transfer", "a0", "b1", 8]],
              devices=2, buffers={"a0": 4096, "b1": {"size": 4096, "device": 1}}),
    _scenario("kernel_on_second_device", "GPU 1 runs a kernel on GPU 0's data after a cross-device signal",
              [["wait", "d1.compute0", "s", 1], ["kernel", "d1.compute0", "scale", ["a0", "b1", 5, 64], 64, 64],
               ["signal", "d1.compute0", "done", 1], ["submit", "d1.compute0"],
               ["kernel", "compute0", "iota", ["a0", 10, 64], 64, 64], ["signal", "compute0", "s", 1],
               ["submit", "compute0"], ["host_wait", "done", 1]], devices=2,
              buffers={"a0": 256, "b1": {"size": 256, "device": 1}}, signals={"s": 0, "done": {"value": 0, "device": 1}}),
    # -- compiled schedules and their replay --------------------------------------------------------------
    _scenario("schedule_fill_copy", "the README schedule: fills and copies over three buffers, two copy queues",
              [["schedule", "s", {"copy_queues": 2},
                [["fill", "a", 0, 65536, 0x01010101], ["fill", "b", 0, 4096, 0x02020202], ["copy", "c", 0, "a", 0, 32768],
                 ["copy", "b", 4096, "a", 0, 4096]]],
               ["run", "s"]], buffers={"a": 65536, "b": 65536, "c": 65536}),
    _scenario("schedule_war_hazard", "a copy reads a, a later fill overwrites a: the copy must see the old bytes",
              [["schedule", "s", {}, [["copy", "b", 0, "a", 0, 1024], ["fill", "a", 0, 1024, 0xEEEEEEEE],
                                      ["copy", "c", 0, "a", 512, 1024]]],
               ["run", "s"]], buffers={"a": 4096, "b": 4096, "c": 4096}),
    _scenario("schedule_kernels_and_copies", "fill -> kernel -> copy -> kernel across compute and copy queues",
              [["schedule", "s", {"compute_queues": 2, "copy_queues": 2},
                [["kernel", "iota", ["a", 5, 256], 256, 64], ["fill", "b", 0, 1024, 3],
                 ["kernel", "add", ["a", "b", "c", 256], 256, 64], ["copy", "d", 0, "c", 512, 512],
                 ["kernel", "scale", ["d", "e", 7, 128], 128, 64]]],
               ["run", "s"]], buffers={k: 1024 for k in "abcde"}),
    _scenario("schedule_diamond", "one producer, two independent consumers on two queues, one joiner",
              [["schedule", "s", {"copy_queues": 2},
                [["fill", "a", 0, 2048, 0x10101010], ["copy", "b", 0, "a", 0, 1024], ["copy", "c", 0, "a", 1024, 1024],
                 ["kernel", "add", ["b", "c", "d", 256], 256, 64]]],
               ["run", "s"]], buffers={k: 2048 for k in "abcd"}),
    _scenario("schedule_replay_three_times", "a compiled schedule run three times: inc applied three times",
              [["schedule", "s", {}, [["kernel", "inc", ["x", 64], 64, 64], ["copy", "y", 0, "x", 0, 256]]],
               ["run", "s"], cp("after_one", buffers=[["y", 0, 16]]), ["run", "s"], ["run", "s"]],
              buffers={"x": 256, "y": 256}),
    _scenario("schedule_rebind_buffers", "replay on other buffers: patched addresses, same program",
              [["schedule", "s", {}, [["fill", "a", 0, 512, 0x31313131], ["copy", "b", 0, "a", 256, 256],
                                      ["kernel", "inc", ["b", 64], 64, 64]]],
               ["run", "s"], ["run", "s", {"bind": {"a": "a2", "b": "b2"}}]],
              buffers={"a": 1024, "b": 1024, "a2": 1024, "b2": 1024}),
    _scenario("schedule_params", "a fill value as a parameter, changed between runs",
              [["schedule", "s", {}, [["fill", "a", 0, 256, {"param": "v", "default": 5}], ["copy", "b", 0, "a", 0, 256]]],
               ["run", "s"], cp("default", buffers=[["b", 0, 8]]), ["run", "s", {"params": {"v": 0x12345678}}]],
              buffers={"a": 256, "b": 256}),
    _scenario("schedule_host_ops", "host writes inside a schedule, ordered with the GPU work around them",
              [["schedule", "s", {}, [["fill", "a", 0, 256, 1], ["host_write", "a", 16, [0xAAAA5555, 0x5555AAAA]],
                                      ["copy", "b", 0, "a", 0, 256]]],
               ["run", "s"]], buffers={"a": 256, "b": 256}),
    _scenario("schedule_two_devices", "one schedule over two GPUs: peer copies both ways, device sync",
              [["schedule", "s", {"devices": [0, 1]},
                [["fill", "a0", 0, 1024, 0x0A0A0A0A], ["copy", "b1", 0, "a0", 0, 1024], ["kernel", "inc", ["b1", 256], 256, 64],
                 ["copy", "c0", 0, "b1", 0, 1024]]],
               ["run", "s"]], devices=2,
              buffers={"a0": 1024, "b1": {"size": 1024, "device": 1}, "c0": 1024}),
    _scenario("schedule_after_timeline_work", "direct work on the timeline, then a schedule that reads its result",
              [["fill", "copy1", "a", 0, 1024, 0x66666666], ["timeline", "copy1"], ["submit", "copy1"],
               ["schedule", "s", {}, [["copy", "b", 0, "a", 0, 1024]]], ["run", "s"]],
              buffers={"a": 1024, "b": 1024}),
]

NAMES = [s["name"] for s in SCENARIOS]
assert len(set(NAMES)) == len(NAMES), "scenario names must be unique"


def get(name: str) -> dict:
    for s in SCENARIOS:
        if s["name"] == name:
            return s
    raise KeyError(f"no scenario {name!r}; scenarios: {', '.join(NAMES)}")


# -- syntax shared by every interpreter: loops and expressions, expanded to plain steps -----------------------


def _value(x, env: dict):
    if isinstance(x, str):
        if x.startswith("="):
            return eval(x[1:], {"__builtins__": {}}, dict(env))  # arithmetic and f-strings over n / i only
        if x.startswith("$") and x[1:] in env:
            return env[x[1:]]
    if isinstance(x, list):
        return [_value(v, env) for v in x]
    if isinstance(x, dict):
        return {k: _value(v, env) for k, v in x.items()}
    return x


def queue_name(device: int, engine: str, index: int) -> str:
    return f"{engine}{index}" if device == 0 else f"d{device}.{engine}{index}"


def expand(steps: list, queue_counts: dict[int, dict[str, int]], env: dict | None = None) -> list:
    """`repeat` and `each_queue` unrolled, `$`/`=` values substituted. `queue_counts[device][engine]` is how many
    hardware queues each engine of a device has (a fact of the device, given by whoever runs the scenario)."""
    env = env or {}
    out = []
    for step in steps:
        verb = step[0]
        if verb == "repeat":
            for n in range(1, step[1] + 1):
                out += expand(step[2], queue_counts, {**env, "n": n})
        elif verb == "each_queue":
            engine = step[1]
            count = queue_counts[0][engine] if len(step) < 4 else min(step[3], queue_counts[0][engine])
            for i in range(count):
                out += expand(step[2], queue_counts, {**env, "i": i, "q": queue_name(0, engine, i)})
        elif verb == "schedule":
            out.append([verb, step[1], step[2], [_value(op, env) for op in step[3]]])
        else:
            out.append(_value(step, env))
    return out


def words_of(spec) -> list[int]:
    """A word list, or {"pattern": [...], "words": count}."""
    if isinstance(spec, dict):
        pat, count = spec["pattern"], spec["words"]
        return (pat * (count // len(pat) + 1))[:count]
    return list(spec)


def parse_queue(name: str) -> tuple[int, str, int]:
    """"copy1" -> (0, "copy", 1); "d1.compute0" -> (1, "compute", 0)."""
    device = 0
    if name.startswith("d") and "." in name:
        head, name = name.split(".", 1)
        device = int(head[1:])
    engine = "compute" if name.startswith("compute") else "copy"
    return device, engine, int(name[len(engine):])


def buffer_spec(spec) -> dict:
    """A buffer declaration with its defaults filled in."""
    spec = {"size": spec} if isinstance(spec, int) else dict(spec)
    spec.setdefault("device", 0)
    spec.setdefault("uncached", False)
    spec.setdefault("init", "pattern")
    return spec


def signal_spec(spec) -> dict:
    spec = {"value": spec} if isinstance(spec, int) else dict(spec)
    spec.setdefault("device", 0)
    return spec


def split_arg(arg: str) -> tuple[str, int]:
    """A kernel buffer argument "name" or "name+offset" -> (name, offset in bytes)."""
    name, _, off = arg.partition("+")
    return name, int(off or 0)
