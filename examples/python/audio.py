"""The seed's audio chain from Python: examples/audio.ion on the embedded engine, its
8 kHz mu-law output as a numpy array.

    python examples/python/audio.py                # prints the result's level and its tones
    python examples/python/audio.py --plot a.png   # and plots its first 20 ms (matplotlib)

The pipeline (a stereo tone mixed to mono, rate-converted to 8 kHz, mu-law encoded) hands
its bytes to the host channel `host`; here they are decoded with numpy (ITU-T G.711) and
their spectrum shows the source's two tones. The bytes are those `offhost run
examples/audio.ion` writes to host.out. The pipeline also writes loudspeaker.wav in the
current directory.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import offhost

PIPELINE = Path(__file__).resolve().parents[1] / "audio.ion"


def mulaw_decode(codes: np.ndarray) -> np.ndarray:
    """G.711 mu-law bytes to 16-bit linear samples (as int32)."""
    u = ~codes.astype(np.int32) & 0xFF
    magnitude = (((u & 0x0F) << 3) + 0x84) << ((u >> 4) & 0x07)
    return np.where(u & 0x80, 0x84 - magnitude, magnitude - 0x84)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline", type=Path, default=PIPELINE, help="the audio pipeline (.ion)")
    ap.add_argument("--plot", type=Path, help="save a plot of the first 20 ms here")
    args = ap.parse_args()

    out = bytearray()
    stats = offhost.run(args.pipeline, outputs={"host": out})
    codes = np.frombuffer(out, dtype=np.uint8)
    pcm = mulaw_decode(codes)
    rate = 8000
    spectrum = np.abs(np.fft.rfft(pcm * np.hanning(len(pcm))))
    freqs = np.fft.rfftfreq(len(pcm), 1 / rate)
    peaks = sorted(freqs[np.argsort(spectrum)[-2:]].round().astype(int).tolist())
    rms = float(np.sqrt(np.mean(pcm.astype(np.float64) ** 2)))
    print(f"{len(codes)} mu-law samples ({len(codes) / rate:.2f} s at {rate} Hz), RMS {rms:.0f}, tones at {peaks} Hz")
    busy = sum(t["busy_ns"] for t in stats["tasks"]) / 1e6
    print(f"{len(stats['tasks'])} tasks, {busy:.1f} ms busy in {stats['elapsed_s'] * 1e3:.1f} ms")

    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        n = rate // 50
        fig, ax = plt.subplots(figsize=(8, 3))
        ax.plot(np.arange(n) / rate * 1e3, pcm[:n])
        ax.set_xlabel("ms")
        ax.set_ylabel("sample")
        ax.set_title("audio chain output (decoded mu-law, 8 kHz)")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=100)
        print(f"plot -> {args.plot}")


if __name__ == "__main__":
    main()
