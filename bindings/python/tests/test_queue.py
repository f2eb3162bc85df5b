"""offhost.Queue: a host's submission and completion queues at a real `offhost engine` process
(local mailboxes, and a second engine reached through the first), blocking and batched."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

import offhost
from conftest import wait_for_socket


@pytest.fixture
def engine_shm(tmp_path: Path, offhost_bin: Path, spawn) -> str:
    """`offhost engine` listening on shm (hosts' queues), no peers."""
    sock = tmp_path / "engine.sock"
    proc = spawn([offhost_bin, "engine", "--name", "alpha", "--listen", f"shm:{sock}"])
    wait_for_socket(sock, proc, "offhost engine")
    return f"shm:{sock}"


def test_batched_sends_and_receives_complete_with_their_tags(engine_shm: str) -> None:
    q = offhost.Queue(engine_shm)
    assert q.mode == "off-host"
    assert q.limits["max_message"] >= 1 << 16
    box = q.open("box")
    msgs = [bytes([i]) * (1000 + i) for i in range(20)]
    for i, m in enumerate(msgs):
        q.push_send(box, m, tag=i)
        q.push_recv(box, tag=100 + i)
    q.submit()
    got: dict[int, offhost.Completion] = {}
    while len(got) < 40:
        assert q.wait(1, timeout=10) > 0, f"only {len(got)} of 40 completions"
        for c in q.completions():
            got[c.tag] = c
    for i, m in enumerate(msgs):
        s, r = got[i], got[100 + i]
        assert (s.op, s.ok, s.value, s.channel) == ("send", True, len(m), box)
        assert (r.op, r.ok, r.end, r.value) == ("recv", True, False, len(m))
        assert r.data == m, f"message {i}"
    assert q.outstanding == 0


def test_blocking_calls_and_the_end_of_a_channel(engine_shm: str) -> None:
    q = offhost.Queue(engine_shm)
    ch = q.open("pair")
    assert q.send(ch, memoryview(b"hello")) == 5
    assert q.recv(ch, timeout=10) == b"hello"
    with pytest.raises(offhost.TimeoutError):
        q.recv(ch, timeout=0.2)
    # The receive that timed out stays posted: the next message completes it.
    assert q.send(ch, b"later") == 5
    assert q.wait(1, timeout=10) == 1
    c = q.pop()
    assert c is not None and (c.op, c.data) == ("recv", b"later")
    q.push_recv(ch, tag=7)
    q.submit()
    assert q.wait(1, timeout=0.2) == 0, "nothing was sent, and the wait ends at its timeout"
    q.close(ch)
    q.wait(1, timeout=10)
    ends = [c for c in q.completions() if c.tag == 7]
    assert len(ends) == 1 and ends[0].end and ends[0].data is None


def test_errors_name_what_is_wrong(engine_shm: str) -> None:
    q = offhost.Queue(engine_shm)
    ch = q.open("big")
    too_big = q.limits["max_message"] + 1
    with pytest.raises(offhost.TooLargeError, match="exceeds the limit"):
        q.push_send(ch, bytes(too_big))
    with pytest.raises(offhost.ClosedError, match="not open"):
        q.push_send(12345, b"x")
    with pytest.raises(ValueError, match="reserved"):
        q.push_recv(ch, tag=1 << 63)
    with pytest.raises(offhost.EngineError, match="nowhere"):
        q.open("nowhere/box", timeout=10)
    with pytest.raises(ValueError, match="rate"):
        q.push_open("x", rate=0)


def test_a_missing_engine_is_an_error() -> None:
    with pytest.raises(offhost.Error):
        offhost.Queue("shm:/nonexistent/engine.sock")
    with pytest.raises(offhost.BadUrlError):
        offhost.Queue("tcp:127.0.0.1:1")


def test_messages_reach_a_second_engine_through_the_first(
    tmp_path: Path, offhost_bin: Path, spawn
) -> None:
    beta_sock = tmp_path / "beta.sock"
    beta = spawn(
        [
            offhost_bin, "engine", "--name", "beta", "--listen", f"shm:{beta_sock}",
            "--listen", "tcp:127.0.0.1:0", "--insecure",
        ]
    )
    assert beta.stderr is not None
    urls = []
    while len(urls) < 2:
        line = beta.stderr.readline().decode()
        assert line, "engine beta exited before listening"
        if line.startswith("engine: listening on "):
            urls.append(line.removeprefix("engine: listening on ").strip())
    # Keep draining its log so that it never blocks on a full pipe.
    threading.Thread(target=beta.stderr.read, daemon=True).start()
    tcp = next(u for u in urls if u.startswith("tcp:"))
    alpha_sock = tmp_path / "alpha.sock"
    alpha = spawn(
        [
            offhost_bin, "engine", "--name", "alpha", "--listen", f"shm:{alpha_sock}",
            "--insecure", "--peer", f"beta={tcp}",
        ]
    )
    wait_for_socket(alpha_sock, alpha, "engine alpha")
    rx = offhost.Queue(f"shm:{beta_sock}")
    inbox = rx.open("inbox")
    tx = offhost.Queue(f"shm:{alpha_sock}")
    out = tx.open("beta/inbox")
    payload = bytes(range(256)) * 1024
    assert tx.send(out, payload) == len(payload)
    assert rx.recv(inbox, timeout=10) == payload
    # The same calls in-host: this process runs the link to beta itself.
    local = offhost.Queue.in_host("gamma", {"beta": tcp}, insecure=True)
    assert local.mode == "in-host"
    out = local.open("beta/inbox")
    for i in range(10):
        local.push_send(out, bytes([i]) * 5000, tag=i)
    local.submit()
    done = []
    while len(done) < 10:
        assert local.wait(1, timeout=10) > 0
        done += local.completions()
    assert sorted(c.tag for c in done) == list(range(10)) and all(c.ok for c in done)
    for i in range(10):
        assert rx.recv(inbox, timeout=10) == bytes([i]) * 5000


def test_a_loan_is_sent_from_the_shared_memory_it_was_written_in(engine_shm: str) -> None:
    import numpy as np

    q = offhost.Queue(engine_shm)
    ch = q.open("loans")
    loan = q.loan(4096 * 4)
    assert len(loan) == 4096 * 4 and not loan.pushed
    values = np.frombuffer(loan.buffer, dtype=np.float32)
    values[:] = np.arange(4096, dtype=np.float32)
    q.push_send_loan(ch, loan, tag=3)
    assert loan.pushed
    with pytest.raises(offhost.ClosedError):
        loan.buffer
    with pytest.raises(offhost.InvalidArgumentError, match="pushed already"):
        q.push_send_loan(ch, loan)
    q.submit()
    got = q.recv(ch, timeout=10)
    assert got is not None
    assert np.array_equal(np.frombuffer(got, dtype=np.float32), np.arange(4096, dtype=np.float32))
    with pytest.raises(offhost.TooLargeError):
        q.loan(q.limits["max_message"] + 1)
