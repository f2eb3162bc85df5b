"""A live PET acquisition from Python: the demo scan runs on the embedded engine and every
sinogram snapshot arrives here as a numpy array while the scan goes on; each is
reconstructed and saved as a matplotlib figure.

    python examples/python/live_pet.py                        # figures in live_pet/
    python examples/python/live_pet.py --events 4000000 --snapshot 1000000 --out figs

The pipeline is examples/pet.ion's, with the sinograms handed to the host instead of the
`recon` task: two Monte Carlo sources of the NEMA IEC body phantom at a clinical count rate,
energy windows, a sinogram task sending a snapshot every --snapshot events (and the final
sinogram at the end). Each figure shows the sum of the sinograms (views x radial bins),
the central transaxial slice of the filtered-backprojection image, and a coronal
maximum-intensity projection.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import offhost  # noqa: E402
import offhost.pet as pet  # noqa: E402


def pipeline(events: int, snapshot: int, rate: float, pace: float) -> str:
    half = events // 2
    return f"""
pet-sim scanner=demo phantom=nema events={half} rate={rate / 2} pace={pace / 2} seed=1 >events1:lm1(16,64k)
pet-sim scanner=demo phantom=nema events={events - half} rate={rate / 2} pace={pace / 2} seed=2 >events2:lm2(16,64k)
energy-window lower=435 upper=650 <events1 >windowed1
energy-window lower=435 upper=650 <events2 >windowed2
sinogram scanner=demo span=1 snapshot={snapshot} <windowed1 <windowed2 >sinograms
host-out name=sinograms <sinograms
"""


def figure(sino: pet.Sinogram, number: int, elapsed: float, path: Path) -> None:
    counts = sino.counts
    s = sino.scanner
    img = pet.reconstruct(sino, method="fbp-hann")
    mid = img.data.shape[0] // 2
    fig, axes = plt.subplots(1, 3, figsize=(12, 4.2))
    axes[0].imshow(counts.sum(axis=0), cmap="gray_r", aspect="auto")
    axes[0].set_title(f"{s.sinograms} sinograms summed: {int(counts.sum()):,} net counts")
    axes[0].set_xlabel("radial bin")
    axes[0].set_ylabel("view")
    axes[1].imshow(np.clip(img.data[mid], 0, None), cmap="hot")
    axes[1].set_title(f"FBP, slice {mid} of {img.data.shape[0]}")
    axes[1].axis("off")
    mip = np.clip(img.data.max(axis=1), 0, None)
    axes[2].imshow(mip, cmap="hot", aspect=img.slice_mm / img.pixel_mm)
    axes[2].set_title("coronal MIP")
    axes[2].axis("off")
    kind = "final" if sino.final else "snapshot"
    fig.suptitle(f"{kind} {number} at {elapsed:.2f} s (demo scanner, NEMA IEC phantom)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=4_000_000, help="events of the scan (both sources)")
    ap.add_argument("--snapshot", type=int, default=1_000_000, help="events between snapshots")
    ap.add_argument("--rate", type=float, default=4.0e6, help="count rate, events per second of scan")
    ap.add_argument(
        "--pace", type=float, default=None,
        help="events per wall-clock second (default: the count rate, a scan in real time; 0: full speed)",
    )
    ap.add_argument("--out", type=Path, default=Path("live_pet"), help="directory for the figures")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    t0 = time.monotonic()
    pace = args.rate if args.pace is None else args.pace
    p = offhost.Engine().submit(pipeline(args.events, args.snapshot, args.rate, pace))
    n = 0
    for buf in p.output("sinograms"):
        at, state = time.monotonic() - t0, p.status()["state"]
        sino = pet.decode_sinogram(buf)
        n += 1
        path = args.out / f"snapshot_{n:03d}.png"
        figure(sino, n, at, path)
        kind = "final sinogram" if sino.final else "snapshot"
        print(f"{kind} {n} at {at:.2f} s (scan {state}): {int(sino.counts.sum()):,} net counts, "
              f"array {sino.counts.shape} {sino.counts.dtype} -> {path}", flush=True)
    stats = p.wait()
    sim = [t for t in stats["tasks"] if t["name"] == "pet-sim"]
    print(f"{n} sinograms in {stats['elapsed_s']:.2f} s; sources: {sim[0]['report']}")


if __name__ == "__main__":
    main()
