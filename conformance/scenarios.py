"""The conformance scenarios: declarative programs of runtime operations, as plain data.

Every scenario is a dict:

    name      unique, used on the command line and in records
    doc       what it checks (the kfdtest area it mirrors, or the runtime pattern)
    devices   how many GPUs (default 1)
    buffers   name -> size in bytes, or {"size": n, "device": d, "uncached": bool, "init": "pattern"|"zero"|u32,
              "access": "readwrite"|"readonly" (GPU writes fault), "record": "bytes"|"sorted" (words in order)}
              ("pattern", the default: word j of the k-th buffer (0-based, declaration order) holds
              (k + 1) * 0x01000000 + j, mod 2^32; an int: every word holds it)
    signals   name -> initial value, or {"value": v, "device": d}
    orders    [[t_a, t_b], ...]: timestamp t_a must not be later than t_b (the scenario orders them)
    moves     [[t_a, t_b], ...]: t_a < t_b: the clock advanced over the work between them (a frozen clock fails)
    steps     the program, in order (below)

Queues are named `compute<i>` / `copy<i>` (device 0) or `d<k>.compute<i>` / `d<k>.copy<i>` (device k): hardware
queue i of that engine. A queue step is recorded into the queue's pending commands; `submit` hands them to the
hardware. Host steps run when reached; GPU work runs concurrently with them.

Queue steps (first element, then arguments):
    fill Q buf off size value32          copy Q dst doff src soff size     kernel Q name [args] global local
    signal Q sig value                   wait Q sig value (>=)             timestamp Q ts
    barrier Q  (memory barrier)          timeline Q (signal the device timeline's next value)
    pm4 Q {packet}   one raw PM4 packet on a compute queue: {"op": write_data | release_mem | wait_reg_mem |
                     atomic_mem | copy_data | ib, ...fields} (addresses "buf+off"; timestamps "ts": name)
    sdma Q {packet}  one raw SDMA packet on a copy queue: {"op": write | fence | poll | atomic | fill | copy |
                     timestamp_global | timestamp_local, ...}
    notify Q event [{"int_sel": n}]  wake KFD event `event` as runtimes do (PM4 RELEASE_MEM, SDMA FENCE + TRAP)
    barrier_and Q [signal objects "buf+off"] [completion]  wait until each 64-bit value at +8 is 0, then decrement
                     the completion signal's (AQL: a barrier-AND packet)
    submit Q (an empty submit is a NOP submit)
Host steps:
    host_write buf off [u32 words]       set_signal sig value              host_wait sig value
    copyin buf off [u32 words]           copyout name buf off size         transfer dst src size (waits)
    synchronize d                        checkpoint name {"buffers": [buf | [buf, off, size]], "signals": [..]}
    repeat count [steps] ("$n" is 1..count)       each_queue engine [steps] ("$q" queue name, "$i" its index)
    schedule name {options} [ops]        run name {"bind": {buf: other_buf}, "params": {name: value}}
    event name [device]                  a KFD signal event (manual reset)
    event_check name [events]            checkpoint: whether each event was delivered (WAIT_EVENTS, timeout 0)
    expect_fault name device             checkpoint: the memory exception the device reports (buffer, page, kind)
    topology name                        checkpoint: the sysfs node properties a runtime sizes itself by
    read_pointer name Q {"wraps": bool}  checkpoint of copy queue Q (idle: synchronize first): whether the u64 the
                                         engine writes its rptr back to equals the wptr, both byte positions that
                                         never wrap (HARDWARE_FACTS 5.5; tinygrad's free space is ring - (wptr -
                                         rptr)), and whether the wptr went past the ring end (as `wraps` declares)
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


def _scenario(name, doc, steps, *, buffers=None, signals=None, devices=1, orders=(), moves=()):
    return {"name": name, "doc": doc, "devices": devices, "buffers": buffers or {}, "signals": signals or {},
            "orders": [list(o) for o in orders], "moves": [list(m) for m in moves], "steps": steps}


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
    _scenario("copy_ring_wraparound", "1500 fill+signal submits wrap the SDMA ring; the last fill wins; idle, the "
              "rptr written back is the 64-bit byte position (= wptr), not the offset in the ring",
              [["repeat", 1500, [["fill", "copy0", "b", 0, 64, "$n"], ["signal", "copy0", "s", "$n"],
                                 ["submit", "copy0"]]],
               ["host_wait", "s", 1500], ["synchronize", 0], ["read_pointer", "idle", "copy0", {"wraps": True}]],
              buffers={"b": 256}, signals={"s": 0}),
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
              buffers={"b": 64 * KiB}, signals={"s": 0}, orders=[["t0", "t1"], ["t1", "t2"]], moves=[["t0", "t1"]]),
    _scenario("copy_timestamps_monotonic", "SDMA TIMESTAMP GET_GLOBAL around a copy",
              [["timestamp", "copy0", "t0"], ["copy", "copy0", "b", 0, "a", 0, 32 * KiB],
               ["timestamp", "copy0", "t1"], ["signal", "copy0", "s", 1], ["submit", "copy0"], ["host_wait", "s", 1]],
              buffers={"a": 32 * KiB, "b": 32 * KiB}, signals={"s": 0}, orders=[["t0", "t1"]], moves=[["t0", "t1"]]),
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
    _scenario("schedule_fill_copy",
              "the schedule of docs/schedule.md's example: fills and copies over three buffers, two copy queues",
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

# -- raw packets: every documented effect a compute runtime relies on, one field combination at a time -----------

_GARBAGE, _RELEASE_BITS, _MASK = 0xABCD0000, 0x12340000, 0x0000FFFF
# compare function -> (masked value that fails against REFERENCE 10, masked value that passes); the failing values
# sit on the edge a neighbouring function would pass (== starts above, != is released by a smaller value), and the
# bits outside MASK would make an unmasked compare pass (or fail) early
_FUNCTIONS = {1: (10, 9), 2: (11, 10), 3: (11, 10), 4: (10, 9), 5: (9, 10), 6: (10, 11)}


def _wait_function_steps(engine: str) -> list:
    steps = []
    for f, (fail, _) in _FUNCTIONS.items():
        steps.append(["host_write", "w", 4 * f, [_GARBAGE | fail]])
    q0 = f"{engine}0"
    if engine == "compute":
        wait = lambda f: ["pm4", f"compute{f}", {"op": "wait_reg_mem", "addr": f"w+{4 * f}", "function": f,  # noqa: E731
                                                 "ref": 10, "mask": _MASK}]
        mark = lambda f: ["pm4", f"compute{f}", {"op": "write_data", "dst": f"m+{4 * f}", "words": [0x100 + f]}]  # noqa: E731
    else:
        wait = lambda f: ["sdma", f"copy{f}", {"op": "poll", "addr": f"w+{4 * f}", "func": f, "ref": 10,  # noqa: E731
                                              "mask": _MASK}]
        mark = lambda f: ["sdma", f"copy{f}", {"op": "write", "dst": f"m+{4 * f}", "words": [0x100 + f]}]  # noqa: E731
    # function 0 (always) passes at once
    steps += [wait(0), mark(0), ["signal", q0, "r0", 1], ["submit", q0], ["host_wait", "r0", 1]]
    for f in _FUNCTIONS:
        steps += [wait(f), mark(f), ["signal", f"{engine}{f}", f"r{f}", 1], ["submit", f"{engine}{f}"]]
    steps.append(cp("blocked", buffers=[["m", 4, 24]]))
    for f, (_, ok) in _FUNCTIONS.items():
        steps.append(["host_write", "w", 4 * f, [_RELEASE_BITS | ok]])
    steps += [["host_wait", f"r{f}", 1] for f in _FUNCTIONS]
    return steps


_ATOMICS32 = [  # (op, initial, src, cmp): each on its own word, its pre-op value copied to r
    ("ADD", 100, 5, 0), ("SUB", 100, 7, 0), ("SMIN", 0xFFFFFFF0, 5, 0), ("UMIN", 0xFFFFFFF0, 5, 0),
    ("SMAX", 0xFFFFFFF0, 5, 0), ("UMAX", 5, 0xFFFFFFF0, 0), ("AND", 0xF0F0, 0xFF00, 0), ("OR", 0xF0F0, 0x0F0F, 0),
    ("XOR", 0xF0F0, 0xFFFF, 0), ("SWAP", 42, 7, 0), ("CMPSWAP", 42, 9, 42), ("CMPSWAP", 42, 9, 41),
    ("ADD", 0xFFFFFFFF, 2, 0)]
_ATOMICS64 = [("ADD", 0xFFFFFFFF, 1, 0), ("SWAP", 0x1111111122222222, 0x3333333344444444, 0),
              ("CMPSWAP", 0x0000000500000007, 9, 0x0000000500000007), ("CMPSWAP", 0x0000000500000007, 9, 7),
              ("UMAX", 0xFFFFFFFF, 0x100000000, 0), ("SUB", 0x100000000, 1, 0)]


def _u64_words(v: int) -> list[int]:
    return [v & 0xFFFFFFFF, v >> 32]


def _atomic_steps(engine: str) -> list:
    q = f"{engine}0"
    verb = "pm4" if engine == "compute" else "sdma"
    op = "atomic_mem" if engine == "compute" else "atomic"
    steps = []
    for k, (name, init, src, cmp) in enumerate(_ATOMICS32):
        steps.append(["host_write", "a", 4 * k, [init]])
        p = {"op": op, "atomic": name, "bits": 32, "addr": f"a+{4 * k}", "src": src, "cmp": cmp}
        if engine == "compute":
            p["ret"] = f"r+{4 * k}"
        steps.append([verb, q, p])
    for k, (name, init, src, cmp) in enumerate(_ATOMICS64):
        steps.append(["host_write", "a", 128 + 8 * k, _u64_words(init)])
        p = {"op": op, "atomic": name, "bits": 64, "addr": f"a+{128 + 8 * k}", "src": src, "cmp": cmp}
        if engine == "compute":
            p["ret"] = f"r+{128 + 8 * k}"
        steps.append([verb, q, p])
    for k in range(3):  # three adds in sequence on one word: each returns the previous one's result
        p = {"op": op, "atomic": "ADD", "bits": 32, "addr": "a+256", "src": 1000 + k}
        if engine == "compute":
            p["ret"] = f"r+{256 + 4 * k}"
        steps.append([verb, q, p])
    if engine == "compute":  # a non-returning op changes memory the same way
        steps.append([verb, q, {"op": op, "atomic": "ADD", "bits": 32, "addr": "a+268", "src": 3, "returns": False}])
    return steps + [["signal", q, "s", 1], ["submit", q], ["host_wait", "s", 1]]


def _geometry(name, doc, grid, group):
    nx, ny, nz = ((grid,) if isinstance(grid, int) else tuple(grid)) + (1, 1, 1)[len([grid] if isinstance(grid, int) else grid):]
    return _scenario(name, doc, [["kernel", "compute0", "geometry", ["out", nx, ny, nz], grid, group],
                                 ["signal", "compute0", "s", 1], ["submit", "compute0"], ["host_wait", "s", 1]],
                     buffers={"out": 4 * nx * ny * nz + 256}, signals={"s": 0})


def _fault(name, doc, steps, *, engine="compute0"):
    return _scenario(name, doc, steps + [["signal", engine, "after", 1], ["submit", engine],
                                         ["expect_fault", "fault", 0]],
                     buffers={"ro": {"size": 16 * KiB, "access": "readonly"}, "src": 4 * KiB}, signals={"after": 0})


SCENARIOS += [
    _scenario("pm4_write_data_forms", "WRITE_DATA of 1, 2 and 5 dwords to memory, 3 through L2, 2 synchronous, "
              "and WR_ONE_ADDR (every dword to one address: the last stays)",
              [["pm4", "compute0", {"op": "write_data", "dst": "m+0", "words": [0xA1]}],
               ["pm4", "compute0", {"op": "write_data", "dst": "m+8", "words": [0xB1, 0xB2]}],
               ["pm4", "compute0", {"op": "write_data", "dst": "m+20", "words": [0xC1, 0xC2, 0xC3, 0xC4, 0xC5]}],
               ["pm4", "compute0", {"op": "write_data", "dst": "m+64", "words": [0xD1, 0xD2, 0xD3], "dst_sel": "tc_l2"}],
               ["pm4", "compute0", {"op": "write_data", "dst": "m+96", "words": [0xE1, 0xE2], "dst_sel": "mem_sync"}],
               ["pm4", "compute0", {"op": "write_data", "dst": "m+128", "words": [0xF1, 0xF2, 0xF3, 0xF4], "one_addr": 1}],
               ["signal", "compute0", "s", 1], ["submit", "compute0"], ["host_wait", "s", 1]],
              buffers={"m": 256}, signals={"s": 0}),
    _scenario("pm4_release_mem_data_sel", "RELEASE_MEM DATA_SEL 1 writes the low 32 bits only, 2 all 64, 0 nothing, "
              "3 a GPU clock that moves over a 64 KiB fill; DST_SEL memory and L2 land alike",
              [["pm4", "compute0", {"op": "release_mem", "data_sel": 1, "dst": "r+0", "value": 0x1122334455667788}],
               ["pm4", "compute0", {"op": "release_mem", "data_sel": 2, "dst": "r+8", "value": 0x1122334455667788}],
               ["pm4", "compute0", {"op": "release_mem", "data_sel": 0, "dst": "r+16", "value": 0x99}],
               ["pm4", "compute0", {"op": "release_mem", "data_sel": 1, "dst": "r+24", "value": 7, "dst_sel": 1}],
               ["pm4", "compute0", {"op": "release_mem", "data_sel": 2, "dst": "r+32", "value": (9 << 32) | 8,
                                    "dst_sel": 1}],
               ["pm4", "compute0", {"op": "release_mem", "data_sel": 3, "ts": "t0"}],
               ["fill", "compute0", "b", 0, 64 * KiB, 3],
               ["pm4", "compute0", {"op": "release_mem", "data_sel": 3, "ts": "t1", "dst_sel": 1}],
               ["signal", "compute0", "s", 1], ["submit", "compute0"], ["host_wait", "s", 1]],
              buffers={"r": 64, "b": 64 * KiB}, signals={"s": 0}, orders=[["t0", "t1"]], moves=[["t0", "t1"]]),
    _scenario("pm4_release_mem_interrupts", "RELEASE_MEM INT_SEL 2 (after write confirm) and 4 (unconditional) "
              "deliver a KFD event, INT_SEL 3 (write confirm, no interrupt) does not, INT_SEL 5/6 only when the "
              "32/64-bit value at the address equals CMP_DATA; SDMA TRAP delivers",
              [*[["event", e] for e in ("e2", "e3", "e4", "e5", "e5x", "e6", "e6x", "es")],
               ["notify", "compute0", "e2", {"int_sel": 2}], ["notify", "compute0", "e3", {"int_sel": 3}],
               ["notify", "compute0", "e4", {"int_sel": 4}], ["notify", "compute0", "e5", {"int_sel": 5}],
               ["notify", "compute0", "e5x", {"int_sel": 5, "cmp_offset": 1}], ["notify", "compute0", "e6", {"int_sel": 6}],
               ["notify", "compute0", "e6x", {"int_sel": 6, "cmp_offset": 1 << 32}],
               ["signal", "compute0", "s", 1], ["submit", "compute0"],
               ["notify", "copy0", "es"], ["signal", "copy0", "s2", 1], ["submit", "copy0"],
               ["host_wait", "s", 1], ["host_wait", "s2", 1],
               ["event_check", "delivered", ["e2", "e3", "e4", "e5", "e5x", "e6", "e6x", "es"]]],
              signals={"s": 0, "s2": 0}),
    _scenario("pm4_wait_reg_mem_functions", "WAIT_REG_MEM with every compare function under a 16-bit mask: "
              "each blocks on a value at the edge, then passes on one the host stores (other bits set)",
              _wait_function_steps("compute"), buffers={"w": 64, "m": {"size": 64, "init": "zero"}},
              signals={f"r{f}": 0 for f in range(7)}),
    _scenario("sdma_poll_regmem_functions", "POLL_REGMEM with every compare function under a 16-bit mask: "
              "each blocks on a value at the edge, then passes on one the host stores (other bits set)",
              _wait_function_steps("copy"), buffers={"w": 64, "m": {"size": 64, "init": "zero"}},
              signals={f"r{f}": 0 for f in range(7)}),
    _scenario("pm4_atomic_mem_returns_pre_op", "ATOMIC_MEM 32- and 64-bit ops (signed/unsigned min/max, logic, "
              "swap, compare-swap hit and miss, carry into the high half); COPY_DATA SRC_SEL 6 reads each pre-op value",
              _atomic_steps("compute"), buffers={"a": {"size": 512, "init": 0}, "r": {"size": 512, "init": 0}},
              signals={"s": 0}),
    _scenario("sdma_atomic_ops", "SDMA ATOMIC 32- and 64-bit ops change memory as ATOMIC_MEM does",
              _atomic_steps("copy"), buffers={"a": {"size": 512, "init": 0}}, signals={"s": 0}),
    _scenario("pm4_copy_data_forms", "COPY_DATA memory to memory (32 and 64 bits), immediates (32 and 64 bits), and "
              "the GPU clock, which moves over a fill and orders with RELEASE_MEM timestamps",
              [["pm4", "compute0", {"op": "copy_data", "src_sel": "mem", "src": "a+4", "dst": "b+0", "bits": 32}],
               ["pm4", "compute0", {"op": "copy_data", "src_sel": "mem", "src": "a+16", "dst": "b+8", "bits": 64}],
               ["pm4", "compute0", {"op": "copy_data", "src_sel": "imm", "src": 0xDEADBEEF, "dst": "b+24", "bits": 32}],
               ["pm4", "compute0", {"op": "copy_data", "src_sel": "imm", "src": 0x0123456789ABCDEF, "dst": "b+32",
                                    "bits": 64}],
               ["pm4", "compute0", {"op": "copy_data", "src_sel": "clock", "ts": "c0"}],
               ["fill", "compute0", "f", 0, 64 * KiB, 5],
               ["pm4", "compute0", {"op": "release_mem", "data_sel": 3, "ts": "r1"}],
               ["pm4", "compute0", {"op": "copy_data", "src_sel": "clock", "ts": "c1"}],
               ["signal", "compute0", "s", 1], ["submit", "compute0"], ["host_wait", "s", 1]],
              buffers={"a": 64, "b": 64, "f": 64 * KiB}, signals={"s": 0}, orders=[["c0", "r1"], ["r1", "c1"]],
              moves=[["c0", "c1"]]),
    _scenario("pm4_indirect_buffer_chain", "an INDIRECT_BUFFER runs its packets and returns; a CHAIN inside it "
              "replaces it (what follows the CHAIN never runs); the ring goes on after the IB",
              [["pm4", "compute0", {"op": "ib", "packets": [
                  {"op": "write_data", "dst": "m+0", "words": [1, 2]},
                  {"op": "ib", "chain": True, "packets": [{"op": "write_data", "dst": "m+8", "words": [3]}]},
                  {"op": "write_data", "dst": "m+12", "words": [0xBAD]}]}],
               ["pm4", "compute0", {"op": "write_data", "dst": "m+16", "words": [4]}],
               ["signal", "compute0", "s", 1], ["submit", "compute0"], ["host_wait", "s", 1]],
              buffers={"m": {"size": 64, "init": "zero"}}, signals={"s": 0}),
    _scenario("pm4_indirect_buffer_sizes", "IBs of 5 and 300 dwords (sizes count dwords): every packet in them runs",
              [["pm4", "compute0", {"op": "ib", "packets": [{"op": "write_data", "dst": "m+0", "words": [7, 8, 9]}]}],
               ["pm4", "compute0", {"op": "ib", "packets": [{"op": "write_data", "dst": f"m+{16 + 12 * k}",
                                                            "words": [k, k + 1, k + 2]} for k in range(50)]}],
               ["pm4", "compute0", {"op": "ib", "packets": [{"op": "write_data", "dst": "m+1000", "words": [5]}]}],
               ["signal", "compute0", "s", 1], ["submit", "compute0"], ["host_wait", "s", 1]],
              buffers={"m": {"size": 1024, "init": "zero"}}, signals={"s": 0}),
    _scenario("sdma_write_and_fence_forms", "WRITE_UNTILED of 1, 2 and 7 dwords; FENCE writes exactly 32 bits "
              "(the next word keeps its value)",
              [["sdma", "copy0", {"op": "write", "dst": "m+0", "words": [0xA1]}],
               ["sdma", "copy0", {"op": "write", "dst": "m+8", "words": [0xB1, 0xB2]}],
               ["sdma", "copy0", {"op": "write", "dst": "m+20", "words": [0xC1, 0xC2, 0xC3, 0xC4, 0xC5, 0xC6, 0xC7]}],
               ["sdma", "copy0", {"op": "fence", "dst": "m+64", "value": 0xFEEDF00D}],
               ["sdma", "copy0", {"op": "fence", "dst": "m+76", "value": 0x12345678}],
               ["signal", "copy0", "s", 1], ["submit", "copy0"], ["host_wait", "s", 1]],
              buffers={"m": 128}, signals={"s": 0}),
    _scenario("sdma_count_limits", "one CONST_FILL and one COPY_LINEAR of exactly 4 MiB (the COUNT limit every "
              "SDMA has), and runtime fills of 4 MiB - 4 and 4 MiB + 4",
              [["sdma", "copy0", {"op": "fill", "dst": "a+4", "size": 4 * MiB, "value": 0x0F0F0F0F}],
               ["sdma", "copy0", {"op": "copy", "dst": "b+1", "src": "a+3", "size": 4 * MiB}],
               ["fill", "copy0", "c", 0, 4 * MiB - 4, 0x11], ["fill", "copy0", "c", 4 * MiB, 4 * MiB + 4, 0x22],
               ["signal", "copy0", "s", 1], ["submit", "copy0"], ["host_wait", "s", 1]],
              buffers={"a": 4 * MiB + 64, "b": 4 * MiB + 64, "c": 8 * MiB + 64}, signals={"s": 0}),
    _scenario("sdma_timestamps_move", "SDMA global and engine-local timestamps both move over a 256 KiB copy",
              [["sdma", "copy0", {"op": "timestamp_global", "ts": "g0"}],
               ["sdma", "copy0", {"op": "timestamp_local", "ts": "l0"}],
               ["copy", "copy0", "b", 0, "a", 0, 256 * KiB],
               ["sdma", "copy0", {"op": "timestamp_global", "ts": "g1"}],
               ["sdma", "copy0", {"op": "timestamp_local", "ts": "l1"}],
               ["signal", "copy0", "s", 1], ["submit", "copy0"], ["host_wait", "s", 1]],
              buffers={"a": 256 * KiB, "b": 256 * KiB}, signals={"s": 0}, moves=[["g0", "g1"], ["l0", "l1"]]),
    _scenario("barrier_and_waits_for_every_dependency", "a barrier-AND with one dependency done and one not holds "
              "the queue until the host completes the second, then decrements its completion signal by one (AQL: the "
              "barrier-AND packet; PM4: waits and an atomic)",
              [["host_write", "hs", 72, [1, 0]], ["host_write", "hs", 136, [2, 0]],
               ["barrier_and", "compute0", ["hs+0", "hs+64"], "hs+128"],
               ["pm4", "compute0", {"op": "write_data", "dst": "m+0", "words": [0x77]}],
               ["signal", "compute0", "s", 1], ["submit", "compute0"], cp("held", buffers=["m"]),
               ["host_write", "hs", 72, [0, 0]], ["host_wait", "s", 1]],
              buffers={"hs": {"size": 192, "init": 0}, "m": {"size": 16, "init": 0}}, signals={"s": 0}),
    # -- events on every GPU, topology -------------------------------------------------------------------------
    _scenario("events_on_every_gpu", "each GPU of a two-GPU system delivers KFD events from its compute queue "
              "(RELEASE_MEM interrupt) and its SDMA queue (TRAP)",
              [["event", "c0", 0], ["event", "s0", 0], ["event", "c1", 1], ["event", "s1", 1],
               ["notify", "compute0", "c0"], ["signal", "compute0", "a", 1], ["submit", "compute0"],
               ["notify", "copy0", "s0"], ["signal", "copy0", "b", 1], ["submit", "copy0"],
               ["notify", "d1.compute0", "c1"], ["signal", "d1.compute0", "c", 1], ["submit", "d1.compute0"],
               ["notify", "d1.copy0", "s1"], ["signal", "d1.copy0", "d", 1], ["submit", "d1.copy0"],
               ["host_wait", "a", 1], ["host_wait", "b", 1], ["host_wait", "c", 1], ["host_wait", "d", 1],
               ["event_check", "delivered", ["c0", "s0", "c1", "s1"]]], devices=2,
              signals={"a": 0, "b": 0, "c": {"value": 0, "device": 1}, "d": {"value": 0, "device": 1}}),
    _scenario("topology_a_runtime_reads", "the sysfs node properties a runtime sizes itself by (queue counts, "
              "SDMA engines, wave size, target version) are the documented ones on every GPU",
              [["topology", "nodes"]], devices=2),
    # -- dispatch geometry, barriers, atomics ------------------------------------------------------------------
    _geometry("kernel_geometry_1d", "geometry over 200 work-items in groups of 64 (a partial last group)", 200, 64),
    _geometry("kernel_geometry_2d", "geometry over 37 x 11 in groups of 8 x 4 (partial groups in x and y)",
              [37, 11], [8, 4]),
    _geometry("kernel_geometry_3d", "geometry over 9 x 5 x 7 in groups of 4 x 2 x 4 (partial in every dimension)",
              [9, 5, 7], [4, 2, 4]),
    _scenario("kernel_workgroup_barrier_lds", "barrier_handoff over 4 workgroups of 128: s_barrier orders the LDS "
              "stores of the lower half before the upper half's loads",
              [["kernel", "compute0", "barrier_handoff", ["out"], 512, 128], ["signal", "compute0", "s", 1],
               ["submit", "compute0"], ["host_wait", "s", 1]], buffers={"out": 2048}, signals={"s": 0}),
    _scenario("kernel_atomics_across_workgroups", "atomic_count: 300 work-items over 6 workgroups each add 1 to "
              "one counter; the returned pre-op values are 0..299 in some order",
              [["kernel", "compute0", "atomic_count", ["counter", "out", 300], 330, 64],
               ["signal", "compute0", "s", 1], ["submit", "compute0"], ["host_wait", "s", 1]],
              buffers={"counter": {"size": 64, "init": 0}, "out": {"size": 1200, "init": 0, "record": "sorted"}},
              signals={"s": 0}),
    _scenario("kernel_atomics_return_pre_op_values", "atomic_add_each: 200 work-items each add their id to their "
              "own word of a pattern buffer; each gets the word's old value back",
              [["kernel", "compute0", "atomic_add_each", ["x", "old", 200], 256, 64],
               ["signal", "compute0", "s", 1], ["submit", "compute0"], ["host_wait", "s", 1]],
              buffers={"x": 1024, "old": {"size": 1024, "init": 0}}, signals={"s": 0}),
    # -- page permissions: a write into a read-only page is a fault naming that page ---------------------------
    _fault("fault_sdma_fill_readonly", "an SDMA fill into a read-only buffer's third page faults (ReadOnly, that "
           "page); nothing lands and the queue stops before its signal",
           [["fill", "copy0", "ro", 8192 + 64, 1024, 0x5A5A5A5A]], engine="copy0"),
    _fault("fault_pm4_write_data_readonly", "WRITE_DATA into a read-only buffer's second page faults (ReadOnly, "
           "that page); the queue stops before its signal",
           [["pm4", "compute0", {"op": "write_data", "dst": "ro+4108", "words": [1, 2, 3]}]]),
    _fault("fault_kernel_store_readonly", "a kernel storing into a read-only buffer's second page faults "
           "(ReadOnly, that page); the queue stops before its signal",
           [["kernel", "compute0", "iota", ["ro+4160", 5, 64], 64, 64]]),
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
