"""The exceptions offhost raises.

Every one derives from :class:`offhost.Error` and, where one fits, from a built-in class
(``offhost.TimeoutError`` is also a ``TimeoutError``, ``offhost.PipelineError`` a
``ValueError``...). ``str(e)`` is the message of the Rust layer that failed, naming what is
wrong and where (``"message of 9 bytes exceeds the channel maximum of 8"``,
``"line 2, column 9: unknown task 'fitler'"``). An error over a limit says which by its id
(``"over the limit max_buffers of 65536 buffers"``), and so does ``e.limit``: no argument of
this package raises a limit. A refusal from an engine daemon names it in its message only,
with the ``offhost engine`` flag that raises it there.
"""

from __future__ import annotations

import builtins
from typing import Any

__all__ = [
    "Error",
    "TimeoutError",
    "WouldBlockError",
    "PeerGoneError",
    "ClosedError",
    "TooLargeError",
    "BadUrlError",
    "NoLoansError",
    "ProtocolError",
    "TransportError",
    "InvalidArgumentError",
    "PipelineError",
    "TaskFailedError",
    "EngineError",
    "NoChannelError",
    "FormatError",
    "GeometryError",
]


class Error(Exception):
    """Base class of every offhost error."""

    #: The id of the limit the call went over (``"max_buffers"``), or None.
    limit: str | None = None
    #: That limit's value (bytes, a count, or milliseconds for a time), or None.
    limit_value: int | None = None
    #: The id of the setting that would have allowed what was refused, which is also the
    #: keyword argument that sets it (``"tls_certificates"``), or None.
    setting: str | None = None


class TimeoutError(Error, builtins.TimeoutError):
    """A deadline passed before the call could complete."""


class WouldBlockError(Error):
    """A non-blocking call (``try_send``, ``try_recv``) could not complete now."""


class PeerGoneError(Error, ConnectionError):
    """The peer went away (closed the link, exited or died)."""


class ClosedError(Error):
    """The session, channel, host channel, loan or message was closed (or sent, or released)."""


class TooLargeError(Error, ValueError):
    """A message exceeds the channel's maximum, or does not fit the buffer given."""


class BadUrlError(Error, ValueError):
    """A URL is not one of ``shm:PATH``, ``shm:@name``, ``unix:PATH``, ``tcp:HOST:PORT``, ``mem:NAME``."""


class NoLoansError(Error):
    """Zero-copy loans need the shm transport."""


class ProtocolError(Error):
    """The peer broke the protocol, or its shared memory is corrupt; the link was closed."""


class TransportError(Error, OSError):
    """A system call of the transport failed (connect, bind, read, write)."""


class InvalidArgumentError(Error, ValueError):
    """An argument is out of range (channel options, select over two sessions, sizes)."""


class PipelineError(Error, ValueError):
    """Pipeline text does not parse or does not check against the tasks (line and column given)."""


class TaskFailedError(Error):
    """A task of a pipeline failed; the rest was stopped. ``status`` holds the final status."""

    status: dict[str, Any] | None = None


class EngineError(Error):
    """The engine daemon refused a request or answered out of protocol."""


class NoChannelError(Error, LookupError):
    """The pipeline has no host channel of that name (the message lists the ones it has)."""


class FormatError(Error, ValueError):
    """A PET file or encoding is malformed (the byte offset is named)."""


class GeometryError(Error, ValueError):
    """A scanner geometry or span is invalid."""
