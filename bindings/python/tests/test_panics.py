"""No Rust panic crosses to a user (issue 46, item 4): a panic in any entry point of the
native module comes out as ``offhost.Error`` ("offhost panicked: ..."), never as PyO3's
``pyo3_runtime.PanicException``, a ``BaseException`` that ``except Exception`` misses.

Debug builds (the test build of scripts/test.d/40-bindings.sh) have a test hook,
``_offhost._panic_in_next_guard(True)``: the next guarded call panics. Each entry point is
called with the hook armed and must raise ``offhost.Error`` having disarmed it (so it went
through a guard); the few left unguarded (a field, ``self``) must leave it armed. A table
check keeps the list complete: a new method of the module fails here until it is listed.
Release builds have no hook, and these tests skip there."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import pytest

import offhost
import offhost._offhost as native

hook = getattr(native, "_panic_in_next_guard", None)
pytestmark = pytest.mark.skipif(hook is None, reason="a release build: the test hook is in debug builds only")

#: The special methods an entry point may be (when a class defines them itself).
SPECIAL = {"__iter__", "__next__", "__enter__", "__exit__", "__len__", "__bytes__", "__repr__", "__getitem__", "__eq__"}

#: The getters of ``Scanner``, fields read without a guard.
SCANNER_FIELDS = (
    "name",
    "rings",
    "detectors_per_ring",
    "radial_bins",
    "views",
    "span",
    "max_ring_difference",
    "ring_spacing_mm",
    "crystal_radius_mm",
    "bin_size_mm",
)

#: Entry points that cannot panic and are left unguarded (each file's header says why).
UNGUARDED = {
    "Session.url",
    "Session.__enter__",
    "Channel.__iter__",
    "Loan.capacity",
    "Loan.__len__",
    "Message.__len__",
    "Message.is_loan",
    "Message.__enter__",
    "Pipeline.__enter__",
    "OutputIter.__iter__",
    *(f"Scanner.{f}" for f in (*SCANNER_FIELDS, "__eq__")),
    "QueueLoan.__len__",
    *(f"Completion.{f}" for f in ("op", "tag", "channel", "ok", "value", "end", "error", "code", "data")),
    "Sink.url",
}


def entry_points() -> set[str]:
    """Every entry point of the native module: `Class()`, `Class.member`, `function`."""
    names: set[str] = set()
    for name in dir(native):
        obj = getattr(native, name)
        if name.startswith("_") or not callable(obj):
            continue
        if not isinstance(obj, type):
            names.add(name)
            continue
        if "__new__" in vars(obj):
            names.add(f"{name}()")
        for m in vars(obj):
            if not m.startswith("_") or m in SPECIAL:
                names.add(f"{name}.{m}")
    return names


def panics_as_offhost_error(name: str, call: Callable[[], object]) -> None:
    """`call` with the hook armed: it must raise offhost.Error, the base class itself, with
    the injected panic's message, and disarm the hook."""
    assert hook(True) is False, "the hook was left armed"
    try:
        try:
            call()
        except Exception as e:  # noqa: BLE001 - the point: an ordinary except catches it
            err = e
        else:
            pytest.fail(f"{name}: no exception with the hook armed")
    finally:
        armed = hook(False)
    assert not armed, f"{name}: went through no guard"
    assert type(err) is offhost.Error, f"{name}: {type(err)}: {err}"
    assert "offhost panicked: injected by the test hook" in str(err), f"{name}: {err}"


def goes_through_no_guard(name: str, call: Callable[[], object]) -> None:
    assert hook(True) is False
    try:
        call()
    finally:
        armed = hook(False)
    assert armed, f"{name} is listed as unguarded but went through a guard"


def test_the_hook_is_disarmed_by_one_call_and_by_false() -> None:
    assert hook(False) is False
    assert hook(True) is False
    assert hook(True) is True
    assert hook(False) is True
    assert hook(False) is False


def test_every_entry_point_turns_a_panic_into_offhost_error(
    echo_url: str, tmp_path: Path
) -> None:
    calls: dict[str, Callable[[], object]] = {}

    # Sessions, channels, loans, messages.
    s = offhost.Session(echo_url)
    ch = s.channel("c")
    loan = ch.loan()
    ch.send(b"x")
    msg = ch.recv_message(timeout=30)
    assert msg is not None
    calls |= {
        "Session()": lambda: offhost.Session(echo_url),
        "Session.channel": lambda: s.channel("d"),
        "Session.accept": lambda: s.accept(timeout=0),
        "Session.transport": lambda: s.transport,
        "Session.close": s.close,
        "Session.__exit__": lambda: s.__exit__(None, None, None),
        "Session.__repr__": lambda: repr(s),
        "Channel.name": lambda: ch.name,
        "Channel.options": lambda: ch.options,
        "Channel.send": lambda: ch.send(b"x"),
        "Channel.try_send": lambda: ch.try_send(b"x"),
        "Channel.recv": lambda: ch.recv(timeout=0),
        "Channel.try_recv": ch.try_recv,
        "Channel.recv_into": lambda: ch.recv_into(bytearray(8), timeout=0),
        "Channel.loan": lambda: ch.loan(timeout=0),
        "Channel.send_loan": lambda: ch.send_loan(loan),
        "Channel.recv_message": lambda: ch.recv_message(timeout=0),
        "Channel.close": ch.close,
        "Channel.__next__": lambda: next(ch),
        "Channel.__repr__": lambda: repr(ch),
        "select": lambda: offhost.select([ch], timeout=0),
        "Loan.buffer": lambda: loan.buffer,
        "Loan.sent": lambda: loan.sent,
        "Loan.__repr__": lambda: repr(loan),
        "Message.buffer": lambda: msg.buffer,
        "Message.release": msg.release,
        "Message.__bytes__": lambda: bytes(msg),
        "Message.__exit__": lambda: msg.__exit__(None, None, None),
        "Message.__repr__": lambda: repr(msg),
    }

    # Engines and pipelines.
    engine = offhost.Engine(workers=1)
    p = engine.submit("host-in name=i >a\nhost-out name=o <a\n")
    out = p.output("o")
    calls |= {
        "Engine()": lambda: offhost.Engine(workers=1),
        "Engine.submit": lambda: engine.submit("host-in name=i >a\nhost-out name=o <a\n"),
        "Engine.add_module": lambda: engine.add_module("m", b"\0asm\x01\0\0\0"),
        "Engine.add_put_hook": lambda: engine.add_put_hook("h", print),
        "Engine.add_get_hook": lambda: engine.add_get_hook("h", lambda q: None),
        "Engine.url": lambda: engine.url,
        "Engine.__repr__": lambda: repr(engine),
        "Pipeline.id": lambda: p.id,
        "Pipeline.inputs": lambda: p.inputs,
        "Pipeline.outputs": lambda: p.outputs,
        "Pipeline.send": lambda: p.send("i", b"x"),
        "Pipeline.close_input": lambda: p.close_input("i"),
        "Pipeline.attach": lambda: p.attach("in", "i"),
        "Pipeline.recv": lambda: p.recv("o", timeout=0),
        "Pipeline.output": lambda: p.output("o"),
        "Pipeline.status": p.status,
        "Pipeline.stop": p.stop,
        "Pipeline.wait": lambda: p.wait(timeout=0),
        "Pipeline.__exit__": lambda: p.__exit__(None, None, None),
        "Pipeline.__repr__": lambda: repr(p),
        "OutputIter.__next__": lambda: next(out),
    }

    # PET.
    scanner = native.Scanner("demo")
    other_scanner = native.Scanner("mmr")
    eh = native.EventHistogrammer(scanner, 350.0, 650.0)
    ph = native.PetlinkHistogrammer(scanner, scanner.span)
    missing = tmp_path / "missing"
    calls |= {
        "Scanner()": lambda: native.Scanner("demo"),
        "Scanner.with_span": lambda: scanner.with_span(scanner.span),
        "Scanner.ssrb_span": lambda: scanner.ssrb_span,
        "Scanner.sinograms": lambda: scanner.sinograms,
        "Scanner.sinogram_shape": lambda: scanner.sinogram_shape,
        "Scanner.__repr__": lambda: repr(scanner),
        "EventHistogrammer()": lambda: native.EventHistogrammer(scanner, 350.0, 650.0),
        "EventHistogrammer.add": lambda: eh.add(b""),
        "EventHistogrammer.flush": eh.flush,
        "EventHistogrammer.sinogram": eh.sinogram,
        "EventHistogrammer.stats": eh.stats,
        "PetlinkHistogrammer()": lambda: native.PetlinkHistogrammer(scanner, scanner.span),
        "PetlinkHistogrammer.add": lambda: ph.add(b""),
        "PetlinkHistogrammer.sinogram": ph.sinogram,
        "PetlinkHistogrammer.stats": ph.stats,
        "read_listmode": lambda: native.read_listmode(missing),
        "read_petlink": lambda: native.read_petlink(missing, missing),
        "read_sinogram": lambda: native.read_sinogram(missing),
        "decode_sinogram": lambda: native.decode_sinogram(b""),
        "reconstruct": lambda: native.reconstruct(b"", scanner),
        "simulate": lambda: native.simulate(1, scanner),
    }

    # The host queue (in-host: no engine needed), its loans and completions.
    q = offhost.Queue.in_host("a", {}, insecure=True)
    qloan = q.loan(16, timeout=30)
    q.push_open("nope/c")
    q.submit()
    assert q.wait(1, timeout=30) == 1
    completion = q.pop()
    assert completion is not None and not completion.ok
    calls |= {
        "Queue()": lambda: offhost.Queue(f"shm:{missing}"),
        "Queue.in_host": lambda: offhost.Queue.in_host("b", {}, insecure=True),
        "Queue.mode": lambda: q.mode,
        "Queue.limits": lambda: q.limits,
        "Queue.outstanding": lambda: q.outstanding,
        "Queue.bytes_in_flight": lambda: q.bytes_in_flight,
        "Queue.push_open": lambda: q.push_open("c"),
        "Queue.push_send": lambda: q.push_send(1, b"x"),
        "Queue.loan": lambda: q.loan(16, timeout=0),
        "Queue.push_send_loan": lambda: q.push_send_loan(1, qloan),
        "Queue.push_recv": lambda: q.push_recv(1),
        "Queue.push_close": lambda: q.push_close(1),
        "Queue.submit": q.submit,
        "Queue.wait": lambda: q.wait(1, timeout=0),
        "Queue.pop": q.pop,
        "Queue.completions": q.completions,
        "Queue.open": lambda: q.open("c", timeout=0),
        "Queue.send": lambda: q.send(1, b"x", timeout=0),
        "Queue.recv": lambda: q.recv(1, timeout=0),
        "Queue.close": lambda: q.close(1, timeout=0),
        "Queue.__repr__": lambda: repr(q),
        "QueueLoan.buffer": lambda: qloan.buffer,
        "QueueLoan.pushed": lambda: qloan.pushed,
        "QueueLoan.__repr__": lambda: repr(qloan),
        "Completion.__repr__": lambda: repr(completion),
    }

    # The sink of offhost.bench: it serves one session, ended below so that join returns.
    sink_url = f"unix:{tmp_path / 'sink.sock'}"
    sink = native.Sink(sink_url)
    calls |= {
        "Sink()": lambda: native.Sink(f"unix:{tmp_path / 'sink2.sock'}"),
        "Sink.join": sink.join,
    }

    unguarded: dict[str, Callable[[], object]] = {
        "Session.url": lambda: s.url,
        "Session.__enter__": s.__enter__,
        "Channel.__iter__": lambda: iter(ch),
        "Loan.capacity": lambda: loan.capacity,
        "Loan.__len__": lambda: len(loan),
        "Message.__len__": lambda: len(msg),
        "Message.is_loan": lambda: msg.is_loan,
        "Message.__enter__": msg.__enter__,
        "Pipeline.__enter__": p.__enter__,
        "OutputIter.__iter__": lambda: iter(out),
        **{f"Scanner.{f}": (lambda f=f: getattr(scanner, f)) for f in SCANNER_FIELDS},
        "Scanner.__eq__": lambda: scanner == other_scanner,
        "QueueLoan.__len__": lambda: len(qloan),
        **{f"Completion.{f}": (lambda f=f: getattr(completion, f)) for f in (
            "op", "tag", "channel", "ok", "value", "end", "error", "code", "data"
        )},
        "Sink.url": lambda: sink.url,
    }

    # The lists are complete: every entry point of the module is in one of them.
    assert set(unguarded) == UNGUARDED
    listed = set(calls) | UNGUARDED
    assert entry_points() - listed == set(), "entry points missing from this test"
    assert listed - entry_points() == set(), "entry points this test lists that are gone"

    for name, call in calls.items():
        panics_as_offhost_error(name, call)
    for name, call in unguarded.items():
        goes_through_no_guard(name, call)

    # What a panic interrupted still works.
    ch.send(b"after")
    assert ch.recv(timeout=30) == b"after"
    p.send("i", b"y")
    p.close_input("i")
    assert next(out) == b"y"
    assert p.wait(timeout=30)["finished"] is True
    assert q.outstanding == 0 and repr(q).startswith("Queue(")
    with offhost.Session(sink_url):
        pass
    sink.join()
    s.close()


def test_a_panic_is_caught_by_except_exception() -> None:
    """The user's view: an ordinary `except Exception` (or `except offhost.Error`) catches
    a panic, and the module goes on working."""
    scanner = native.Scanner("demo")
    for _ in range(3):
        hook(True)
        try:
            native.simulate(10, scanner)
        except offhost.Error as e:
            assert "panicked" in str(e)
        else:
            pytest.fail("no exception")
        assert hook(False) is False
    assert len(native.simulate(10, scanner)) == 160
    assert not math.isnan(scanner.bin_size_mm)
