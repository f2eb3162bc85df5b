"""Python, C and Rust on one path: Python sends over shared memory to a C engine (the relay
example, built with cc against the C binding), which sends each message on over shared
memory to the Rust echo engine (`offhost echo`), receives it back, checks it, hashes it and
returns it to Python. Python checks every byte that comes back, and the relay's hash of what
C received from Rust equals Python's hash of what Python sent."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

import offhost
from conftest import run_cli


def fnv1a(h: int, data: bytes) -> int:
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def test_python_to_c_to_the_rust_echo_and_back(echo_url: str, c_examples: Path, tmp_path: Path, spawn) -> None:
    relay_sock = tmp_path / "relay.sock"
    relay = spawn([c_examples / "relay", f"shm:{relay_sock}", echo_url])
    assert relay.stdout is not None
    assert relay.stdout.readline().decode().startswith("listening on shm:")
    s = offhost.Session(f"shm:{relay_sock}")
    ch = s.channel("data", max_message=1 << 20)
    rng = np.random.default_rng(7)
    h, total, loans = 0xCBF29CE484222325, 0, 0
    sizes = [1, 64, 4096, 4097, 65536, 300_000] * 2
    for i, n in enumerate(sizes):
        payload = rng.integers(0, 256, n, dtype=np.uint8)
        if i % 2:
            # Filled in place through numpy, sent by descriptor: C reads it in shared memory.
            loan = ch.loan(timeout=30)
            np.frombuffer(loan.buffer, dtype=np.uint8)[:n] = payload
            ch.send_loan(loan, n)
            loans += 1
        else:
            ch.send(payload)
        back = ch.recv(timeout=60)
        assert back == payload.tobytes(), f"message {i} ({n} bytes) came back changed"
        h = fnv1a(h, back)
        total += n
    ch.close()
    s.close()
    out, err = relay.communicate(timeout=60)
    assert relay.returncode == 0, err.decode()
    m = re.search(r"relayed (\d+) messages, (\d+) bytes \((\d+) loans in\), fnv1a ([0-9a-f]{16})", out.decode())
    assert m, out.decode()
    assert (int(m[1]), int(m[2]), int(m[3]), m[4]) == (len(sizes), total, loans, f"{h:016x}")


def test_the_c_pipeline_example_gives_the_clis_bytes(
    repo: Path, c_examples: Path, offhost_bin: Path, tmp_path: Path
) -> None:
    import json
    import subprocess

    run_cli(offhost_bin, "run", "-q", repo / "examples" / "audio.ion", "--out", "host=cli.out", cwd=tmp_path)
    r = subprocess.run(
        [str(c_examples / "pipeline"), str(repo / "examples" / "audio.ion"), "host", "c.out"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["finished"] is True
    assert (tmp_path / "c.out").read_bytes() == (tmp_path / "cli.out").read_bytes()
