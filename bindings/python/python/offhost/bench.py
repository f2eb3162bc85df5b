"""Python against Rust, measured in one run: ``python -m offhost.bench [--json]``.

Three measurements, each beside the Rust command that measures the same thing, the two
taking turns (``--rounds``) so that both see the same machine:

- a 64 B channel round trip over shared memory to the Rust echo engine in another process
  (``offhost echo``), against ``offhost bench pingpong --transport shm-chan --sizes 64``:
  the goal is at most 1.5 us more per round trip from Python;
- 1 MiB messages through zero-copy loans to a sink engine on a thread (the sink of
  ``offhost bench rate``), against ``offhost bench rate --path loan --sizes 1M``: the goal
  is at least 0.8 times the Rust rate;
- histogramming 10 M simulated events handed over as a numpy array (span-1 demo sinogram,
  best of --reps passes), against ``offhost bench pet``'s ``events_per_s``: the goal is at
  least 0.9 times.

The Rust side runs the ``offhost`` binary (``--offhost PATH``, ``$OFFHOST_BIN`` or the one on
``PATH``). Figures mean something only from release builds of both (``maturin build
--release``, ``cargo build --release``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import Session
from ._offhost import Sink


def _offhost(path: str | None) -> str:
    exe = path or os.environ.get("OFFHOST_BIN") or shutil.which("offhost")
    if not exe or not Path(exe).exists():
        sys.exit("offhost bench: no offhost binary: pass --offhost PATH or set OFFHOST_BIN")
    return exe


def _rust_json(exe: str, *args: str) -> Any:
    r = subprocess.run([exe, "bench", *args, "--json"], capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        sys.exit(f"offhost bench {' '.join(args)} failed: {r.stderr}")
    return json.loads(r.stdout)


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def python_round_trip(exe: str, size: int, iters: int) -> float:
    """Median round trip (ns) of `size`-byte messages through an `offhost echo` process,
    each round trip timed on its own (as the Rust bench times them), after a tenth as many
    untimed ones. A median of single round trips is not moved by the preemptions of a busy
    machine, which a mean over blocks would spread over every round trip."""
    addr = f"@offhost-pybench-echo-{os.getpid()}-{time.monotonic_ns()}"
    # As the Rust bench: this thread on the first CPU allowed, the echo engine on the second.
    allowed = sorted(os.sched_getaffinity(0))
    pin = ["--pin", str(allowed[1])] if len(allowed) >= 2 else []
    echo = subprocess.Popen(
        [exe, "echo", "--listen", f"shm:{addr}", "--once", *pin],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    if pin:
        os.sched_setaffinity(0, {allowed[0]})
    try:
        for _ in range(400):
            try:
                s = Session(f"shm:{addr}", mode="adaptive")
                break
            except Exception:  # noqa: BLE001 - not listening yet
                if echo.poll() is not None:
                    sys.exit("offhost echo exited")
                time.sleep(0.01)
        else:
            sys.exit("offhost echo did not listen")
        packet = max(8, min(size, 65536))
        packet = 1 << (packet - 1).bit_length()
        ch = s.channel("pingpong", max_message=size, recv_buffer=max(2 * size, 1 << 20), packet_size=packet)
        msg = bytes(size)
        send, recv = ch.send, ch.recv
        for _ in range(max(iters // 10, 100)):
            send(msg)
            recv()
        samples = [0] * iters
        clock = time.perf_counter_ns
        for i in range(iters):
            t = clock()
            send(msg)
            recv()
            samples[i] = clock() - t
        s.close()
        return statistics.median(samples)
    finally:
        os.sched_setaffinity(0, allowed)
        try:
            echo.wait(timeout=10)  # --once: it exits when the session closes
        except subprocess.TimeoutExpired:
            echo.kill()
            echo.wait()


def python_loan_rate(size: int, count: int, runs: int) -> float:
    """Median messages per second of `count` loans of `size` bytes to a sink thread."""
    sink = Sink(f"shm:@offhost-pybench-sink-{os.getpid()}-{time.monotonic_ns()}")
    s = Session(sink.url, mode="adaptive")
    rates = []
    for _ in range(runs):
        packet = 1 << (max(8, min(size, 65536)) - 1).bit_length()
        ch = s.channel("rate-loan", max_message=size, recv_buffer=max(4 * size, 4 << 20), packet_size=packet)
        ch.recv()  # the sink is ready
        loan, send_loan = ch.loan, ch.send_loan
        t = time.perf_counter_ns()
        for _ in range(count):
            send_loan(loan(), size)
        ch.close()
        got = int.from_bytes(ch.recv(), "little")
        elapsed = time.perf_counter_ns() - t
        if got != count:
            sys.exit(f"the sink took {got} messages of {count}")
        rates.append(count / elapsed * 1e9)
        del ch, loan, send_loan
    # The sink ends when the link drops (every handle of it gone), not at a goodbye alone.
    s.close()
    del s
    sink.join()
    return statistics.median(rates)


def python_histogram(events: int, reps: int) -> float:
    """Best events per second of histogramming `events` simulated events from a numpy array."""
    from . import pet

    _log(f"simulating {events} events for Python's histogramming...")
    ev = pet.simulate(events, "demo")
    h = pet.Histogrammer("demo")
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter_ns()
        h.add(ev)
        best = min(best, time.perf_counter_ns() - t)
    return events / best * 1e9


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m offhost.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print JSON")
    ap.add_argument("--offhost", help="the offhost binary (default: $OFFHOST_BIN or offhost on PATH)")
    ap.add_argument("--rounds", type=int, default=3, help="turns of Rust and Python per measurement")
    ap.add_argument("--iters", type=int, default=20000, help="round trips per turn")
    ap.add_argument("--loans", type=int, default=20000, help="1 MiB loans per run")
    ap.add_argument("--runs", type=int, default=5, help="loan runs per turn")
    ap.add_argument("--events", type=int, default=10_000_000, help="events to histogram")
    ap.add_argument("--reps", type=int, default=5, help="histogramming passes (the best counts)")
    ap.add_argument("--only", choices=["pingpong", "loans", "pet"], action="append", help="run only these")
    a = ap.parse_args(argv)
    exe = _offhost(a.offhost)
    only = set(a.only or ["pingpong", "loans", "pet"])
    out: dict[str, Any] = {"offhost": exe, "python": sys.version.split()[0], "cores": os.cpu_count()}

    if "pingpong" in only:
        rust, py = [], []
        for r in range(a.rounds):
            _log(f"pingpong 64 B, round {r + 1}/{a.rounds}: Rust...")
            rows = _rust_json(exe, "pingpong", "--transport", "shm-chan", "--mode", "adaptive",
                              "--sizes", "64", "--iters", str(a.iters), "--idle-secs", "0")
            rust.append(2 * rows[0]["one_way_ns_median"])
            _log(f"pingpong 64 B, round {r + 1}/{a.rounds}: Python...")
            py.append(python_round_trip(exe, 64, a.iters))
        rr, pr = statistics.median(rust), statistics.median(py)
        out["pingpong"] = {
            "size": 64, "rust_round_trip_ns": rust, "python_round_trip_ns": py,
            "rust_median_ns": rr, "python_median_ns": pr, "python_extra_ns": pr - rr,
            "goal_extra_ns": 1500, "met": pr - rr <= 1500,
        }

    if "loans" in only:
        rust, py = [], []
        for r in range(a.rounds):
            _log(f"loans 1 MiB, round {r + 1}/{a.rounds}: Rust...")
            rows = _rust_json(exe, "rate", "--transport", "shm", "--mode", "adaptive", "--sizes", "1M",
                              "--path", "loan", "--count", str(a.loans), "--runs", str(a.runs))
            rust.append(rows[0]["msgs_per_s"])
            _log(f"loans 1 MiB, round {r + 1}/{a.rounds}: Python...")
            py.append(python_loan_rate(1 << 20, a.loans, a.runs))
        rr, pr = statistics.median(rust), statistics.median(py)
        # On the shared 2-core VM a whole turn may run in a slow state (about 10 us a loan
        # instead of 0.5), Rust's and Python's alike: the best turns of each side give their
        # ratio when both ran in the fast state; the medians are given too.
        best = max(py) / max(rust)
        out["loans"] = {
            "size": 1 << 20, "rust_msgs_per_s": rust, "python_msgs_per_s": py,
            "rust_median": rr, "python_median": pr, "ratio": pr / rr,
            "rust_best": max(rust), "python_best": max(py), "best_ratio": best,
            "goal_ratio": 0.8, "met": best >= 0.8,
        }

    if "pet" in only:
        _log(f"histogramming {a.events} events: Rust (offhost bench pet)...")
        v = _rust_json(exe, "pet", "--events", str(a.events), "--reps", str(a.reps), "--pipeline-events", "200000")
        rust = v["events_per_s"]
        _log(f"histogramming {a.events} events: Python...")
        py = python_histogram(a.events, a.reps)
        out["pet"] = {
            "events": a.events, "rust_events_per_s": rust, "python_events_per_s": py,
            "ratio": py / rust, "goal_ratio": 0.9, "met": py / rust >= 0.9,
        }

    if a.json:
        print(json.dumps(out, indent=2))
        return
    if "pingpong" in out:
        p = out["pingpong"]
        print(f"64 B round trip over shm: Rust {p['rust_median_ns']:.0f} ns, Python {p['python_median_ns']:.0f} ns: "
              f"+{p['python_extra_ns']:.0f} ns (goal <= 1500: {'met' if p['met'] else 'NOT met'})")
    if "loans" in out:
        p = out["loans"]
        print(f"1 MiB loans, best turn: Rust {p['rust_best']:,.0f} msgs/s, Python {p['python_best']:,.0f} msgs/s: "
              f"{p['best_ratio']:.2f}x (medians {p['ratio']:.2f}x; goal >= 0.8: {'met' if p['met'] else 'NOT met'})")
    if "pet" in out:
        p = out["pet"]
        print(f"histogramming {p['events']:,} events: Rust {p['rust_events_per_s'] / 1e6:.1f} M/s, "
              f"Python {p['python_events_per_s'] / 1e6:.1f} M/s: {p['ratio']:.2f}x "
              f"(goal >= 0.9: {'met' if p['met'] else 'NOT met'})")


if __name__ == "__main__":
    main()
