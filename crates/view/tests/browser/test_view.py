"""The live view in a real browser: Playwright drives Debian's chromium (headless) against the
real `offhost` binary (`scripts/test.d/45-view.sh` runs it).

- a running PET pipeline: the page shows every task, its counters advance between two looks,
  the sinogram and the image appear and the image changes; the JSON endpoint's counters grow
  a second apart; once it has ended the page shows its final numbers;
- a daemon (`offhost engine --view`): the page lists its pipelines and shows a failed one's
  error on the task that failed.

Environment: OFFHOST_BIN (the binary), OFFHOST_ROOT (the repository), OFFHOST_SHOTS (where
screenshots go), CHROMIUM (the browser, default /usr/bin/chromium).
"""

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

BIN = os.environ.get("OFFHOST_BIN", "target/debug/offhost")
ROOT = Path(os.environ.get("OFFHOST_ROOT", "."))
SHOTS = Path(os.environ.get("OFFHOST_SHOTS", "target/view-shots"))
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.load(r)


def wait_for(url, until=lambda _: True, deadline_s=30):
    """The JSON at `url` once it answers with something `until` accepts."""
    end = time.time() + deadline_s
    got = None
    while time.time() < end:
        try:
            got = get_json(url)
            if until(got):
                return got
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer as wanted in {deadline_s} s (last: {got})")


@pytest.fixture(scope="module")
def browser():
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


def pet_text(events):
    """examples/pet.ion with longer sources (paced: `events / 2 M/s` seconds of scan), and
    the image beneath the run's directory."""
    text = (ROOT / "examples/pet.ion").read_text()
    return text.replace("events=3000000", f"events={events}")


def test_a_running_pet_scan_and_its_end(browser, tmp_path):
    (tmp_path / "pet.ion").write_text(pet_text(16_000_000))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    run = subprocess.Popen(
        [BIN, "run", "-q", "--view", f"127.0.0.1:{port}", "--view-linger", "60s", "pet.ion"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The view answers while the pipeline is still being built (an empty list): wait
        # until it is listed.
        listed = wait_for(base + "/api/pipelines", until=lambda l: len(l) > 0)
        assert [p["state"] for p in listed] == ["running"]
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(base + "/")
        tasks = page.locator("svg g.task")
        expect(tasks).to_have_count(6, timeout=15_000)
        names = [tasks.nth(i).locator("text.name").text_content() for i in range(6)]
        assert names == ["pet-sim", "pet-sim", "energy-window", "energy-window", "sinogram", "recon"]
        # Counters advance between two looks, on the page and in the JSON.
        a = get_json(base + "/api/pipelines/1")["stats"]["tasks"][0]["bytes_out"]
        first = tasks.nth(0).locator("[data-counter]").text_content()
        time.sleep(1.5)
        b = get_json(base + "/api/pipelines/1")["stats"]["tasks"][0]["bytes_out"]
        assert b > a, (a, b)
        expect(tasks.nth(0).locator("[data-counter]")).not_to_have_text(first, timeout=5_000)
        # The sinogram and the image appear, and the image changes as snapshots come.
        sino = page.locator("figure img[alt=sinogram]")
        expect(sino).to_be_visible(timeout=30_000)
        image = page.locator("figure img[alt=image]")
        expect(image).to_be_visible(timeout=30_000)
        page.wait_for_function("document.querySelector('figure img[alt=image]').naturalWidth > 0")
        seq = image.get_attribute("data-seq")
        page.screenshot(path=str(SHOTS / "pet-running.png"), full_page=True)
        page.wait_for_function(
            f"document.querySelector('figure img[alt=image]').dataset.seq !== '{seq}'",
            timeout=60_000)
        # The end: the page says finished and shows the final numbers.
        expect(page.locator("#head")).to_have_attribute("data-state", "finished", timeout=120_000)
        final = get_json(base + "/api/pipelines/1")
        assert final["state"] == "finished"
        out = final["stats"]["tasks"][0]["buffers_out"]
        expect(tasks.nth(0).locator("[data-counter]")).to_contain_text("buf", timeout=5_000)
        assert all(t["done"] for t in final["stats"]["tasks"])
        assert out > 0
        assert "accepted" in (final["stats"]["tasks"][4]["report"] or "")
        expect(page.locator("svg g.task.done")).to_have_count(6, timeout=5_000)
        page.screenshot(path=str(SHOTS / "pet-finished.png"), full_page=True)
        dot = urllib.request.urlopen(base + "/api/pipelines/1/dot", timeout=10).read().decode()
        assert dot.startswith("digraph pipeline") and "cluster" in dot
    finally:
        run.terminate()
        run.wait(timeout=20)
    assert (tmp_path / "pet.png").exists()


def test_a_daemon_lists_its_pipelines_and_shows_where_one_failed(browser, tmp_path):
    sock = tmp_path / "engine.sock"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    engine = subprocess.Popen(
        [BIN, "engine", "--listen", f"unix:{sock}", "--view", f"127.0.0.1:{port}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(base + "/api/pipelines")
        # 7 bytes are no whole list-mode record: the sinogram task fails at end of stream.
        (tmp_path / "bad.ion").write_text(
            "fill bytes=7 >x\nsinogram scanner=demo <x\n")
        (tmp_path / "good.ion").write_text("fill bytes=1M >x\ncount <x\n")
        for f in ["good.ion", "bad.ion"]:
            subprocess.run([BIN, "submit", "--engine", f"unix:{sock}", f], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
        listed = get_json(base + "/api/pipelines")
        assert [(p["id"], p["state"]) for p in listed] == [(1, "finished"), (2, "failed")]
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.goto(base + "/#2")
        expect(page.locator("nav a")).to_have_count(2, timeout=15_000)
        failed = page.locator("svg g.task.failed")
        expect(failed).to_have_count(1, timeout=15_000)
        expect(failed.locator("text.name")).to_have_text("sinogram")
        expect(failed.locator("text.error")).to_contain_text("error: bad input")
        expect(page.locator("#error")).to_contain_text("unfinished record")
        page.screenshot(path=str(SHOTS / "daemon-failed.png"), full_page=True)
        page.locator("nav a[data-pipeline='1']").click()
        expect(page.locator("#head")).to_have_attribute("data-state", "finished", timeout=15_000)
        expect(page.locator("svg g.task")).to_have_count(2)
    finally:
        engine.terminate()
        engine.wait(timeout=20)


def test_the_audio_example_shows_its_levels(browser, tmp_path):
    # examples/audio.ion with an endless tone (stopped by --duration) and the loudspeaker
    # file left out, so the run lasts long enough to be watched.
    text = (ROOT / "examples/audio.ion").read_text()
    text = text.replace(" seconds=10", "").replace(
        "wav path=loudspeaker.wav rate=44100 channels=1 <speaker", "null <speaker")
    assert "level channels=2" in text and "null <speaker" in text
    (tmp_path / "audio.ion").write_text(text)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    run = subprocess.Popen(
        [BIN, "run", "-q", "--view", f"127.0.0.1:{port}", "--duration", "8s",
         "--out", "host=/dev/null", "audio.ion"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(base + "/api/pipelines")
        page = browser.new_page(viewport={"width": 1400, "height": 800})
        page.goto(base + "/")
        meters = page.locator("figure .meter")
        expect(meters).to_have_count(4, timeout=15_000)
        # A 0.5 full-scale sine: RMS -9.0 dBFS, peak -6.0 dBFS, on both channels.
        expect(meters.nth(0)).to_contain_text("ch1 rms")
        expect(meters.nth(0)).to_contain_text("-9.0 dBFS")
        expect(meters.nth(1)).to_contain_text("-6.0 dBFS")
        page.screenshot(path=str(SHOTS / "audio-levels.png"), full_page=True)
    finally:
        run.terminate()
        run.wait(timeout=20)
