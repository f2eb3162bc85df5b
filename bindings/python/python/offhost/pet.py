"""PET acquisition data as numpy arrays.

- :func:`read_petlink` reads a Siemens PETLINK list-mode file (the Biograph mMR's 32-bit
  words, checked against the Interfile header beside it) into a structured array of
  :data:`PETLINK_DTYPE`; :func:`read_listmode` reads an offhost list-mode file (``offhost pet
  sim``) into one of :data:`EVENT_DTYPE`, the file's own 16-byte records.
- :func:`histogram` and :func:`histogram_petlink` turn events into sinograms: ``int32``
  arrays of shape ``scanner.with_span(span).sinogram_shape`` = (sinograms, views, radial
  bins), prompts minus delayeds, the same numbers ``offhost pet hist`` writes.
  :class:`Histogrammer` does it in steps (a live acquisition).
- :func:`reconstruct` turns a sinogram into an image volume (``float32``, slices x n x n)
  by filtered backprojection or MLEM.
- :func:`read_sinogram` reads ``offhost pet hist``'s ``.sino`` files and
  :func:`decode_sinogram` the snapshots a ``sinogram`` task sends to a ``host-out`` channel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Union

import numpy as np
import numpy.typing as npt

from ._offhost import EventHistogrammer as _EventHist
from ._offhost import PetlinkHistogrammer as _PetlinkHist
from ._offhost import Scanner
from ._offhost import decode_sinogram as _decode_sinogram
from ._offhost import read_listmode as _read_listmode
from ._offhost import read_petlink as _read_petlink
from ._offhost import read_sinogram as _read_sinogram
from ._offhost import reconstruct as _reconstruct
from ._offhost import simulate as _simulate

__all__ = [
    "Scanner",
    "EVENT_DTYPE",
    "PETLINK_DTYPE",
    "PETLINK_KINDS",
    "Listmode",
    "Petlink",
    "Sinogram",
    "Image",
    "read_listmode",
    "read_petlink",
    "simulate",
    "delayed",
    "time_us",
    "bin_coords",
    "histogram",
    "histogram_petlink",
    "Histogrammer",
    "read_sinogram",
    "decode_sinogram",
    "reconstruct",
]

#: One coincidence of an offhost list-mode file, exactly the file's 16-byte record
#: (little-endian): detectors within their rings, rings, energies in 0.1 keV, time of
#: flight in ps, and ``stamp``: bit 31 set for a delayed (random) coincidence, bits 0-30 the
#: time in microseconds (see :func:`delayed` and :func:`time_us`).
EVENT_DTYPE = np.dtype(
    [
        ("det_a", "<u2"),
        ("det_b", "<u2"),
        ("ring_a", "u1"),
        ("ring_b", "u1"),
        ("energy_a", "<u2"),
        ("energy_b", "<u2"),
        ("tof_ps", "<i2"),
        ("stamp", "<u4"),
    ]
)
assert EVENT_DTYPE.itemsize == 16

#: One decoded PETLINK word: the raw ``word``; ``time_ms``, the last elapsed-time tag at or
#: before it; ``bin``, the span-1 sinogram bin address of an event (0 otherwise); ``kind``
#: (see :data:`PETLINK_KINDS`); ``prompt``, true for a prompt event.
PETLINK_DTYPE = np.dtype(
    {
        "names": ["word", "time_ms", "bin", "kind", "prompt"],
        "formats": ["<u4", "<u4", "<u4", "u1", "?"],
        "offsets": [0, 4, 8, 12, 13],
        "itemsize": 16,
    }
)

#: The values of ``PETLINK_DTYPE["kind"]``.
PETLINK_KINDS = {"event": 0, "time": 1, "deadtime": 2, "motion": 3, "monitor": 4, "control": 5}

ScannerLike = Union[Scanner, str]
Span = Union[int, str]


def _scanner(s: ScannerLike) -> Scanner:
    return s if isinstance(s, Scanner) else Scanner(s)


@dataclass(frozen=True)
class Listmode:
    """An offhost list-mode file: its events and the scanner fields of its header."""

    events: npt.NDArray[Any]
    rings: int
    detectors_per_ring: int
    ring_spacing_mm: float
    crystal_radius_mm: float


@dataclass(frozen=True)
class Petlink:
    """A PETLINK file: its decoded words and the scanner its header describes."""

    words: npt.NDArray[Any]
    scanner: Scanner

    @property
    def events(self) -> npt.NDArray[Any]:
        """The coincidence events only (prompts and delayeds)."""
        return self.words[self.words["kind"] == PETLINK_KINDS["event"]]


@dataclass(frozen=True)
class Sinogram:
    """A sinogram read from a file or a snapshot: counts, scanner (its span included) and flags."""

    counts: npt.NDArray[np.int32]
    scanner: Scanner
    final: bool
    detector_pairs: bool


@dataclass(frozen=True)
class Image:
    """A reconstructed volume: ``data[slice, row, col]`` and its voxel size."""

    data: npt.NDArray[np.float32]
    pixel_mm: float
    slice_mm: float


def _events(raw: bytearray) -> npt.NDArray[Any]:
    return np.frombuffer(raw, dtype=EVENT_DTYPE)


def read_listmode(path: str | os.PathLike[str]) -> Listmode:
    """Reads an offhost list-mode file (every record checked against the header)."""
    raw, h = _read_listmode(os.fspath(path))
    return Listmode(
        events=_events(raw),
        rings=h["rings"],
        detectors_per_ring=h["detectors_per_ring"],
        ring_spacing_mm=h["ring_spacing_mm"],
        crystal_radius_mm=h["crystal_radius_mm"],
    )


def read_petlink(
    path: str | os.PathLike[str], header: str | os.PathLike[str] | None = None
) -> Petlink:
    """Reads a PETLINK list-mode file with its Interfile header (default: the ``.hdr``
    beside it that names it); every word is checked (bin addresses within the sinogram,
    word count against the header)."""
    raw, scanner = _read_petlink(os.fspath(path), None if header is None else os.fspath(header))
    return Petlink(words=np.frombuffer(raw, dtype=PETLINK_DTYPE), scanner=scanner)


def simulate(
    events: int,
    scanner: ScannerLike = "demo",
    *,
    phantom: str = "nema",
    seed: int = 1,
    rate: float = 4.0e6,
    scatter: float = 0.3,
) -> npt.NDArray[Any]:
    """Simulates ``events`` coincidences of a phantom (``nema``, ``shepp-logan``,
    ``cylinder``) at ``rate`` events per second of scan: the records ``offhost pet sim``
    writes for the same arguments."""
    raw = _simulate(events, _scanner(scanner), phantom, seed, rate, scatter)
    return _events(raw)


def delayed(events: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    """Whether each event is a delayed (random) coincidence."""
    return (events["stamp"] >> 31).astype(bool)


def time_us(events: npt.NDArray[Any]) -> npt.NDArray[np.uint32]:
    """Each event's time since the start in microseconds."""
    return events["stamp"] & np.uint32(0x7FFF_FFFF)


def bin_coords(
    words: npt.NDArray[Any], scanner: ScannerLike
) -> tuple[npt.NDArray[np.uint32], npt.NDArray[np.uint32], npt.NDArray[np.uint32]]:
    """(span-1 sinogram, view, radial bin) of PETLINK events' bin addresses."""
    s = _scanner(scanner)
    b = np.asarray(words["bin"], dtype=np.uint32)
    p, v = np.uint32(s.radial_bins), np.uint32(s.views)
    return b // (p * v), (b // p) % v, b % p


def _records(events: npt.NDArray[Any]) -> npt.NDArray[np.uint8]:
    if events.dtype != EVENT_DTYPE:
        raise TypeError(f"events must have offhost.pet.EVENT_DTYPE, not {events.dtype}")
    return np.ascontiguousarray(events).view(np.uint8).reshape(-1)


class Histogrammer:
    """Histograms events in steps: ``add`` arrays of them as they arrive, read ``sinogram()``
    at any time. For offhost events (``EVENT_DTYPE``) with an energy window in keV, or for
    PETLINK (``petlink=True``: ``PETLINK_DTYPE`` records or raw ``uint32`` words)."""

    def __init__(
        self,
        scanner: ScannerLike = "demo",
        span: Span = 1,
        window: tuple[float, float] = (435.0, 650.0),
        *,
        petlink: bool = False,
    ) -> None:
        base = _scanner(scanner)
        self.scanner: Scanner = base.with_span(span)
        self.petlink = petlink
        self._h: Any = (
            _PetlinkHist(base, span) if petlink else _EventHist(self.scanner, *window)
        )

    def add(self, events: npt.NDArray[Any]) -> None:
        """Adds events; the GIL is released while they are counted. offhost events are
        counted where they lie in the array, so no other thread may write to it meanwhile
        (as with numpy's own functions)."""
        if self.petlink:
            words = events["word"] if events.dtype.names else events
            # Counted where they lie (a copy only when they are not contiguous little-endian
            # words already, as in a PETLINK_DTYPE array).
            self._h.add(np.ascontiguousarray(words, dtype="<u4"))
            return
        # The native side takes the whole array a piece at a time.
        self._h.add(_records(events))
        self._h.flush()

    def sinogram(self) -> npt.NDArray[np.int32]:
        """The sinogram so far: int32, shape ``scanner.sinogram_shape``."""
        counts = np.frombuffer(self._h.sinogram(), dtype="<i4")
        return counts.reshape(self.scanner.sinogram_shape)

    def stats(self) -> dict[str, int]:
        """Events seen, prompts, delayeds, energy- and geometry-rejected, accepted."""
        return dict(self._h.stats())


def histogram(
    events: npt.NDArray[Any],
    scanner: ScannerLike = "demo",
    span: Span = 1,
    window: tuple[float, float] = (435.0, 650.0),
) -> npt.NDArray[np.int32]:
    """Histograms offhost events (``EVENT_DTYPE``) into a sinogram, prompts minus delayeds,
    within the energy window (keV): the counts ``offhost pet hist`` writes."""
    h = Histogrammer(scanner, span, window)
    h.add(events)
    return h.sinogram()


def histogram_petlink(
    words: npt.NDArray[Any] | Petlink, scanner: ScannerLike = "mmr", span: Span = "ssrb"
) -> npt.NDArray[np.int32]:
    """Histograms PETLINK words (a :class:`Petlink`, ``PETLINK_DTYPE`` records or raw
    ``uint32`` words) into a sinogram of ``span`` (default: single-slice rebinning), prompts
    minus delayeds: the counts ``offhost pet hist --format petlink`` writes."""
    if isinstance(words, Petlink):
        scanner, words = words.scanner, words.words
    h = Histogrammer(scanner, span, petlink=True)
    h.add(words)
    return h.sinogram()


def _sinogram(raw: bytearray, scanner: Scanner, final: bool, pairs: bool) -> Sinogram:
    counts = np.frombuffer(raw, dtype="<i4").reshape(scanner.sinogram_shape)
    return Sinogram(counts=counts, scanner=scanner, final=final, detector_pairs=pairs)


def read_sinogram(path: str | os.PathLike[str]) -> Sinogram:
    """Reads a sinogram file of ``offhost pet hist`` (header and length checked)."""
    return _sinogram(*_read_sinogram(os.fspath(path)))


def decode_sinogram(data: bytes | bytearray | memoryview) -> Sinogram:
    """Decodes a sinogram as the ``sinogram`` task sends it (a snapshot while it acquires,
    ``final`` at the end)."""
    return _sinogram(*_decode_sinogram(data))


def reconstruct(
    sinogram: Sinogram | npt.NDArray[Any],
    scanner: ScannerLike | None = None,
    *,
    method: str = "fbp",
    iterations: int = 10,
    detector_pairs: bool | None = None,
) -> Image:
    """Reconstructs a sinogram into an image volume (``fbp``, ``fbp-hann`` or ``mlem``
    with ``iterations``): single-slice rebinning, geometric normalisation, 2D per slice.
    A :class:`Sinogram` brings its scanner and flags; an array needs ``scanner`` (of the
    array's span) and is taken as detector-pair data (offhost events) unless
    ``detector_pairs=False`` (PETLINK)."""
    if isinstance(sinogram, Sinogram):
        s = sinogram.scanner
        pairs = sinogram.detector_pairs if detector_pairs is None else detector_pairs
        counts = sinogram.counts
    else:
        if scanner is None:
            raise TypeError("reconstruct(array) needs the scanner the array was histogrammed for")
        s = _scanner(scanner)
        pairs = True if detector_pairs is None else detector_pairs
        counts = sinogram
    shape = tuple(s.sinogram_shape)
    if tuple(counts.shape) != shape and counts.size != int(np.prod(shape)):
        raise ValueError(f"sinogram of shape {counts.shape}, the scanner's is {shape}")
    raw = np.ascontiguousarray(counts, dtype="<i4")
    data, slices, n, pixel_mm, slice_mm = _reconstruct(raw, s, method, iterations, pairs)
    img = np.frombuffer(data, dtype="<f4").reshape(slices, n, n)
    return Image(data=img, pixel_mm=pixel_mm, slice_mm=slice_mm)
