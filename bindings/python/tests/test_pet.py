"""offhost.pet: list-mode and PETLINK files as numpy arrays, sinograms equal to the CLI's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import offhost
import offhost.pet as pet
from conftest import run_cli


@pytest.fixture(scope="module")
def listmode_file(tmp_path_factory, offhost_bin: Path) -> Path:
    d = tmp_path_factory.mktemp("lm")
    f = d / "scan.lm"
    run_cli(offhost_bin, "pet", "sim", "-o", f, "--events", 300_000, "--seed", 3)
    return f


def test_read_petlink_counts_as_the_cli(petlink_dir: Path, offhost_bin: Path) -> None:
    data = petlink_dir / "small_listmode_file.l"
    p = pet.read_petlink(data)
    st = json.loads(run_cli(offhost_bin, "pet", "stat", data, "--format", "petlink", "--json"))
    w = p.words
    assert w.dtype == pet.PETLINK_DTYPE and len(w) == st["words"] == 254_816
    ev = w["kind"] == pet.PETLINK_KINDS["event"]
    assert ev.sum() == st["events"] == len(p.events)
    assert (w["prompt"] & ev).sum() == st["prompts"]
    assert (~w["prompt"] & ev).sum() == st["delayeds"]
    assert (w["kind"] == pet.PETLINK_KINDS["time"]).sum() == st["time_tags"]
    times = w["time_ms"][w["kind"] == pet.PETLINK_KINDS["time"]]
    assert int(times[-1] - times[0]) == st["duration_ms"]
    assert np.all(np.diff(w["time_ms"].astype(np.int64)) >= 0)
    s = p.scanner
    assert (s.rings, s.detectors_per_ring, s.views, s.radial_bins) == (64, 504, 252, 344)
    sino, view, tang = pet.bin_coords(p.events, s)
    assert sino.max() < s.sinograms and view.max() < s.views and tang.max() < s.radial_bins
    # The raw words are the file's, in order.
    raw = np.fromfile(data, dtype="<u4")
    assert np.array_equal(w["word"], raw)


def test_a_petlink_sinogram_equals_the_clis_file(petlink_dir: Path, offhost_bin: Path, tmp_path: Path) -> None:
    data = petlink_dir / "small_listmode_file.l"
    out = tmp_path / "petlink.sino"
    run_cli(offhost_bin, "pet", "hist", data, "--format", "petlink", "--span", "ssrb", "-o", out)
    cli = pet.read_sinogram(out)
    p = pet.read_petlink(data)
    mine = pet.histogram_petlink(p)  # single-slice rebinning by default
    assert mine.shape == cli.counts.shape == (127, 252, 344)
    assert mine.dtype == np.int32
    assert np.array_equal(mine, cli.counts)
    assert cli.final and not cli.detector_pairs
    # Raw uint32 words give the same.
    raw = np.fromfile(data, dtype="<u4")
    assert np.array_equal(pet.histogram_petlink(raw, p.scanner), mine)
    # The native histogrammer counts a uint32 array where it lies and copies any other
    # buffer of little-endian words: the same counts either way.
    from offhost._offhost import PetlinkHistogrammer

    for given in (raw, raw.tobytes(), bytearray(raw[:1000]) + raw[1000:].tobytes()):
        h = PetlinkHistogrammer(p.scanner, "ssrb")
        h.add(given)
        assert np.array_equal(np.frombuffer(h.sinogram(), dtype="<i4").reshape(mine.shape), mine)
        assert h.stats()["words"] == len(raw)


def test_listmode_files_are_the_simulated_records(listmode_file: Path) -> None:
    lm = pet.read_listmode(listmode_file)
    assert lm.events.dtype == pet.EVENT_DTYPE and len(lm.events) == 300_000
    assert (lm.rings, lm.detectors_per_ring) == (16, 256)
    same = pet.simulate(300_000, "demo", seed=3)
    assert np.array_equal(lm.events, same)
    # The array is the file's records, byte for byte.
    raw = listmode_file.read_bytes()[32:]
    assert lm.events.tobytes() == raw
    assert pet.delayed(lm.events).sum() > 0
    assert np.all(np.diff(pet.time_us(lm.events).astype(np.int64)) >= 0)


def test_a_listmode_sinogram_equals_the_clis_file(listmode_file: Path, offhost_bin: Path, tmp_path: Path) -> None:
    out = tmp_path / "scan.sino"
    run_cli(offhost_bin, "pet", "hist", listmode_file, "-o", out)
    cli = pet.read_sinogram(out)
    events = pet.read_listmode(listmode_file).events
    mine = pet.histogram(events)
    assert mine.shape == pet.Scanner("demo").sinogram_shape == (256, 128, 128)
    assert np.array_equal(mine, cli.counts)
    assert cli.detector_pairs
    # In steps, as a live acquisition adds them: the same counts.
    h = pet.Histogrammer("demo")
    for part in np.array_split(events, 7):
        h.add(part)
    assert np.array_equal(h.sinogram(), mine)
    st = h.stats()
    assert st["events"] == len(events) and st["delayeds"] == int(pet.delayed(events).sum())
    # Other spans.
    ssrb = pet.histogram(events, span="ssrb")
    assert ssrb.shape == (31, 128, 128) and ssrb.sum() == mine.sum()


def test_the_native_add_counts_arrays_in_place_and_other_buffers_by_copy(listmode_file: Path) -> None:
    """`EventHistogrammer.add` reads a contiguous numpy uint8 array where it lies and copies
    any other contiguous buffer (bytes, bytearray) 64 KiB at a time: the counts agree; a
    strided buffer, or one that is not whole records, is refused, with nothing counted."""
    from offhost._offhost import EventHistogrammer

    events = pet.read_listmode(listmode_file).events
    raw = np.ascontiguousarray(events).view(np.uint8).reshape(-1)
    want = pet.histogram(events)
    scanner = pet.Scanner("demo")

    def counts(*pieces: object) -> np.ndarray:
        h = EventHistogrammer(scanner, 435.0, 650.0)
        for p in pieces:
            h.add(p)
        h.flush()
        assert h.stats()["events"] == len(events)
        return np.frombuffer(h.sinogram(), dtype="<i4").reshape(want.shape)

    half = 16 * (len(events) // 2)
    assert np.array_equal(counts(raw), want)
    assert np.array_equal(counts(raw.tobytes()), want)
    assert np.array_equal(counts(bytearray(raw[:half]), raw[half:]), want)
    # A read-only array (over bytes) is read in place too.
    ro = np.frombuffer(raw.tobytes(), dtype=np.uint8)
    assert not ro.flags.writeable
    assert np.array_equal(counts(ro), want)
    h = EventHistogrammer(scanner, 435.0, 650.0)
    # Every other byte of a doubled buffer: not one contiguous buffer.
    doubled = np.repeat(raw, 2)[::2]
    assert not doubled.flags.c_contiguous
    with pytest.raises(ValueError, match="not one contiguous buffer"):
        h.add(doubled)
    for bad in (raw[:17], raw[:17].tobytes()):
        with pytest.raises(ValueError, match="17 bytes are not whole 16-byte list-mode records"):
            h.add(bad)
    assert h.stats()["events"] == 0


def test_reconstruction_gives_an_image(listmode_file: Path) -> None:
    events = pet.read_listmode(listmode_file).events
    sino = pet.histogram(events, span="ssrb")
    img = pet.reconstruct(sino, pet.Scanner("demo").with_span("ssrb"))
    assert img.data.dtype == np.float32 and img.data.ndim == 3
    slices, n, n2 = img.data.shape
    assert slices == 31 and n == n2 > 0 and img.pixel_mm > 0 and img.slice_mm > 0
    # Activity sits inside the field of view: the centre is brighter than the corners.
    mid = img.data[slices // 2]
    assert mid[n // 2 - 10 : n // 2 + 10, n // 2 - 10 : n // 2 + 10].mean() > mid[:10, :10].mean()
    mlem = pet.reconstruct(sino, pet.Scanner("demo").with_span("ssrb"), method="mlem", iterations=2)
    assert mlem.data.shape == img.data.shape and mlem.data.min() >= 0
    with pytest.raises(ValueError, match="expected fbp, fbp-hann or mlem"):
        pet.reconstruct(sino, pet.Scanner("demo").with_span("ssrb"), method="magic")
    with pytest.raises(TypeError, match="needs the scanner"):
        pet.reconstruct(sino)


def test_errors_carry_the_rust_messages(tmp_path: Path, petlink_dir: Path) -> None:
    bad = tmp_path / "bad.lm"
    bad.write_bytes(b"NOTPETLM" + bytes(24))
    with pytest.raises(offhost.FormatError, match=r"bad\.lm: bad magic at byte offset 0") as e:
        pet.read_listmode(bad)
    assert isinstance(e.value, ValueError)
    with pytest.raises(offhost.FormatError, match="bad magic"):
        pet.decode_sinogram(b"x" * 64)
    with pytest.raises(offhost.FormatError, match="truncated"):
        pet.decode_sinogram(b"OHSINO01")
    with pytest.raises(offhost.GeometryError, match="unknown scanner preset \"biggles\""):
        pet.Scanner("biggles")
    with pytest.raises(offhost.GeometryError, match="invalid geometry"):
        pet.Scanner("demo").with_span(2)
    with pytest.raises(TypeError, match="EVENT_DTYPE"):
        pet.histogram(np.zeros(4, dtype=np.uint32))
    with pytest.raises(offhost.FormatError, match=r"missing\.lm: i/o error: No such file"):
        pet.read_listmode(tmp_path / "missing.lm")
    # A PETLINK file cut in the middle of a word.
    cut = tmp_path / "cut.l"
    cut.write_bytes((petlink_dir / "small_listmode_file.l").read_bytes()[:1001])
    with pytest.raises((offhost.FormatError, offhost.InvalidArgumentError)):
        pet.read_petlink(cut, header=petlink_dir / "PET_ACQ_small.l.hdr")
    with pytest.raises(offhost.InvalidArgumentError, match="no Interfile header"):
        pet.read_petlink(cut)


def test_scanner_properties() -> None:
    s = pet.Scanner("mmr")
    assert s.name == "mmr" and s.span == 1 and s.ssrb_span == 121
    r = s.with_span("ssrb")
    assert r.span == 121 and r.sinograms == 127 and r.sinogram_shape == (127, 252, 344)
    assert s.with_span(11) == pet.Scanner("mmr").with_span(11)
    assert "16 rings x 256 detectors" in repr(pet.Scanner("demo"))
