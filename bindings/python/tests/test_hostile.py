"""Every entry point given hostile values (zero, negative, NaN, infinities, 2^63, huge
lengths, wrong types): each raises an ordinary exception, never crashes the interpreter and
never lets a Rust panic through as ``pyo3_runtime.PanicException`` (a ``BaseException``
that ``except Exception`` misses). Issue 46, items 4 and 5."""

from __future__ import annotations

import math
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
