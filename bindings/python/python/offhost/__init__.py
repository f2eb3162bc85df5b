"""offhost from Python: channels to engines over shared memory, pipelines, PET acquisition.

- :func:`run` runs a pipeline (its text or a ``pathlib.Path``) on the embedded engine with
  its host channels fed from and drained into Python objects, and returns its statistics.
- :class:`Engine` (embedded, or a daemon by URL) ``submit``\\ s pipelines and returns
  :class:`Pipeline` handles: ``send``, ``recv``, ``output`` (iteration), ``status``,
  ``stop``, ``wait``.
- :class:`Session` and its :class:`Channel`\\ s: ``send``, ``recv``, ``recv_into``, timeouts,
  :func:`select`, and on shm zero-copy loans (``loan``/``send_loan``; received loans through
  ``recv_message``) whose ``buffer`` is a memoryview of the shared memory itself.
- :class:`Queue`: a host's submission and completion queues at its local engine (the
  off-host transport): ``push_send``/``push_recv``/``submit``/``wait``/``pop`` without a
  system call per message (``loan``/``push_send_loan`` without a copy), or the blocking
  ``open``/``send``/``recv``/``close``; the engine
  carries ``PEER/CHANNEL`` addresses to other engines and returns :class:`Completion`\ s.
- :mod:`offhost.pet`: PETLINK and offhost list-mode files as numpy structured arrays,
  histogramming into sinograms, reconstruction.

Every blocking call releases the GIL and can be interrupted with Ctrl-C; errors are
subclasses of :class:`offhost.Error` carrying the Rust messages.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Union

from ._offhost import (
    Channel,
    Completion,
    Engine,
    Loan,
    Message,
    Pipeline,
    Queue,
    QueueLoan,
    Session,
    __version__,
    select,
)
from . import errors
from .errors import (
    BadUrlError,
    ClosedError,
    EngineError,
    Error,
    FormatError,
    GeometryError,
    InvalidArgumentError,
    NoChannelError,
    NoLoansError,
    PeerGoneError,
    PipelineError,
    ProtocolError,
    TaskFailedError,
    TimeoutError,
    TooLargeError,
    TransportError,
    WouldBlockError,
)

__all__ = [
    "run",
    "Engine",
    "Pipeline",
    "Session",
    "Channel",
    "Loan",
    "Message",
    "select",
    "Queue",
    "QueueLoan",
    "Completion",
    *errors.__all__,
    "__version__",
]

#: Bytes per message when an input is read from a file object (as ``offhost run`` reads).
READ_CHUNK = 1 << 16

Input = Any
"""bytes-like object (one message), an iterable of them (one message each), or a binary file."""
Output = Union[bytearray, list, Callable[[bytes], Any], Any]
"""bytearray (extended), list (one ``bytes`` per buffer appended), callable (called with each
buffer) or a binary file (written)."""


def _is_buffer(obj: object) -> bool:
    try:
        memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


def _feed(p: Pipeline, name: str, src: Input) -> None:
    if _is_buffer(src):
        p.send(name, src)
    elif hasattr(src, "read"):
        while chunk := src.read(READ_CHUNK):
            p.send(name, chunk)
    elif isinstance(src, Iterable):
        for chunk in src:
            p.send(name, chunk)
    else:
        raise TypeError(
            f"input {name!r}: expected a bytes-like object, an iterable of them or a binary file, "
            f"not {type(src).__name__}"
        )


def _deliver(sink: Output, name: str) -> Callable[[bytes], Any]:
    if isinstance(sink, bytearray):
        return sink.extend
    if isinstance(sink, list):
        return sink.append
    if hasattr(sink, "write"):
        return sink.write
    if callable(sink):
        return sink
    raise TypeError(
        f"output {name!r}: expected a bytearray, a list, a callable or a binary file, "
        f"not {type(sink).__name__}"
    )


def run(
    pipeline: str | os.PathLike[str],
    inputs: Mapping[str, Input] | None = None,
    outputs: Mapping[str, Output] | None = None,
    *,
    workers: int | None = None,
    engine: Engine | None = None,
) -> dict[str, Any]:
    """Runs a pipeline to its end and returns its statistics (as ``offhost run --json``).

    ``pipeline`` is its text, or a path (``pathlib.Path``) to an ``.ion`` file. ``inputs``
    feed ``host-in`` channels by name: a bytes-like object (numpy arrays included) is one
    message, an iterable gives one message per item, a binary file is read in 64 KiB
    messages; each stream ends after its source. ``outputs`` receive ``host-out`` channels
    by name: a ``bytearray`` is extended with every buffer, a ``list`` gets one ``bytes``
    per buffer, a binary file is written, a callable is called with each buffer. Host
    channels not named are closed (inputs) or discarded (outputs).

    Runs on the embedded engine (``workers`` threads), or on ``engine`` if given.
    Raises :class:`PipelineError` for bad text, :class:`TaskFailedError` if a task fails,
    :class:`NoChannelError` for a name the pipeline does not have. Ctrl-C stops the
    pipeline and raises ``KeyboardInterrupt``.
    """
    eng = engine if engine is not None else Engine(workers=workers)
    p = eng.submit(pipeline)
    ins = dict(inputs or {})
    outs = {name: _deliver(sink, name) for name, sink in (outputs or {}).items()}
    for name in ins:
        p.attach("in", name)
    for name in outs:
        p.attach("out", name)
    failures: list[BaseException] = []

    def feed(name: str, src: Input) -> None:
        try:
            _feed(p, name, src)
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            failures.append(e)
            p.stop()
        finally:
            try:
                p.close_input(name)
            except Error:
                pass

    def drain(name: str, put: Callable[[bytes], Any]) -> None:
        try:
            for buf in p.output(name):
                put(buf)
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            failures.append(e)
            p.stop()

    threads = [
        threading.Thread(target=feed, args=(n, s), name=f"offhost-in-{n}", daemon=True)
        for n, s in ins.items()
    ] + [
        threading.Thread(target=drain, args=(n, put), name=f"offhost-out-{n}", daemon=True)
        for n, put in outs.items()
    ]
    for t in threads:
        t.start()
    try:
        # Outputs end with the pipeline. Their ends come first: a daemon answers a status
        # (what wait polls) of a finished pipeline by letting go of its host ports, so an
        # output whose channel it has not taken yet would be refused.
        for t in threads[len(ins) :]:
            while t.is_alive():
                t.join(timeout=0.1)
        stats = p.wait()
    except BaseException:
        p.stop()
        raise
    finally:
        for t in threads:
            t.join(timeout=30)
    if failures:
        raise failures[0]
    return stats
