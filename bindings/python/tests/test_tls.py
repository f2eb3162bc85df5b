"""Sessions and engine daemons over tls: with client certificates, as the Rust clients."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import offhost


def certs(offhost_bin: Path, d: Path) -> Path:
    subprocess.run([str(offhost_bin), "certs", str(d)], check=True, capture_output=True, timeout=60)
    return d


def listening(proc: subprocess.Popen[bytes]) -> str:
    """The tls: URL a server says it listens on (its first lines of standard error)."""
    for _ in range(20):
        line = proc.stderr.readline().decode()
        for w in line.split():
            if w.startswith("tls:"):
                return w
        if not line:
            break
    pytest.fail("the server did not say where it listens")


def test_a_tls_session_echoes_and_refuses_without_a_good_certificate(
    tmp_path: Path, offhost_bin: Path, spawn
) -> None:
    pki = certs(offhost_bin, tmp_path / "pki")
    proc = spawn([offhost_bin, "echo", "--listen", "tls:127.0.0.1:0", "--tls-certificates", pki])
    url = listening(proc)
    s = offhost.Session(url, tls_certificates=pki)
    assert s.transport == "tls"
    ch = s.channel("c")
    ch.send(b"over tls")
    assert ch.recv(timeout=10) == b"over tls"
    # No directory: the client cannot even start; another CA's: the server turns it away.
    with pytest.raises(offhost.Error, match="the setting tls_certificates") as refused:
        offhost.Session(url)
    assert refused.value.setting == "tls_certificates", "the keyword argument that allows it"
    assert "--" not in str(refused.value), "no command-line flag in a Python error"
    other = certs(offhost_bin, tmp_path / "other")
    with pytest.raises(offhost.Error, match="not admitted|certificate"):
        offhost.Session(url, tls_certificates=other)


def test_an_engine_daemon_over_tls(tmp_path: Path, offhost_bin: Path, spawn) -> None:
    pki = certs(offhost_bin, tmp_path / "pki")
    proc = spawn([offhost_bin, "engine", "--listen", "tls:127.0.0.1:0", "--tls-certificates", pki])
    url = listening(proc)
    e = offhost.Engine(url, tls_certificates=pki)
    p = e.submit("host-in name=in >a:p(4,4096)\nhost-out name=out <a\n")
    p.send("in", b"through a daemon over tls")
    assert p.recv("out", timeout=10) == b"through a daemon over tls"
    p.stop()
    with pytest.raises(ValueError, match="tls_certificates"):
        offhost.Engine(tls_certificates=pki)
