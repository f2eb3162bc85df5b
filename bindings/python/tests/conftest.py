"""Fixtures: the repository, the offhost binary, echo engines and engine daemons in their own
processes, the real PETLINK data, and the C examples built by the test hook."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))


def offhost_path() -> Path:
    """The offhost binary: $OFFHOST_BIN, or the debug build of the workspace."""
    p = Path(os.environ.get("OFFHOST_BIN", TARGET / "debug" / "offhost"))
    if not p.exists():
        pytest.fail(f"{p} not found: build it with `cargo build -p offhost` (scripts/test.d/40-bindings.sh does)")
    return p


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture(scope="session")
def offhost_bin() -> Path:
    return offhost_path()


def wait_for_socket(path: Path, proc: subprocess.Popen[bytes], what: str) -> None:
    """Waits until a Unix socket at `path` accepts connections (bounded: 20 s)."""
    for _ in range(400):
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        if path.exists():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(path))
                return
            except OSError:
                pass
            finally:
                s.close()
        time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on {path}")


class Process:
    """A child process stopped (and reaped) at the end of the test."""

    def __init__(self, args: list[str], cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            args, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=30)


@pytest.fixture
def spawn() -> Iterator[callable]:
    procs: list[Process] = []

    def start(args: list[str], cwd: Path | None = None) -> subprocess.Popen[bytes]:
        p = Process([str(a) for a in args], cwd)
        procs.append(p)
        return p.proc

    yield start
    for p in procs:
        p.stop()


@pytest.fixture
def echo_url(tmp_path: Path, offhost_bin: Path, spawn) -> str:
    """`offhost echo` (the Rust echo engine) in its own process, over shared memory."""
    sock = tmp_path / "echo.sock"
    proc = spawn([offhost_bin, "echo", "--listen", f"shm:{sock}"])
    wait_for_socket(sock, proc, "offhost echo")
    return f"shm:{sock}"


@pytest.fixture
def unix_echo_url(tmp_path: Path, offhost_bin: Path, spawn) -> str:
    """`offhost echo` over a Unix socket (no loans there)."""
    sock = tmp_path / "echo-unix.sock"
    proc = spawn([offhost_bin, "echo", "--listen", f"unix:{sock}"])
    wait_for_socket(sock, proc, "offhost echo")
    return f"unix:{sock}"


@pytest.fixture
def daemon_url(tmp_path: Path, offhost_bin: Path, spawn) -> str:
    """`offhost engine` (the engine daemon) in its own process; its pipelines open files beneath
    `tmp_path` only (`--files`)."""
    sock = tmp_path / "engine.sock"
    proc = spawn(
        [offhost_bin, "engine", "--listen", f"unix:{sock}", "--files", str(tmp_path)], cwd=tmp_path
    )
    wait_for_socket(sock, proc, "offhost engine")
    return f"unix:{sock}"


@pytest.fixture(scope="session")
def petlink_dir() -> Path:
    """The real Siemens mMR sample: the repository's data/petlink, else ../shared/data/petlink
    ($OFFHOST_PETLINK_DIR first, for a checkout with shared/ elsewhere)."""
    env = [Path(os.environ["OFFHOST_PETLINK_DIR"])] if "OFFHOST_PETLINK_DIR" in os.environ else []
    for d in (*env, REPO / "data" / "petlink", REPO.parent / "shared" / "data" / "petlink"):
        if (d / "small_listmode_file.l").exists():
            return d
    pytest.fail("the PETLINK sample is in neither data/petlink nor ../shared/data/petlink")


@pytest.fixture(scope="session")
def c_examples() -> Path:
    """The C examples, built with cc by scripts/test.d/40-bindings.sh ($OFFHOST_C_EXAMPLES)."""
    d = Path(os.environ.get("OFFHOST_C_EXAMPLES", TARGET / "c-examples"))
    if not (d / "relay").exists():
        pytest.fail(f"{d}/relay not found: run scripts/test.d/40-bindings.sh to build the C examples")
    return d


def run_cli(offhost_bin: Path, *args: object, cwd: Path | None = None) -> str:
    """Runs the offhost binary and returns its standard output (fails on a non-zero exit)."""
    r = subprocess.run(
        [str(offhost_bin), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, f"offhost {args} failed: {r.stderr}"
    return r.stdout


def have_cc() -> bool:
    return shutil.which("cc") is not None
