"""Every entry point given hostile values (zero, negative, NaN, infinities, 2^63, huge
lengths, wrong types): each raises an ordinary exception, never crashes the interpreter and
never lets a Rust panic through as ``pyo3_runtime.PanicException`` (a ``BaseException``
that ``except Exception`` misses). Issue 46, items 4 and 5."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest

import offhost

#: What a hostile number may raise: offhost's own errors, or Python's for a value that
#: does not convert (a negative or too large int for an unsigned one, a str for a number).
REFUSED = (offhost.Error, OverflowError, TypeError, ValueError)

NUMBERS = [0, -1, math.nan, math.inf, -math.inf, 2**63, 2**64, 10**30, "x", None, b"\xff"]
TIMEOUTS = [-1, -1e-9, math.nan, -math.inf, "x", b"1"]

SOURCE = "random bytes=1k >a\nnull <a\n"


def refused(call) -> BaseException:
    """Calls `call`, which must raise one of REFUSED (and so an Exception)."""
    with pytest.raises(REFUSED) as e:
        call()
    assert isinstance(e.value, Exception)
    return e.value


def test_more_workers_than_the_budget_is_an_error_not_a_panic() -> None:
    e = refused(lambda: offhost.run(SOURCE, workers=100))
    assert isinstance(e, offhost.InvalidArgumentError), e
    assert "between 1 and 64" in str(e)
    try:
        offhost.run(SOURCE, workers=100)
    except Exception:  # noqa: BLE001 - the point: an ordinary except catches it
        pass
    assert offhost.run(SOURCE, workers=2)["finished"] is True


@pytest.mark.parametrize("workers", [0, -1, 65, 2**63, 2**64, math.nan, "4"])
def test_hostile_worker_counts_are_refused(workers: object) -> None:
    refused(lambda: offhost.Engine(workers=workers))


@pytest.mark.parametrize("timeout", TIMEOUTS)
def test_hostile_timeouts_are_refused(timeout: object) -> None:
    p = offhost.Engine(workers=1).submit("host-in name=i >a\nhost-out name=o <a\n")
    refused(lambda: p.wait(timeout=timeout))
    refused(lambda: p.recv("o", timeout=timeout))
    p.stop()
    p.close_input("i")
    p.wait(timeout=30)


def test_a_timeout_past_what_a_clock_holds_waits_like_none() -> None:
    p = offhost.Engine(workers=1).submit(SOURCE)
    assert p.wait(timeout=1e300)["finished"] is True
    p = offhost.Engine(workers=1).submit(SOURCE)
    assert p.wait(timeout=9e18)["finished"] is True
    p = offhost.Engine(workers=1).submit(SOURCE)
    assert p.wait(timeout=2**63)["finished"] is True


@pytest.mark.parametrize(
    "text",
    [
        "random bytes=1k >a\nmix channels=4294967295 <a >b\nnull <b\n",
        "pet-sim pace=1e-300 events=10 >a\nnull <a\n",
        "pet-sim pace=NaN events=10 >a\nnull <a\n",
        "pet-sim pace=inf events=10 >a\nnull <a\n",
        "pet-sim pace=-1 events=10 >a\nnull <a\n",
        "pet-sim singles=NaN events=10 >a\nnull <a\n",
        "pet-sim events=10 >a\nsinogram lower=NaN <a\n",
        "tone seconds=1e300 >a\nnull <a\n",
        "random bytes=18446744073709551616 >a\nnull <a\n",
        "fill value=-1 >a\nnull <a\n",
        "x" * 100_000,
        "",
        "\x00",
    ],
)
def test_hostile_pipeline_arguments_are_pipeline_errors(text: str) -> None:
    e = refused(lambda: offhost.Engine(workers=1).submit(text))
    assert isinstance(e, offhost.PipelineError), e


def test_hostile_send_and_recv_arguments() -> None:
    p = offhost.Engine(workers=1).submit("host-in name=i >a\nhost-out name=o <a\n")
    for data in [None, 7, math.nan, "text"]:
        refused(lambda: p.send("i", data))
    for name in ["", "nope", "x" * 10_000]:
        refused(lambda: p.send(name, b"x"))
        refused(lambda: p.recv(name, timeout=0))
    refused(lambda: p.attach("sideways", "i"))
    p.send("i", b"")
    p.close_input("i")
    p.close_input("i")
    p.wait(timeout=30)


@pytest.mark.parametrize("value", NUMBERS)
def test_hostile_pet_numbers_are_refused(value: object) -> None:
    from offhost import _offhost as native

    scanner = native.Scanner("demo")
    for call in [
        lambda: native.Scanner(value),
        lambda: scanner.with_span(value),
        lambda: native.EventHistogrammer(scanner, value, 650.0),
        lambda: native.EventHistogrammer(scanner, 0.0, value),
        lambda: native.PetlinkHistogrammer(scanner, value),
        lambda: native.simulate(value, scanner),
        lambda: native.simulate(10, scanner, rate=value),
        lambda: native.simulate(10, scanner, scatter=value),
        lambda: native.reconstruct(b"\0" * 4, scanner, "mlem", value),
        lambda: native.decode_sinogram(value),
    ]:
        try:
            call()
        except REFUSED:
            pass
        # A few are sound results (a span of 0 is none, 0 events an empty array): what
        # matters is that nothing else escapes.


def test_huge_lengths_are_errors_before_any_allocation() -> None:
    from offhost import _offhost as native

    scanner = native.Scanner("demo")
    e = refused(lambda: native.simulate(2**40, scanner))
    assert "events=" in str(e)
    e = refused(lambda: native.reconstruct(b"\0" * 4, scanner, "mlem", 2**40))
    assert "iterations=" in str(e)
    e = refused(lambda: native.EventHistogrammer(scanner, math.nan, 650.0))
    assert "lower_kev=NaN" in str(e)


def test_hostile_channel_options_and_urls(echo_url: str) -> None:
    for url in ["", "x" * 10_000, "shm:", "tcp:", "tcp:host:99999999", "unix:\0"]:
        refused(lambda: offhost.Session(url))
    with offhost.Session(echo_url) as s:
        for kw in [
            {"max_message": 0},
            {"max_message": -1},
            {"max_message": 2**64},
            {"recv_buffer": 2**63},
            {"packet_size": 0},
            {"packet_size": 3},
            {"packet_size": 2**63},
            {"max_message": math.nan},
        ]:
            refused(lambda: s.channel("c", **kw))
        ch = s.channel("ok")
        for t in TIMEOUTS:
            refused(lambda: ch.send(b"x", timeout=t))
            refused(lambda: ch.recv(timeout=t))
        refused(lambda: ch.send(b"x" * (2 * 1024 * 1024)))


def test_pipeline_text_from_a_path_that_is_not_a_file(tmp_path: Path) -> None:
    for path in [tmp_path, tmp_path / "missing.ion"]:
        with pytest.raises(OSError):
            offhost.Engine(workers=1).submit(path)


def survives(call) -> None:
    """Calls `call`, which may succeed (some hostile values are sound) or raise one of
    REFUSED or an OSError, and nothing else."""
    try:
        call()
    except (*REFUSED, OSError) as e:
        assert isinstance(e, Exception)


def test_hostile_session_and_channel_calls(echo_url: str) -> None:
    for kw in [
        {"pool_buffers": 2**32 - 1},
        {"pool_buffers": -1},
        {"buffer_size": 0},
        {"buffer_size": 2**32},
        {"ring_bytes": 2**63},
        {"ring_bytes": 2**64},
        {"mode": ""},
        {"mode": "x" * 10_000},
        {"tls_certificates": 7},
    ]:
        refused(lambda: offhost.Session(echo_url, **kw))
    refused(lambda: offhost.Session("unix:/nonexistent/x", mode="poll"))
    with offhost.Session(echo_url) as s:
        for name in ["", "x" * 10_000, "é" * 200, 7, None]:
            refused(lambda: s.channel(name))
        for t in TIMEOUTS:
            refused(lambda: s.accept(timeout=t))
        refused(lambda: s.accept(timeout=0))  # offhost.TimeoutError
        ch = s.channel("c")
        for data in [None, 7, math.nan, "text", memoryview(b"abcd")[::2]]:
            refused(lambda: ch.try_send(data))
        for buf in [b"read-only", memoryview(b"ro"), memoryview(bytearray(8))[::2], None, "s", 7]:
            refused(lambda: ch.recv_into(buf, timeout=0))
        for t in TIMEOUTS:
            refused(lambda: ch.loan(timeout=t))
            refused(lambda: ch.recv_message(timeout=t))
            refused(lambda: ch.recv_into(bytearray(8), timeout=t))
            refused(lambda: offhost.select([ch], timeout=t))
        for chans in [[], [1], None, "c"]:
            refused(lambda: offhost.select(chans, timeout=0))
        # A length the loan cannot hold is refused and leaves the loan as it was.
        loan = ch.loan(timeout=30)
        for length in [-1, loan.capacity + 1, 2**63, 2**64 - 1, 2**64, math.nan, "1"]:
            refused(lambda: ch.send_loan(loan, length))
            assert not loan.sent
        refused(lambda: ch.send_loan(b"not a loan"))
        ch.send_loan(loan, 3)
        assert loan.sent
        refused(lambda: ch.send_loan(loan))
        refused(lambda: loan.buffer)
        m = ch.recv_message(timeout=30)
        assert m is not None and len(m) == 3
        m.release()
        m.release()
        refused(lambda: m.buffer)
        refused(lambda: bytes(m))
        ch.close()
        ch.close()
        refused(lambda: ch.send(b"x", timeout=1))
        refused(lambda: ch.try_send(b"x"))
    refused(lambda: s.channel("late"))
    refused(lambda: s.accept(timeout=0))


def test_hostile_engine_and_pipeline_calls(tmp_path: Path) -> None:
    for url in ["", "x", "shm:", "unix:\0", "tcp:host:99999999", "x" * 10_000]:
        refused(lambda: offhost.Engine(url))
    refused(lambda: offhost.Engine(tls_certificates=tmp_path))
    refused(lambda: offhost.Engine("unix:/nonexistent/x", workers=2))
    for pipeline in [None, 7, b"random bytes=1k >a\nnull <a\n"]:
        refused(lambda: offhost.Engine(workers=1).submit(pipeline))
    with pytest.raises(OSError):
        offhost.Engine(workers=1).submit(tmp_path / "\0")
    p = offhost.Engine(workers=1).submit("host-in name=i >a\nhost-out name=o <a\n")
    for name in ["", "nope", "\0", "x" * 10_000, None, 7]:
        refused(lambda: p.output(name))
        refused(lambda: p.close_input(name))
        refused(lambda: p.attach("in", name))
    for direction in ["", "IN", None, 7]:
        refused(lambda: p.attach(direction, "i"))
    p.close_input("i")
    assert list(p.output("o")) == []
    assert p.wait(timeout=30)["finished"] is True
    refused(lambda: p.send("i", b"late"))
    p.stop()
    assert p.status()["state"] == "finished"


@pytest.mark.parametrize("value", NUMBERS)
def test_hostile_queue_numbers(value: object) -> None:
    q = offhost.Queue.in_host("a", {}, insecure=True)
    for call in [
        lambda: q.push_open("c", rate=value),
        lambda: q.push_open("c", rate=1, burst=value),
        lambda: q.push_open("c", tag=value),
        lambda: q.push_send(value, b"x"),
        lambda: q.push_send(1, b"x", tag=value),
        lambda: q.push_recv(value),
        lambda: q.push_recv(1, max=value),
        lambda: q.push_close(value),
        lambda: q.loan(value, timeout=0),
        lambda: q.wait(value, timeout=0),
        lambda: q.send(value, b"x", timeout=0),
        lambda: q.recv(value, timeout=0),
        lambda: q.close(value, timeout=0),
    ]:
        survives(call)
    for t in TIMEOUTS:
        refused(lambda: q.wait(1, timeout=t))
        refused(lambda: q.open("c", timeout=t))
        refused(lambda: q.loan(16, timeout=t))
    assert repr(q).startswith("Queue(")


def test_hostile_queue_addresses_and_loans(tmp_path: Path) -> None:
    for engine in ["", "x", "shm:", f"shm:{tmp_path / 'missing'}", "unix:\0", "x" * 10_000]:
        refused(lambda: offhost.Queue(engine))
    for name, peers in [("", {}), ("x" * 10_000, {}), ("a", {"": ""}), ("a", {"b": 7})]:
        refused(lambda: offhost.Queue.in_host(name, peers, insecure=True))
    q = offhost.Queue.in_host("a", {}, insecure=True)
    for address in ["", "/", "a/", "/b", "x" * 10_000, 7, None]:
        refused(lambda: q.push_open(address))
        refused(lambda: q.open(address, timeout=1))
    refused(lambda: q.loan(2**40, timeout=0))
    for data in [None, 7, "text", memoryview(b"abcd")[::2]]:
        refused(lambda: q.push_send(1, data))
    # A push refused by the queue takes the loan all the same (as in Rust: it returns to
    # the pool), so each try gets a loan of its own.
    refused(lambda: q.push_send_loan(99, q.loan(16, timeout=30)))
    refused(lambda: q.push_send_loan(1, b"not a loan"))
    loan = q.loan(16, timeout=30)
    q.push_send_loan(q.push_open("c"), loan)
    assert loan.pushed
    refused(lambda: q.push_send_loan(1, loan))
    refused(lambda: loan.buffer)
    q.submit()
    q.wait(q.outstanding, timeout=30)
    assert all(isinstance(c, offhost.Completion) for c in q.completions())
    # repr takes the queue's lock once (taking it twice in one statement hung for ever).
    assert "outstanding=0" in repr(q)


def test_hostile_pet_files_and_buffers(tmp_path: Path) -> None:
    from offhost import _offhost as native

    missing = tmp_path / "missing"
    for path in [missing, tmp_path, "", "\0", "x" * 5_000, 7, None]:
        for call in [
            lambda: native.read_listmode(path),
            lambda: native.read_petlink(path),
            lambda: native.read_petlink(missing, path),
            lambda: native.read_sinogram(path),
        ]:
            with pytest.raises((*REFUSED, OSError)):
                call()
    # A file that never ends (a device, a FIFO) is refused, not read until memory runs out.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in [Path("/dev/zero"), fifo]:
        for call in [
            lambda: native.read_listmode(path),
            lambda: native.read_petlink(path, path),
            lambda: native.read_sinogram(path),
        ]:
            e = refused(call)
            assert isinstance(e, offhost.InvalidArgumentError) and "not a regular file" in str(e), e
    scanner = native.Scanner("demo")
    eh = native.EventHistogrammer(scanner, 350.0, 650.0)
    ph = native.PetlinkHistogrammer(scanner, scanner.span)
    for data in [b"\0" * 15, b"\0" * 17, "text", None, 7]:
        refused(lambda: eh.add(data))
    for data in [b"\0" * 15, b"\0" * 17, "text", None, 7, memoryview(b"\0" * 32)[::2]]:
        refused(lambda: ph.add(data))
        refused(lambda: native.decode_sinogram(data))
        refused(lambda: native.reconstruct(data, scanner))
    for method in ["", "FBP", "mlem\0", "x" * 10_000, None]:
        refused(lambda: native.reconstruct(b"", scanner, method))
    for phantom in ["", "NEMA", "x" * 10_000, None]:
        refused(lambda: native.simulate(1, scanner, phantom))
    for seed in [-1, 2**64, math.nan, "1"]:
        refused(lambda: native.simulate(1, scanner, seed=seed))
    refused(lambda: native.reconstruct(b"", 7))
    assert (scanner == 7) is False


def test_hostile_sink_urls(tmp_path: Path) -> None:
    from offhost import _offhost as native

    for url in ["", "x", "shm:", "unix:\0", f"unix:{tmp_path / 'no' / 'dir'}", "x" * 10_000, None]:
        refused(lambda: native.Sink(url))
