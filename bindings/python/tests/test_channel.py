"""Sessions and channels against the Rust echo engine (`offhost echo`) in its own process."""

from __future__ import annotations

import builtins
import subprocess
from pathlib import Path

import numpy as np
import pytest

import offhost
from conftest import wait_for_socket


def test_send_recv_round_trip_over_shm(echo_url: str) -> None:
    with offhost.Session(echo_url) as s:
        assert s.transport == "shm"
        assert s.url == echo_url
        ch = s.channel("c")
        assert ch.name == "c"
        for msg in (b"x", b"hello" * 100, bytes(range(256)) * 4000):
            ch.send(msg)
            assert ch.recv(timeout=10) == msg


def test_buffer_protocol_objects_are_sent_as_their_bytes(echo_url: str) -> None:
    s = offhost.Session(echo_url)
    ch = s.channel("c")
    a = np.arange(1000, dtype=np.float64)
    ch.send(a)
    assert np.array_equal(np.frombuffer(ch.recv(timeout=10), dtype=np.float64), a)
    ch.send(bytearray(b"abc"))
    ch.send(memoryview(b"0123456789")[2:5])
    assert ch.recv(timeout=10) == b"abc"
    assert ch.recv(timeout=10) == b"234"
    with pytest.raises(TypeError):
        ch.send(42)  # type: ignore[arg-type]


def test_recv_into_fills_a_writable_buffer_and_keeps_what_does_not_fit(echo_url: str) -> None:
    s = offhost.Session(echo_url)
    ch = s.channel("c")
    ch.send(b"0123456789")
    buf = bytearray(16)
    assert ch.recv_into(buf, timeout=10) == 10
    assert bytes(buf[:10]) == b"0123456789"
    arr = np.zeros(4, dtype=np.uint8)
    ch.send(b"too long for four")
    with pytest.raises(offhost.TooLargeError, match="does not fit the buffer of 4 bytes"):
        ch.recv_into(arr, timeout=10)
    big = np.zeros(64, dtype=np.uint8)
    assert ch.recv_into(big) == 17  # the message stayed queued
    assert big[:17].tobytes() == b"too long for four"
    with pytest.raises(TypeError, match="writable"):
        ch.recv_into(b"read-only")


def test_timeouts_and_non_blocking_calls(echo_url: str) -> None:
    s = offhost.Session(echo_url)
    ch = s.channel("c")
    with pytest.raises(offhost.TimeoutError) as e:
        ch.recv(timeout=0.1)
    assert isinstance(e.value, builtins.TimeoutError)
    assert isinstance(e.value, offhost.Error)
    assert str(e.value) == "timed out"
    with pytest.raises(offhost.WouldBlockError, match="would block"):
        ch.try_recv()
    ch.try_send(b"now")
    assert ch.recv(timeout=10) == b"now"
    with pytest.raises(ValueError, match="non-negative"):
        ch.recv(timeout=-1)
    with pytest.raises(offhost.TimeoutError):
        s.accept(timeout=0.05)


def test_too_large_messages_are_refused_with_the_rust_message(echo_url: str) -> None:
    s = offhost.Session(echo_url)
    ch = s.channel("small", max_message=8, recv_buffer=1 << 16, packet_size=64)
    assert ch.options == {"max_message": 8, "recv_buffer": 65536, "packet_size": 64, "sync": False}
    with pytest.raises(offhost.TooLargeError, match="message of 9 bytes exceeds the channel maximum of 8"):
        ch.send(b"123456789")
    with pytest.raises(offhost.InvalidArgumentError, match="packet size"):
        s.channel("bad", packet_size=3)


def test_end_of_stream_ends_iteration(echo_url: str) -> None:
    s = offhost.Session(echo_url)
    ch = s.channel("c")
    for i in range(5):
        ch.send(b"%d" % i)
    ch.close()
    assert list(ch) == [b"0", b"1", b"2", b"3", b"4"]
    assert ch.recv(timeout=10) is None


def test_sync_channel_waits_for_the_peer(echo_url: str) -> None:
    s = offhost.Session(echo_url)
    ch = s.channel("sync", sync=True)
    assert ch.options["sync"] is True
    ch.send(b"rendezvous", timeout=10)
    assert ch.recv(timeout=10) == b"rendezvous"


def test_select_returns_the_ready_channel(echo_url: str, unix_echo_url: str) -> None:
    s = offhost.Session(echo_url)
    a, b = s.channel("a"), s.channel("b")
    with pytest.raises(offhost.TimeoutError):
        offhost.select([a, b], timeout=0.1)
    b.send(b"to b")
    assert offhost.select([a, b], timeout=10) is b
    assert b.recv(timeout=10) == b"to b"
    a.send(b"to a")
    assert offhost.select([a, b], timeout=10) is a
    assert a.recv(timeout=10) == b"to a"
    # A channel of another session, over another transport, in the same select.
    other = offhost.Session(unix_echo_url).channel("c")
    with pytest.raises(offhost.TimeoutError):
        offhost.select([a, other], timeout=0)
    other.send(b"to c")
    assert offhost.select([a, other], timeout=10) is other
    assert other.recv(timeout=10) == b"to c"
    with pytest.raises(offhost.InvalidArgumentError):
        offhost.select([])


def test_connect_errors_name_the_url(tmp_path: Path) -> None:
    with pytest.raises(offhost.BadUrlError, match="bad url"):
        offhost.Session("carrier-pigeon:home")
    with pytest.raises(offhost.TransportError) as e:
        offhost.Session(f"unix:{tmp_path}/nobody.sock")
    assert "nobody.sock" in str(e.value)
    assert isinstance(e.value, OSError)
    with pytest.raises(ValueError, match="shm: URLs only"):
        offhost.Session(f"unix:{tmp_path}/x.sock", mode="poll")
    with pytest.raises(ValueError, match="expected poll, block or adaptive"):
        offhost.Session(f"shm:{tmp_path}/x.sock", mode="sometimes")


def test_a_killed_peer_is_peer_gone(tmp_path: Path, offhost_bin: Path, spawn) -> None:
    sock = tmp_path / "victim.sock"
    proc = spawn([offhost_bin, "echo", "--listen", f"shm:{sock}"])
    wait_for_socket(sock, proc, "offhost echo")
    s = offhost.Session(f"shm:{sock}")
    ch = s.channel("c")
    ch.send(b"ping")
    assert ch.recv(timeout=10) == b"ping"
    proc.kill()
    proc.wait()
    with pytest.raises(offhost.PeerGoneError, match="peer is gone"):
        ch.recv(timeout=30)


def test_a_closed_session_refuses_calls(echo_url: str) -> None:
    s = offhost.Session(echo_url)
    ch = s.channel("c")
    s.close()
    with pytest.raises(offhost.ClosedError, match="session is closed"):
        ch.send(b"late")


def test_unix_and_tcp_transports(unix_echo_url: str, offhost_bin: Path, spawn) -> None:
    s = offhost.Session(unix_echo_url)
    assert s.transport == "unix"
    ch = s.channel("c")
    ch.send(b"over a socket")
    assert ch.recv(timeout=10) == b"over a socket"
    proc = spawn([offhost_bin, "echo", "--listen", "tcp:127.0.0.1:0", "--insecure"])
    line = proc.stderr.readline().decode()  # "echo: listening on tcp:127.0.0.1:PORT" or similar
    port = next((w.rsplit(":", 1)[1] for w in line.split() if w.startswith("tcp:")), None)
    if port is None:
        pytest.fail(f"offhost echo did not say where it listens: {line!r}")
    t = offhost.Session(f"tcp:127.0.0.1:{port.strip()}")
    assert t.transport == "tcp"
    c = t.channel("c")
    c.send(b"over tcp")
    assert c.recv(timeout=10) == b"over tcp"


def test_repr() -> None:
    assert "Engine" in repr(offhost.Engine())

