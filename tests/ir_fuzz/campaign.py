"""Campaign mode: N random programs, every failure collected (nothing stops at the first), then a summary.

    python3 -m tests.ir_fuzz.campaign --target gfx1100 --opt 2 -n 500
    python3 -m tests.ir_fuzz.campaign --target gfx1100 gfx942 --opt 0 2 -n 300 -j 2 --out /tmp/fuzz

Each program is checked at every (target, opt) asked for, in worker processes (-j), so that an LLVM abort
(which kills the whole process) is recorded as an "llvm crash" of that program instead of ending the run.
Wrong values are reduced (`reduce.localize`) to the first wrong operation and grouped by its signature;
stops on unimplemented instructions are counted per target and mnemonic (only the first one a program
reaches: the queue stops there). `--out` gets one reproducer file per group and `summary.json`.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import sys
import time
from collections import Counter, defaultdict
from multiprocessing.connection import wait

from hypothesis import HealthCheck, Phase, given, seed, settings

from .dag import ALL_OPS, TYPES, Program, programs
from .reduce import localize
from .run import check


def generate(n: int, start: int, max_nodes: int, ops: tuple[str, ...] | None, types: tuple[str, ...]) -> list[Program]:
    """n programs from the hypothesis strategy (generation only: no shrinking, no database)."""
    out: list[Program] = []

    @seed(start)
    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(programs(max_nodes=max_nodes, ops=ops, types=types))
    def collect(prog: Program) -> None:
        out.append(prog)

    collect()
    return out[:n]


def _run_one(prog: Program, target: str, opt: int, seed_: int) -> dict:
    t0 = time.perf_counter()
    out = check(prog, target, opt, seed_)
    rec = {"target": target, "opt": opt, "kind": out.kind, "checks": out.checks, "mnemonic": out.mnemonic,
           "nodes": len(prog.nodes)}
    if out.kind == "mismatch":
        try:
            finding = localize(prog, target, opt, seed_, out)
            small = finding.outcome
            rec["signature"] = finding.signature
            rec["isolated"] = finding.isolated
            rec["repro_lines"] = small.ir.count("\n")
            rec["repro"] = _explain(small, target, opt)
        except Exception as e:  # noqa: BLE001 - a failed reduction must not lose the finding
            rec["signature"] = f"unreduced ({type(e).__name__}: {e})"
            rec["isolated"] = False
            rec["repro"] = _explain(out, target, opt)
            rec["repro_lines"] = out.ir.count("\n")
    elif out.kind in ("fault", "compile_error", "unsupported"):
        rec["message"] = out.message[:4000]
        rec["repro_lines"] = out.ir.count("\n")
    rec["seconds"] = time.perf_counter() - t0
    return rec


def _explain(out, target, opt) -> str:
    return out.message or f"(outcome {out.kind})\n{out.ir}"


def _worker(conn, configs) -> None:
    while True:
        task = conn.recv()
        if task is None:
            return
        index, prog, seed_ = task
        for target, opt in configs:
            conn.send(("start", index, target, opt))
            conn.send(("result", index, _run_one(prog, target, opt, seed_)))
        conn.send(("done", index))


def execute(progs: list[Program], configs: list[tuple[str, int]], jobs: int, seed0: int,
            progress: bool = True) -> list[dict]:
    """Run every program at every config in `jobs` worker processes; a worker that dies is replaced and
    the config it was running is recorded as an LLVM crash (or other abort)."""
    ctx = mp.get_context("fork")
    records: list[dict] = []
    todo = list(enumerate(progs))
    todo.reverse()
    workers: dict = {}  # conn -> [process, current task, current config]

    def spawn():
        parent, child = ctx.Pipe()
        p = ctx.Process(target=_worker, args=(child, configs), daemon=True)
        p.start()
        child.close()
        workers[parent] = [p, None, None]
        feed(parent)

    def feed(conn):
        if todo:
            index, prog = todo.pop()
            workers[conn][1] = (index, prog)
            conn.send((index, prog, seed0 + index))
        else:
            workers[conn][1] = None
            conn.send(None)

    for _ in range(max(1, jobs)):
        spawn()
    done = 0
    t0 = time.perf_counter()
    while workers:
        conns = list(workers)
        sentinels = {workers[c][0].sentinel: c for c in conns}
        ready = wait(conns + list(sentinels))
        for r in ready:
            conn = sentinels.get(r, r)
            if conn not in workers:
                continue
            proc, task, cfg = workers[conn]
            try:
                msg = conn.recv() if conn.poll() else None
            except (EOFError, OSError):
                msg = None
            if msg is None:
                if not proc.is_alive() or r in sentinels:
                    proc.join(timeout=1)
                    if task is not None:
                        index, prog = task
                        records.append({"target": cfg[0] if cfg else "?", "opt": cfg[1] if cfg else -1,
                                        "kind": "llvm crash", "checks": 0, "mnemonic": "",
                                        "nodes": len(prog.nodes), "message": f"worker died (exit code "
                                        f"{proc.exitcode}) on program {index}:\n{prog.describe()}",
                                        "repro_lines": len(prog.nodes)})
                        done += 1
                        # the remaining configs of that program are skipped
                    del workers[conn]
                    if todo:
                        spawn()
                continue
            if msg[0] == "start":
                workers[conn][2] = (msg[2], msg[3])
            elif msg[0] == "result":
                records.append(msg[2])
            elif msg[0] == "done":
                done += 1
                if progress and done % 25 == 0:
                    rate = sum(r["checks"] for r in records) / (time.perf_counter() - t0)
                    print(f"  {done}/{len(progs)} programs, {rate:.0f} checks/s", file=sys.stderr, flush=True)
                feed(conn)
    return records


def _mnemonics_of(text: str) -> list[str]:
    """The interesting instructions of a listing inside a failure text (no loads/stores/waits)."""
    part = text.split("listing:", 1)[-1]
    names = re.findall(r"^\s+([vs]_[a-z0-9_]+)", part, re.M)
    boring = re.compile(r"^(s_waitcnt|s_delay_alu|s_endpgm|s_load_|s_clause|s_nop|global_|v_add_co_|v_lshl_add_u64|"
                        r"s_mov_b32$|s_mov_b64$|s_and_saveexec|s_cbranch|s_branch|s_or_b|s_and_b|s_andn2|"
                        r"s_and_not1|s_xor_b|v_lshlrev_b64|v_mov_b32_e32$|s_mul_i32|v_mad_u64|v_lshlrev_b32|"
                        r"s_getpc|v_mad_u32|s_set_inst|s_sendmsg)")
    seen = []
    for n in names:
        if not boring.match(n) and n not in seen:
            seen.append(n)
    return seen


def summarize(records: list[dict], n_programs: int, seconds: float, out_dir: str | None) -> str:
    lines = []
    checks = sum(r["checks"] for r in records)
    busy = sum(r.get("seconds", 0) for r in records)
    lines.append(f"campaign: {n_programs} programs, {len(records)} runs in {seconds:.1f} s wall "
                 f"({busy:.1f} s in workers): {checks} lane checks, {checks / max(seconds, 1e-9):.0f} checks/s wall, "
                 f"{checks / max(busy, 1e-9):.0f} checks/s per worker")
    per_cfg: dict = defaultdict(Counter)
    for r in records:
        per_cfg[(r["target"], r["opt"])][r["kind"]] += 1
    lines.append("outcomes per target/opt:")
    for (t, o), c in sorted(per_cfg.items(), key=str):
        lines.append(f"  {t} O{o}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    groups: dict = defaultdict(list)
    for r in records:
        if r["kind"] == "mismatch":
            groups[r["signature"]].append(r)
    lines.append(f"wrong values: {sum(len(g) for g in groups.values())} runs, {len(groups)} distinct signatures "
                 "(first wrong operation, isolated when marked *)")
    for k, (sig, rs) in enumerate(sorted(groups.items(), key=lambda kv: -len(kv[1]))):
        cfgs = Counter(f"{r['target']} O{r['opt']}" for r in rs)
        best = min(rs, key=lambda r: (not r["isolated"], r["repro_lines"]))
        lines.append(f"  [{len(rs):4d}] {'*' if best['isolated'] else ' '} {sig}   "
                     f"({', '.join(f'{c} {n}' for c, n in sorted(cfgs.items()))})")
        first = best["repro"].splitlines()[:3]
        for l in first:
            lines.append(f"           {l.strip()}")
        lines.append(f"           instructions: {' '.join(_mnemonics_of(best['repro'])[:14])}")
        if out_dir:
            name = re.sub(r"[^A-Za-z0-9_.]+", "_", sig)[:80]
            with open(os.path.join(out_dir, f"wrong_{k:03d}_{name}.txt"), "w") as f:
                f.write(f"signature: {sig}\nruns: {len(rs)} ({dict(cfgs)})\n\n{best['repro']}\n")
    uns: dict = defaultdict(Counter)
    for r in records:
        if r["kind"] == "unsupported":
            uns[r["target"]][r["mnemonic"]] += 1
    lines.append("unimplemented instructions (runs stopped, by target and mnemonic):")
    for t in sorted(uns):
        lines.append(f"  {t}: " + ", ".join(f"{m} {n}" for m, n in uns[t].most_common()))
    other: Counter = Counter()
    examples = {}
    for r in records:
        if r["kind"] in ("fault", "compile_error", "llvm crash"):
            head = r.get("message", "").splitlines()[0][:160] if r.get("message") else r["kind"]
            head = re.sub(r"0x[0-9a-f]+", "0x…", head)
            key = f"{r['kind']} {r['target']} O{r['opt']}: {head}"
            other[key] += 1
            examples.setdefault(key, r.get("message", ""))
    if other:
        lines.append("other failures:")
        for key, n in other.most_common():
            lines.append(f"  [{n}] {key}")
        if out_dir:
            with open(os.path.join(out_dir, "other_failures.txt"), "w") as f:
                for key, msg in examples.items():
                    f.write(f"==== {key}\n{msg}\n\n")
    if out_dir:
        with open(os.path.join(out_dir, "unsupported_examples.txt"), "w") as f:
            seen = set()
            for r in sorted((r for r in records if r["kind"] == "unsupported"), key=lambda r: r["repro_lines"]):
                if (r["target"], r["mnemonic"]) not in seen:
                    seen.add((r["target"], r["mnemonic"]))
                    f.write(f"==== {r['target']} O{r['opt']} {r['mnemonic']}\n{r['message']}\n\n")
        with open(os.path.join(out_dir, "summary.json"), "w") as f:
            json.dump({"records": [{k: v for k, v in r.items() if k not in ("repro", "message")} for r in records]},
                      f, indent=1)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", nargs="+", default=["gfx1100"], choices=["gfx1100", "gfx942"])
    ap.add_argument("--opt", nargs="+", type=int, default=[2], choices=[0, 1, 2, 3])
    ap.add_argument("-n", type=int, default=200, help="programs")
    ap.add_argument("-j", type=int, default=1, help="worker processes")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-nodes", type=int, default=12)
    ap.add_argument("--ops", nargs="*", default=None, help=f"restrict to these ops (of {' '.join(ALL_OPS)})")
    ap.add_argument("--types", nargs="*", default=list(TYPES))
    ap.add_argument("--out", default=None, help="directory for reproducers and summary.json")
    args = ap.parse_args(argv)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    t0 = time.perf_counter()
    progs = generate(args.n, args.seed, args.max_nodes, tuple(args.ops) if args.ops else None, tuple(args.types))
    configs = [(t, o) for t in args.target for o in args.opt]
    print(f"generated {len(progs)} programs in {time.perf_counter() - t0:.1f} s; running on "
          f"{', '.join(f'{t} O{o}' for t, o in configs)}", file=sys.stderr, flush=True)
    t1 = time.perf_counter()
    records = execute(progs, configs, args.j, args.seed * 1_000_003)
    text = summarize(records, len(progs), time.perf_counter() - t1, args.out)
    print(text)
    if args.out:
        with open(os.path.join(args.out, "summary.txt"), "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
