"""The Python examples run and produce what they promise."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import matplotlib.image


def run_example(repo: Path, name: str, *args: str, cwd: Path) -> str:
    r = subprocess.run(
        [sys.executable, str(repo / "examples" / "python" / name), *args],
        cwd=cwd, capture_output=True, text=True, timeout=600,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_audio_example(repo: Path, tmp_path: Path) -> None:
    out = run_example(repo, "audio.py", "--plot", "audio.png", cwd=tmp_path)
    assert "tones at [440, 660] Hz" in out
    assert matplotlib.image.imread(tmp_path / "audio.png").ndim == 3
    assert (tmp_path / "loudspeaker.wav").stat().st_size > 800_000


def test_live_pet_example(repo: Path, tmp_path: Path) -> None:
    out = run_example(
        repo, "live_pet.py", "--events", "600000", "--snapshot", "200000", "--pace", "0", "--out", "figs",
        cwd=tmp_path,
    )
    lines = [l for l in out.splitlines() if "net counts" in l]
    counts = [int(re.search(r"([\d,]+) net counts", l)[1].replace(",", "")) for l in lines]
    assert len(lines) >= 3 and lines[-1].startswith("final sinogram")
    assert counts == sorted(counts) and counts[0] > 0
    assert all("array (256, 128, 128) int32" in l for l in lines)
    pngs = sorted((tmp_path / "figs").glob("snapshot_*.png"))
    assert len(pngs) == len(lines)
    for p in pngs:
        img = matplotlib.image.imread(p)
        assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 300
