"""offhost.Engine and its pipelines, embedded and on a daemon (`offhost engine`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import offhost

ECHO = """
host-in name=in >raw:buf(8,4096)
crc32c <raw >checked
host-out name=out <checked
"""

TONE = """
tone seconds=0.5 >stereo:audio(8,4096)
mix <stereo >mono:pcm(8,4096)
mulaw <mono >ulaw:law(8,2048)
host-out name=speech <ulaw
"""


@pytest.fixture(params=["embedded", "daemon"])
def engine(request, tmp_path: Path) -> offhost.Engine:
    if request.param == "embedded":
        return offhost.Engine(workers=2)
    return offhost.Engine(request.getfixturevalue("daemon_url"))


def test_send_recv_through_a_pipeline(engine: offhost.Engine) -> None:
    p = engine.submit(ECHO)
    assert p.inputs == ["in"] and p.outputs == ["out"]
    assert (p.id is None) == (engine.url == "embedded")
    data = [bytes([i]) * (100 + i) for i in range(20)]
    for d in data:
        p.send("in", d)
    p.close_input("in")
    got = b"".join(p.output("out"))
    assert got == b"".join(data)
    stats = p.wait(timeout=60)
    assert stats["finished"] is True
    assert [t["name"] for t in stats["tasks"]] == ["host-in", "crc32c", "host-out"]
    assert p.status()["state"] == "finished"


def test_recv_one_buffer_at_a_time_and_the_end(engine: offhost.Engine) -> None:
    p = engine.submit(TONE)
    total = 0
    while (buf := p.recv("speech", timeout=60)) is not None:
        total += len(buf)
    assert total == 22050  # 0.5 s at 44.1 kHz, one byte per sample
    assert p.recv("speech", timeout=60) is None
    assert p.wait(timeout=60)["finished"]


def test_status_stop_and_wait(engine: offhost.Engine) -> None:
    p = engine.submit("tone seconds=100000 >a:p(4,4096)\nnull <a\n")
    st = p.status()
    assert st["state"] == "running" and set(st) >= {"state", "stats", "error"}
    with pytest.raises(offhost.TimeoutError):
        p.wait(timeout=0.2)
    p.stop()
    stats = p.wait(timeout=60)
    assert stats["finished"]
    assert p.status()["state"] == "finished"


def test_a_failing_task_is_task_failed(engine: offhost.Engine, tmp_path: Path) -> None:
    # A file that cannot be created (a directory is in the way) fails the task when it runs.
    # The daemon's pipelines see files beneath its --files directory (tmp_path) by relative
    # paths only; the embedded engine is the caller's own and takes any path.
    (tmp_path / "taken").mkdir()
    path = "taken" if engine.url != "embedded" else f"{tmp_path}/taken"
    p = engine.submit(f"tone seconds=0.1 >a:p(4,4096)\nfile path={path} <a\n")
    with pytest.raises(offhost.TaskFailedError, match=r"task 'file' \(line 2\) failed: .*taken") as e:
        p.wait(timeout=60)
    assert e.value.status["state"] == "failed"
    assert "taken" in e.value.status["error"]


def test_bad_pipelines_and_names(engine: offhost.Engine) -> None:
    cls = offhost.PipelineError if engine.url == "embedded" else offhost.EngineError
    with pytest.raises(cls, match=r"line 2, column 1: unknown task 'fitler'"):
        engine.submit("tone seconds=1 >a\nfitler <a\n")
    p = engine.submit(ECHO)
    with pytest.raises(offhost.NoChannelError, match=r"no host-in channel \"nope\" \(it has: in\)") as e:
        p.send("nope", b"x")
    assert isinstance(e.value, LookupError)
    with pytest.raises(offhost.NoChannelError, match="host-out"):
        p.recv("in", timeout=1)
    with pytest.raises(ValueError, match='expected "in" or "out"'):
        p.attach("sideways", "in")
    p.close_input("in")
    with pytest.raises(offhost.ClosedError, match="closed"):
        p.send("in", b"late")
    p.wait(timeout=60)


def test_a_pipeline_over_its_budget_names_the_limit(engine: offhost.Engine) -> None:
    cls = offhost.PipelineError if engine.url == "embedded" else offhost.EngineError
    with pytest.raises(cls, match="over the limit max_buffers of 65536 buffers") as e:
        engine.submit("fill bytes=1k >a:p(100000,1)\nnull <a\n")
    if engine.url == "embedded":
        assert (e.value.limit, e.value.limit_value) == ("max_buffers", 65536)
    else:
        # The daemon's text: the limit's id, and the flag of the command that serves it.
        assert e.value.limit is None
        assert "offhost engine --max-buffers" in str(e.value)


def test_a_daemon_pipeline_submitted_under_a_name(daemon_url: str) -> None:
    e = offhost.Engine(daemon_url)
    p = e.submit(ECHO, name="py-echo")
    with pytest.raises(offhost.EngineError, match=f'"py-echo" is taken by running pipeline {p.id}'):
        e.submit(ECHO, name="py-echo")
    with pytest.raises(offhost.EngineError, match="must start with a letter"):
        e.submit(ECHO, name="9lives")
    p.close_input("in")
    p.wait(timeout=60)
    # Once it has finished, the name is free for the next.
    q = e.submit(ECHO, name="py-echo")
    assert q.id != p.id
    q.close_input("in")
    q.wait(timeout=60)
    with pytest.raises(offhost.InvalidArgumentError, match="for an engine daemon"):
        offhost.Engine().submit(ECHO, name="py-echo")


def test_a_detached_pipeline_outlives_its_engine_handle(daemon_url: str, offhost_bin: Path) -> None:
    import gc
    import json
    import time

    from conftest import run_cli

    e = offhost.Engine(daemon_url)
    attached = e.submit(ECHO)
    detached = e.submit(ECHO, detach=True, lifetime=600)
    assert attached.status()["keep"] == {"by": "submitter", "stops_in_s": pytest.approx(86400, abs=60)}
    keep = detached.status()["keep"]
    assert keep["by"] == "detached" and 590 < keep["stops_in_s"] <= 600
    ids = (attached.id, detached.id)
    del e, attached, detached
    gc.collect()
    # A new handle: the detached pipeline runs on; the attached one is stopped once its
    # submitter's session has gone and the grace (5 s) has passed.
    other = offhost.Engine(daemon_url)
    deadline = time.monotonic() + 30
    states = {}
    while time.monotonic() < deadline:
        listing = run_cli(offhost_bin, "submit", "--engine", daemon_url, "--list", "--json")
        listed = json.loads(listing)["pipelines"]
        states = {p["id"]: p for p in listed}
        if states[ids[0]]["state"] != "running":
            break
        time.sleep(0.2)
    assert states[ids[0]]["state"] == "finished", states
    assert states[ids[1]]["state"] == "running", states
    assert states[ids[1]]["keep"]["by"] == "detached"
    with pytest.raises(ValueError, match="detached"):
        other.submit(ECHO, lifetime=5)
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="above zero"):
            other.submit(ECHO, detach=True, lifetime=bad)
    with pytest.raises(offhost.InvalidArgumentError, match="for an engine daemon"):
        offhost.Engine().submit(ECHO, detach=True)


def test_a_path_is_read_as_pipeline_text(tmp_path: Path) -> None:
    f = tmp_path / "tone.ion"
    f.write_text(TONE)
    p = offhost.Engine().submit(f)
    assert sum(len(b) for b in p.output("speech")) == 22050
    with pytest.raises(FileNotFoundError, match="missing.ion"):
        offhost.Engine().submit(tmp_path / "missing.ion")


def test_wait_closes_unused_inputs_and_discards_unread_outputs() -> None:
    p = offhost.Engine().submit(ECHO)
    # Nothing sent and nothing read: wait ends the input's stream, so the pipeline ends.
    assert p.wait(timeout=60)["finished"]
    assert p.recv("out", timeout=1) is None


def test_a_pipeline_as_a_context_manager_stops_it() -> None:
    with offhost.Engine().submit("tone seconds=100000 >a:p(4,4096)\nnull <a\n") as p:
        assert p.status()["state"] == "running"
    assert p.status()["state"] == "finished"


def test_an_unreachable_daemon_is_a_transport_error(tmp_path: Path) -> None:
    with pytest.raises(offhost.TransportError):
        offhost.Engine(f"unix:{tmp_path}/no-engine.sock")
    with pytest.raises(ValueError, match="embedded engine only"):
        offhost.Engine(f"unix:{tmp_path}/x.sock", workers=2)


def test_a_daemon_pipeline_touches_no_file_outside_its_directory(
    daemon_url: str, tmp_path: Path
) -> None:
    e = offhost.Engine(daemon_url)
    for path in ("/etc/passwd", "../outside", f"{tmp_path}/x"):
        with pytest.raises(offhost.EngineError, match=r"line 1, column \d+: task 'file': file access refused"):
            e.submit(f"file path={path} >a\nnull <a\n")


def test_a_module_added_to_the_engine_runs_as_wasm_module_name(
    engine: offhost.Engine, repo: Path
) -> None:
    """`Engine.add_module`: a WebAssembly module (examples/wasm's pass-through, built by
    scripts/test.d/15-wasm.sh) run by name, embedded and on a daemon that was sent it (the
    daemon grants files beneath another directory only); the bytes come back unchanged."""
    target = Path(os.environ.get("OFFHOST_TARGET", repo / "target"))
    module = target / "wasm-examples" / "pass.wasm"
    assert module.exists(), f"{module}: run examples/wasm/build.sh {module.parent}"
    engine.add_module("pass", module)
    p = engine.submit(
        "host-in name=in >a:p(8,4096)\nwasm module=pass <a >b:q(8,4096)\nhost-out name=out <b\n"
    )
    data = [bytes([i]) * (1000 + i) for i in range(20)]
    for d in data:
        p.send("in", d)
    p.close_input("in")
    assert b"".join(p.output("out")) == b"".join(data)
    assert p.wait(timeout=60)["finished"] is True
    cls = offhost.PipelineError if engine.url == "embedded" else offhost.EngineError
    with pytest.raises(cls, match=r"line 2.*nowhere"):
        engine.submit("host-in name=in >a\nwasm module=nowhere <a >b\nhost-out name=out <b\n")


def test_hooks_added_from_python_run_on_the_queues_that_name_them(daemon_url: str) -> None:
    """`Engine.add_put_hook` and `add_get_hook`: a put hook sees each buffer that lands on an
    empty queue; a get hook feeds a queue no task writes until it returns None (the paper's
    status queue); a hook that raises is reported and the pipeline runs on; a daemon refuses
    hooks (it cannot call this process)."""
    engine = offhost.Engine(workers=1)
    kicked: list[str] = []
    engine.add_put_hook("kick", kicked.append)
    left = [b"one", b"two", b"three"]
    engine.add_get_hook("feed", lambda q: left.pop(0) if left else None)
    p = engine.submit(
        "host-in name=in >a:p(4,64)[put=kick]\nnull <a\n"
        "count <s[get=feed] >b\nhost-out name=out <b\n"
    )
    for d in (b"x", b"y"):
        p.send("in", d)
    p.close_input("in")
    assert list(p.output("out")) == [b"one", b"two", b"three"]
    p.wait(timeout=60)
    assert kicked and set(kicked) == {"a"}

    def bad(queue: str) -> bytes:
        raise RuntimeError(f"no status for {queue}")

    engine.add_get_hook("bad", bad)
    seen: list[str] = []
    import sys

    old = sys.unraisablehook
    sys.unraisablehook = lambda u: seen.append(str(u.exc_value))
    try:
        p = engine.submit("count <s[get=bad] >b\nhost-out name=out <b\n")
        assert list(p.output("out")) == []
        p.wait(timeout=60)
    finally:
        sys.unraisablehook = old
    assert seen == ["no status for s"]
    with pytest.raises(offhost.PipelineError, match=r"unknown put hook 'nope'; known: kick, log"):
        engine.submit("host-in name=in >a[put=nope]\nnull <a\n")
    with pytest.raises(TypeError, match="callable"):
        engine.add_put_hook("x", 3)  # type: ignore[arg-type]
    with pytest.raises(offhost.Error, match="embedded engine"):
        offhost.Engine(daemon_url).add_put_hook("kick", print)
