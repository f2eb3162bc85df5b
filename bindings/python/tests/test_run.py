"""offhost.run: pipelines with their host channels fed from and drained into Python objects,
and outputs identical to the CLI's."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

import offhost
from conftest import run_cli

CRC = """
host-in name=in >raw:buf(8,4096)
crc32c <raw >checked
host-out name=out <checked
"""


def test_the_audio_chain_gives_the_clis_bytes(repo: Path, offhost_bin: Path, tmp_path: Path, monkeypatch) -> None:
    cli_dir, py_dir = tmp_path / "cli", tmp_path / "py"
    cli_dir.mkdir()
    py_dir.mkdir()
    run_cli(offhost_bin, "run", "-q", repo / "examples" / "audio.ion", "--out", "host=host.out", cwd=cli_dir)
    monkeypatch.chdir(py_dir)
    out = bytearray()
    stats = offhost.run(repo / "examples" / "audio.ion", outputs={"host": out})
    expected = (cli_dir / "host.out").read_bytes()
    assert 79_000 < len(expected) < 81_000  # 10 s at 8 kHz, one mu-law byte per sample
    assert bytes(out) == expected
    assert (py_dir / "loudspeaker.wav").read_bytes() == (cli_dir / "loudspeaker.wav").read_bytes()
    assert stats["finished"] and {t["name"] for t in stats["tasks"]} >= {"tone", "mix", "rate", "mulaw", "host-out"}


def test_inputs_of_every_kind(tmp_path: Path) -> None:
    data = bytes(range(256)) * 1000
    want = data
    for src in (
        data,
        bytearray(data),
        memoryview(data),
        np.frombuffer(data, dtype=np.uint8),
        [data[i : i + 1000] for i in range(0, len(data), 1000)],
        (data[i : i + 7777] for i in range(0, len(data), 7777)),
        io.BytesIO(data),
    ):
        out = bytearray()
        offhost.run(CRC, inputs={"in": src}, outputs={"out": out})
        assert bytes(out) == want, type(src)


def test_outputs_of_every_kind(tmp_path: Path) -> None:
    data = b"z" * 50_000
    chunks: list[bytes] = []
    offhost.run(CRC, inputs={"in": data}, outputs={"out": chunks})
    assert b"".join(chunks) == data and all(isinstance(c, bytes) for c in chunks)
    seen = []
    offhost.run(CRC, inputs={"in": data}, outputs={"out": seen.append})
    assert b"".join(seen) == data
    with open(tmp_path / "out.bin", "wb") as f:
        offhost.run(CRC, inputs={"in": data}, outputs={"out": f})
    assert (tmp_path / "out.bin").read_bytes() == data
    # An output nobody names is discarded; an input nobody names ends at once.
    assert offhost.run(CRC)["finished"]


def test_errors_of_run(tmp_path: Path) -> None:
    with pytest.raises(offhost.NoChannelError, match="no host-in channel \"x\""):
        offhost.run(CRC, inputs={"x": b""})
    with pytest.raises(offhost.NoChannelError, match="no host-out channel \"x\""):
        offhost.run(CRC, outputs={"x": []})
    with pytest.raises(TypeError, match="output 'out'"):
        offhost.run(CRC, outputs={"out": 42})
    with pytest.raises(TypeError, match="input 'in'"):
        offhost.run(CRC, inputs={"in": 42})
    with pytest.raises(offhost.PipelineError, match="column"):
        offhost.run("tone >a\nmulaw <b\n")
    with pytest.raises(offhost.TaskFailedError, match="task 'file'"):
        offhost.run(f"tone seconds=0.1 >a:p(4,4096)\nfile path={tmp_path}/none/x <a\n")


def test_run_on_a_daemon(daemon_url: str) -> None:
    out = bytearray()
    stats = offhost.run(CRC, inputs={"in": b"abc" * 1000}, outputs={"out": out}, engine=offhost.Engine(daemon_url))
    assert bytes(out) == b"abc" * 1000
    assert stats["finished"]
