"""Blocking calls release the GIL, and Ctrl-C (SIGINT) interrupts a blocking receive."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import offhost

# The child blocks in recv on a channel nobody writes to, and reports where the
# KeyboardInterrupt hit it. It installs Python's own SIGINT handler first: a process started
# in the background by a shell without job control inherits SIGINT ignored, and Python then
# leaves it ignored (CPython installs its handler only over the default disposition).
CHILD = r"""
import signal, sys, traceback
signal.signal(signal.SIGINT, signal.default_int_handler)
import offhost
s = offhost.Session(sys.argv[1])
ch = s.channel("quiet")
print("ready", flush=True)
try:
    ch.recv()  # blocks: the echo engine only answers what it is sent
except KeyboardInterrupt as e:
    frame = traceback.extract_tb(e.__traceback__)[-1]
    print("interrupted at:", frame.line, flush=True)
    sys.exit(0)
print("recv returned", flush=True)
sys.exit(1)
"""


def test_ctrl_c_interrupts_a_blocking_recv(echo_url: str, tmp_path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), echo_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # let it enter recv (the frame check below proves it did)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    assert out.strip() == "interrupted at: ch.recv()  # blocks: the echo engine only answers what it is sent"


def test_other_threads_run_while_one_blocks_in_recv(echo_url: str) -> None:
    s = offhost.Session(echo_url)
    ch = s.channel("c")
    got: list[object] = []

    def receiver() -> None:
        try:
            got.append(ch.recv(timeout=60))
        except BaseException as e:  # noqa: BLE001
            got.append(e)

    t = threading.Thread(target=receiver)
    t.start()
    # Pure Python work in this thread: impossible while the receiver held the GIL.
    counted = 0
    for _ in range(2_000_000):
        counted += 1
    assert counted == 2_000_000
    assert t.is_alive() and not got  # still blocked in recv, and we made progress meanwhile
    ch.send(b"wake up")
    t.join(timeout=60)
    assert got == [b"wake up"]


def test_other_threads_run_while_one_waits_for_a_pipeline() -> None:
    p = offhost.Engine().submit("tone seconds=100000 >a:p(4,4096)\nnull <a\n")
    done: list[object] = []
    t = threading.Thread(target=lambda: done.append(p.wait(timeout=120)))
    t.start()
    counted = sum(1 for _ in range(1_000_000))
    assert counted == 1_000_000 and t.is_alive() and not done
    p.stop()
    t.join(timeout=60)
    assert done and done[0]["finished"]
