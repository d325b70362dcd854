"""Collectives measured on a real engine: torch.distributed over N processes, gloo on a CPU, NCCL on GPUs.

What runs. N worker processes (one per GPU on CUDA; N on the CPU, each with its share of the
CPUs) join one process group over a free port on 127.0.0.1, and only there: MASTER_ADDR is
127.0.0.1, gloo is pinned to the loopback interface and NCCL's bootstrap too. Each runs all-reduce
(sum), all-gather, reduce-scatter (sum), all-to-all and send/recv (a ring of pairs: every rank sends
to rank + 1 and receives from rank − 1 at once) over a ladder of sizes, fp32 buffers of zeros (a sum
of zeros stays zero however often it runs, so no value drifts to infinity or denormals; links carry
bytes, not values). Per size: warm-up calls, then timed repeats, each started after a barrier and
ended after the device finished (CUDA synchronize); a repeat's time is the slowest rank's (the
parent takes the max over ranks of each repeat), and a size reports the median repeat.

What S is per collective, the bus factors and the alpha-beta fit: roofline.measure.collectives, the
record this module fills.

The budget. The whole run is bounded in seconds. The workers share a soft deadline a little before
it: before each size they agree (an all-reduce of a flag) whether the next size still fits, judged
from the last size's time, each collective getting an equal share of what is left (what one leaves
unused rolls over). At the budget the parent kills every worker that is still running (a hung
process group included); every size all ranks had finished is reported, and what was not measured
is said. Each worker also exits by itself a few seconds past the budget, should its parent die.

torch is imported only inside functions and inside the worker processes.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from roofline.errors import RooflineError, need_torch
from roofline.frozen import frozen
from roofline.measure.collectives import (
    ALL_GATHER,
    ALL_REDUCE,
    ALL_TO_ALL,
    BACKENDS,
    COLLECTIVES,
    ITEM_BYTES,
    REDUCE_SCATTER,
    CollectivePoint,
    Collectives,
    default_sizes,
    round_size,
)
from roofline.measure.timing import Timing
from roofline.units import format_bytes

FIRST_SIZE_WARMUP = 5  # extra warm-up calls at the first size of each collective


# --- the settings and the parent ------------------------------------------------------------------

@frozen
class CollectivesSettings:
    """What one collectives run does. `devices` None: 2 processes on a CPU, every visible GPU on CUDA."""

    device: str = "cpu"
    devices: int | None = None
    quick: bool = False
    sizes: tuple[int, ...] | None = None  # S per size, bytes (default: default_sizes)
    budget_s: float | None = None  # the whole run, process start-up included (default: budget())
    repeats: int | None = None
    warmup: int | None = None
    collectives: tuple[str, ...] = COLLECTIVES

    def timed_repeats(self) -> int:
        return self.repeats or (10 if self.quick else 20)

    def warmup_calls(self) -> int:
        return self.warmup if self.warmup is not None else (1 if self.quick else 2)

    def budget(self) -> float:
        if self.budget_s is not None:
            return float(self.budget_s)
        return {("cpu", True): 30.0, ("cpu", False): 120.0, ("cuda", True): 60.0, ("cuda", False): 180.0}[
            (self.device, self.quick)]


Progress = Callable[[str], None]


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def _loopback_interface() -> str:
    """The loopback interface's name ('lo' on Linux, 'lo0' on macOS), so gloo binds only there."""
    try:
        names = [name for _i, name in socket.if_nameindex()]
    except OSError:
        names = []
    return next((n for n in names if n in ("lo", "lo0")), next((n for n in names if n.startswith("lo")), "lo"))


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the rendezvous binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_settings(settings: CollectivesSettings) -> tuple[int, str, str | None]:
    """(ranks, device name, catalog id): the settings checked against this machine; bad input raises one line."""
    if settings.device not in BACKENDS:
        raise RooflineError(f"unknown device {settings.device!r}; devices: {', '.join(BACKENDS)}")
    unknown_names = [c for c in settings.collectives if c not in COLLECTIVES]
    if unknown_names or not settings.collectives:
        raise RooflineError(f"unknown collective {', '.join(unknown_names) or '(none given)'}; "
                            f"collectives: {', '.join(COLLECTIVES)}")
    if settings.budget_s is not None and not settings.budget_s > 0:
        raise RooflineError(f"the budget must be positive, got {settings.budget_s} s")
    if settings.repeats is not None and settings.repeats < 1:
        raise RooflineError(f"repeats must be at least 1, got {settings.repeats}")
    torch = need_torch("roofline measure --collectives")
    cuda = settings.device == "cuda"
    if cuda:
        from roofline.measure.ceilings import need_cuda

        need_cuda("measure --collectives --device cuda")
        visible = int(torch.cuda.device_count())
        ranks = settings.devices if settings.devices is not None else visible
        if ranks > visible:
            raise RooflineError(f"--devices {ranks} needs {ranks} GPUs; torch sees {visible} "
                                "(one rank per GPU: NCCL does not run two ranks on one GPU)")
    else:
        ranks = settings.devices if settings.devices is not None else 2
    if ranks < 2:
        what = "GPU" if cuda else "process"
        raise RooflineError(f"a collective needs at least 2 devices; got {ranks} {what}"
                            f"{'' if ranks == 1 else 's'} (--devices N, N >= 2)")
    if cuda:
        from roofline.measure.ceilings import catalog_match

        if not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
            raise RooflineError("measure --collectives --device cuda needs NCCL; this torch build has none")
        name = str(torch.cuda.get_device_name(0))
        match = catalog_match(name)
        catalog_id = match.id if match is not None else None
    else:
        if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
            raise RooflineError("measure --collectives needs torch.distributed with gloo; this torch build has none")
        from roofline.measure.env import cpu_name

        name, catalog_id = cpu_name(), None
    sizes = settings.sizes if settings.sizes is not None else default_sizes(settings.device, settings.quick)
    if not sizes or any(round_size(s, ranks) < ITEM_BYTES * ranks for s in sizes):
        raise RooflineError(f"every size must be at least {ITEM_BYTES * ranks} bytes over {ranks} ranks "
                            f"(one fp32 value per rank), got {list(sizes)}")
    return ranks, name, catalog_id


def measure_collectives(settings: CollectivesSettings | None = None, progress: Progress | None = None,
                        on_update: Callable[[Collectives], None] | None = None) -> Collectives:
    """Run the collectives over the settings' processes; see the module docstring for what and how.

    `on_update`, if given, receives the results so far about once a second while the workers run
    (a caller can save partial results as they come)."""
    settings = settings or CollectivesSettings()
    ranks, device_name, catalog_id = check_settings(settings)
    torch = need_torch("roofline measure --collectives")
    asked = settings.sizes or default_sizes(settings.device, settings.quick)
    sizes = tuple(sorted({round_size(s, ranks) for s in asked}))
    say = progress or (lambda _text: None)
    budget = settings.budget()
    t0 = time.perf_counter()
    wall0 = time.time()
    hard_deadline = wall0 + budget
    reserve = min(max(2.0, 0.1 * budget), 0.5 * budget)
    threads = max(1, _cpu_count() // ranks) if settings.device == "cpu" else 1
    backend = BACKENDS[settings.device]
    base = dict(device=settings.device, backend=backend, ranks=ranks, device_name=device_name, sizes=sizes,
                catalog_id=catalog_id, quick=settings.quick, budget_s=budget, repeats=settings.timed_repeats(),
                warmup=settings.warmup_calls(), date=time.strftime("%Y-%m-%d", time.gmtime()),
                versions={"torch": str(torch.__version__), "python": sys.version.split()[0],
                          **({"cuda": str(torch.version.cuda)} if settings.device == "cuda" else {})})
    notes: list[str] = []
    if settings.device == "cpu" and ranks > _cpu_count():
        notes.append(f"{ranks} processes on {_cpu_count()} CPUs: they take turns, and the times show it")
    with tempfile.TemporaryDirectory(prefix="roofline-collectives-") as tmp:
        folder = Path(tmp)
        spec = {"backend": backend, "device": settings.device, "ranks": ranks, "port": free_port(),
                "sizes": list(sizes),
                "collectives": list(settings.collectives), "repeats": settings.timed_repeats(),
                "warmup": settings.warmup_calls(), "soft_deadline": hard_deadline - reserve,
                "hard_deadline": hard_deadline, "timeout_s": budget + 5.0, "threads": threads, "folder": tmp}
        (folder / "spec.json").write_text(json.dumps(spec))
        say(f"collectives: starting {ranks} {backend} processes")
        procs = _start_workers(folder, ranks, settings.device, threads)
        killed = False
        failed: list[str] = []
        try:
            last_update = time.perf_counter()
            while True:
                codes = [p.poll() for p in procs]
                if all(c is not None for c in codes):
                    failed = [_worker_error(folder, r, c) for r, c in enumerate(codes) if c != 0]
                    break
                if any(c not in (None, 0) for c in codes):  # one died: the others would wait for it forever
                    failed = [_worker_error(folder, r, c) for r, c in enumerate(codes) if c not in (None, 0)]
                    killed = _kill(procs)
                    break
                if time.time() > hard_deadline:
                    killed = _kill(procs)
                    notes.append(f"the process group was still running at the budget ({budget:g} s) and was "
                                 "killed; the sizes every rank had finished are reported")
                    break
                status = _read_json(folder / "status.json")
                if status:
                    say(f"collectives: {status.get('step', '')}")
                if on_update is not None and time.perf_counter() - last_update > 1.0:
                    last_update = time.perf_counter()
                    on_update(_gather(folder, base, notes, time.perf_counter() - t0, complete=False))
                time.sleep(0.05)
        finally:
            _kill(procs)
        result = _gather(folder, base, notes, time.perf_counter() - t0, complete=not (killed or failed))
    if failed:
        first = failed[0]
        if not result.points:
            raise RooflineError(f"measure --collectives failed: {first}")
        result = _with(result, notes=(*result.notes, f"a worker failed: {first}"))
    return result


def _with(c: Collectives, **changes: Any) -> Collectives:
    from dataclasses import replace

    return replace(c, **changes)


def _worker_env(device: str, threads: int) -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])  # the folder holding the roofline package
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH", "")) if p)
    env.update(MASTER_ADDR="127.0.0.1", PYTHONUNBUFFERED="1")
    loop = _loopback_interface()
    env["GLOO_SOCKET_IFNAME"] = loop  # gloo binds the loopback interface, never one facing a network
    if device == "cuda":
        env["NCCL_SOCKET_IFNAME"] = loop  # NCCL's bootstrap too; the data moves over NVLink/PCIe/shared memory
    else:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


_WORKER = ("import sys\nfrom roofline.measure.collectives_run import worker_main\n"
           "sys.exit(worker_main(sys.argv[1], int(sys.argv[2])))")


def _start_workers(folder: Path, ranks: int, device: str, threads: int) -> list[subprocess.Popen[bytes]]:
    env = _worker_env(device, threads)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for r in range(ranks):
            with open(folder / f"rank{r}.err", "wb") as err:
                procs.append(subprocess.Popen([sys.executable, "-c", _WORKER, str(folder), str(r)],
                                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                              env=env, start_new_session=True))
    except OSError as exc:
        _kill(procs)
        raise RooflineError(f"cannot start the collective processes: {exc}") from None
    return procs


def _kill(procs: Sequence[subprocess.Popen[bytes]]) -> bool:
    """Kill every worker still running (by its own pid) and reap them all; True if any was killed."""
    killed = False
    for p in procs:
        if p.poll() is None:
            p.kill()
            killed = True
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
    return killed


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _worker_error(folder: Path, rank: int, code: int | None) -> str:
    record = _read_json(folder / f"rank{rank}.json") or {}
    if record.get("error"):
        return f"rank {rank}: {record['error']}"
    try:
        lines = [ln for ln in (folder / f"rank{rank}.err").read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    tail = lines[-1][:300] if lines else "no message"
    return f"rank {rank} exited with code {code}: {tail}"


def _gather(folder: Path, base: Mapping[str, Any], notes: Sequence[str], wall_s: float,
            complete: bool) -> Collectives:
    """The ranks' files combined: a size counts once every rank finished it; each repeat's time is the
    slowest rank's."""
    ranks = int(base["ranks"])
    records = [_read_json(folder / f"rank{r}.json") or {} for r in range(ranks)]
    per_rank: list[dict[tuple[str, int], list[float]]] = [
        {(p["collective"], int(p["size_bytes"])): [float(t) for t in p["times_s"]] for p in rec.get("points", [])}
        for rec in records]
    points = []
    for key, times in per_rank[0].items():
        rows = [times] + [other.get(key, []) for other in per_rank[1:]]
        if any(len(row) != len(times) or not row for row in rows):
            continue
        worst = tuple(max(samples) for samples in zip(*rows, strict=True))
        points.append(CollectivePoint(key[0], key[1], ranks, Timing(worst)))
    not_measured: dict[str, str] = {}
    for rec in records:
        for what, why in rec.get("not_measured", {}).items():
            not_measured.setdefault(what, why)
    done = {p.collective for p in points}
    planned = _read_json(folder / "spec.json") or {}
    for c in planned.get("collectives", []):
        if c not in done and c not in not_measured:
            not_measured[c] = "not reached within the budget" if not complete else "no size finished"
    return Collectives(points=tuple(points), not_measured=not_measured, wall_s=wall_s, complete=complete,
                       notes=tuple(notes), **base)


# --- the worker (one per rank, in its own process) --------------------------------------------------

def worker_main(folder_text: str, rank: int) -> int:
    """One rank: join the group on 127.0.0.1, run every collective over the ladder, write rank<r>.json
    after each size (so a kill keeps what finished)."""
    import threading
    from datetime import timedelta

    from roofline.fileio import atomic_write

    folder = Path(folder_text)
    spec = json.loads((folder / "spec.json").read_text())
    record: dict[str, Any] = {"rank": rank, "points": [], "not_measured": {}, "done": False}

    def save() -> None:
        atomic_write(folder / f"rank{rank}.json", json.dumps(record))

    def watchdog() -> None:  # should the parent die, never outlive the budget by more than a few seconds
        while time.time() < spec["hard_deadline"] + 5.0:
            time.sleep(0.5)
        os._exit(3)

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        import torch
        import torch.distributed as dist

        n = int(spec["ranks"])
        cuda = spec["device"] == "cuda"
        if cuda:
            torch.cuda.set_device(rank)
            dev = torch.device("cuda", rank)
        else:
            torch.set_num_threads(int(spec["threads"]))
            dev = torch.device("cpu")
        options: dict[str, Any] = {"device_id": dev} if cuda else {}
        dist.init_process_group(spec["backend"], init_method=f"tcp://127.0.0.1:{int(spec['port'])}", rank=rank,
                                world_size=n, timeout=timedelta(seconds=float(spec["timeout_s"])), **options)
        try:
            _run_ladder(spec, rank, n, dev, cuda, record, save, folder)
        finally:
            dist.destroy_process_group()
        record["done"] = True
        save()
        return 0
    except Exception as exc:
        record["error"] = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:300]}"
        save()
        return 1


def _ops(torch: Any, dist: Any, collective: str, size: int, n: int, rank: int, dev: Any) -> Callable[[], None]:
    """The call for one collective at size S (nccl-tests' S: see the module docstring), buffers allocated."""
    count = size // ITEM_BYTES
    zeros = lambda k: torch.zeros(k, dtype=torch.float32, device=dev)  # noqa: E731
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
    if collective == ALL_REDUCE:
        buf = zeros(count)
        return lambda: dist.all_reduce(buf)
    if collective == ALL_GATHER:
        inp, out = zeros(count // n), zeros(count)
        return lambda: gather(out, inp)
    if collective == REDUCE_SCATTER:
        inp, out = zeros(count), zeros(count // n)
        return lambda: scatter(out, inp)
    if collective == ALL_TO_ALL:
        inp, out = zeros(count), zeros(count)
        return lambda: dist.all_to_all_single(out, inp)
    send, recv = zeros(count), zeros(count)
    nxt, prv = (rank + 1) % n, (rank - 1) % n

    def ring() -> None:
        ops = [dist.P2POp(dist.isend, send, nxt), dist.P2POp(dist.irecv, recv, prv)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    return ring


def _run_ladder(spec: Mapping[str, Any], rank: int, n: int, dev: Any, cuda: bool, record: dict[str, Any],
                save: Callable[[], None], folder: Path) -> None:
    import torch
    import torch.distributed as dist

    from roofline.fileio import atomic_write

    sync: Callable[[], None] = torch.cuda.synchronize if cuda else (lambda: None)
    barrier_options: dict[str, Any] = {"device_ids": [rank]} if cuda else {}
    flag = torch.zeros(1, dtype=torch.float32, device=dev)

    def anyone(mine: bool) -> bool:
        """True on every rank if it is true on any: the ranks decide together."""
        flag.fill_(1.0 if mine else 0.0)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item() > 0)

    collectives = list(spec["collectives"])
    sizes = [int(s) for s in spec["sizes"]]
    soft = float(spec["soft_deadline"])
    for i, collective in enumerate(collectives):
        share_end = time.time() + (soft - time.time()) / (len(collectives) - i)
        last_wall, last_size = 0.0, 0
        for size in sizes:
            predicted = last_wall * max(1.0, size / last_size) if last_size else 0.0
            if anyone(time.time() + predicted > share_end):
                left = [format_bytes(s, binary=True) for s in sizes if s >= size]
                record["not_measured"][collective] = (f"sizes {', '.join(left)} left out: its share of the "
                                                      f"budget was spent")
                break
            if rank == 0:
                atomic_write(folder / "status.json", json.dumps(
                    {"step": f"{collective} {format_bytes(size, binary=True)} over {n} ranks"}))
            started = time.time()
            try:
                call = _ops(torch, dist, collective, size, n, rank, dev)
                failed = ""
            except Exception as exc:  # out of memory at this size: agreed below, then the ladder ends
                call, failed = (lambda: None), f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}"
            if anyone(bool(failed)):
                record["not_measured"][collective] = (f"stopped at {format_bytes(size, binary=True)}: "
                                                      f"{failed or 'another rank could not allocate it'}")
                break
            # warm-up: the first size of each collective pays for connections and first-call set-up
            for _ in range(max(0, int(spec["warmup"])) + (FIRST_SIZE_WARMUP if size == sizes[0] else 0)):
                call()
                sync()
            times = []
            for _ in range(int(spec["repeats"])):
                dist.barrier(**barrier_options)
                sync()
                t0 = time.perf_counter()
                call()
                sync()
                times.append(time.perf_counter() - t0)
            dist.barrier(**barrier_options)
            del call
            record["points"].append({"collective": collective, "size_bytes": size, "times_s": times})
            save()
            last_wall, last_size = time.time() - started, size
        if cuda:
            torch.cuda.empty_cache()
