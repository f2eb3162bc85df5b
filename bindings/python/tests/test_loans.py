"""Zero-copy loans on shm: writable memoryviews of the shared pool, received loans read in place."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import offhost


def address(view: memoryview) -> int:
    return np.frombuffer(view, dtype=np.uint8).__array_interface__["data"][0]


def test_a_loan_is_the_shared_buffer_itself(echo_url: str) -> None:
    s = offhost.Session(echo_url)
    ch = s.channel("loans", max_message=1 << 20)
    loan = ch.loan(timeout=10)
    assert loan.capacity == 1 << 20 and len(loan) == loan.capacity and not loan.sent
    view = loan.buffer
    assert isinstance(view, memoryview) and not view.readonly and view.nbytes == loan.capacity
    samples = np.frombuffer(view, dtype=np.float32)
    samples[:1000] = np.linspace(0.0, 1.0, 1000, dtype=np.float32)
    # numpy writes into the very memory the memoryview shows (no copy in between).
    assert np.frombuffer(loan.buffer, dtype=np.float32)[999] == 1.0
    assert address(loan.buffer) == address(view)
    sent_at = address(view)
    ch.send_loan(loan, 4000)
    assert loan.sent
    # The echo engine forwards a loan by its descriptor: the same shared buffer comes back,
    # read in place, read-only.
    msg = ch.recv_message(timeout=10)
    assert msg is not None and msg.is_loan and len(msg) == 4000
    back = msg.buffer
    assert back.readonly
    assert address(back) == sent_at
    assert np.array_equal(np.frombuffer(back, dtype=np.float32), np.linspace(0.0, 1.0, 1000, dtype=np.float32))
    with pytest.raises(TypeError):
        back[0] = 1  # type: ignore[index]
    assert bytes(msg) == back.tobytes()
    msg.release()
    with pytest.raises(offhost.ClosedError, match="released"):
        msg.buffer
    with pytest.raises(offhost.ClosedError, match="released"):
        bytes(msg)


def test_loans_return_to_the_pool(echo_url: str) -> None:
    # 8 buffers in the pool: 40 round trips only work if every one comes back.
    s = offhost.Session(echo_url)
    ch = s.channel("loans", max_message=1 << 20)
    for i in range(40):
        loan = ch.loan(timeout=10)
        loan.buffer[:4] = i.to_bytes(4, "little")
        ch.send_loan(loan, 4)
        with ch.recv_message(timeout=10) as m:
            assert int.from_bytes(m.buffer, "little") == i
    # Views kept past a send keep the mapping alive: reading them never crashes.
    keep = []
    for _ in range(3):
        loan = ch.loan(timeout=10)
        keep.append(np.frombuffer(loan.buffer, dtype=np.uint8))
        ch.send_loan(loan, 1)
        keep.append(ch.recv_message(timeout=10))
    s.close()
    del s, ch, loan
    gc.collect()
    assert all(k is not None for k in keep)
    assert int(keep[0][:1].sum()) >= 0


def test_a_sent_loan_cannot_be_used_again(echo_url: str) -> None:
    s = offhost.Session(echo_url)
    ch = s.channel("loans", max_message=1 << 20)
    loan = ch.loan(timeout=10)
    ch.send_loan(loan, 1)
    with pytest.raises(offhost.ClosedError, match="sent already"):
        ch.send_loan(loan, 1)
    with pytest.raises(offhost.ClosedError, match="sent already"):
        loan.buffer
    assert ch.recv_message(timeout=10) is not None


def test_a_loan_longer_than_its_buffer_is_refused(echo_url: str) -> None:
    s = offhost.Session(echo_url)
    ch = s.channel("loans", max_message=1 << 20)
    loan = ch.loan(timeout=10)
    with pytest.raises(offhost.TooLargeError, match="exceeds"):
        ch.send_loan(loan, loan.capacity + 1)
    small = s.channel("small", max_message=16)
    loan = small.loan(timeout=10)
    with pytest.raises(offhost.TooLargeError, match="maximum of 16"):
        small.send_loan(loan, 17)


def test_the_pool_can_be_sized_and_runs_dry(tmp_path, offhost_bin, spawn) -> None:
    from conftest import wait_for_socket

    sock = tmp_path / "pool.sock"
    proc = spawn([offhost_bin, "echo", "--listen", f"shm:{sock}"])
    wait_for_socket(sock, proc, "offhost echo")
    s = offhost.Session(f"shm:{sock}", pool_buffers=2, buffer_size=4096, mode="block")
    ch = s.channel("c", max_message=4096)
    held = [ch.loan(timeout=10), ch.loan(timeout=10)]
    assert all(h.capacity == 4096 for h in held)
    with pytest.raises(offhost.TimeoutError):
        ch.loan(timeout=0.1)
    del held
    gc.collect()
    assert ch.loan(timeout=10).capacity == 4096


def test_byte_messages_arrive_as_bytes(echo_url: str) -> None:
    s = offhost.Session(echo_url)
    ch = s.channel("c")
    ch.send(b"copied")
    m = ch.recv_message(timeout=10)
    assert m is not None and not m.is_loan
    assert m.buffer.readonly and bytes(m) == b"copied" and len(m) == 6
    ch.close()
    assert ch.recv_message(timeout=10) is None


def test_loans_need_shared_memory(unix_echo_url: str) -> None:
    ch = offhost.Session(unix_echo_url).channel("c")
    with pytest.raises(offhost.NoLoansError, match="loans need the shm transport"):
        ch.loan(timeout=1)
