//! An action export (a pipeline as a disk) driven by an nbdsh script, as a host program
//! would: find the addresses in the descriptor, start a channel, read data, read status,
//! stop; poll-again and waiting reads; a new pipeline written into the control range.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

mod common;
use common::Reaped;

const PIPELINE: &str = "\
# endless tone, mu-law encoded, to the host; and an echo from host-in to host-out
tone rate=8000 channels=1 >pcm:adc(8,4096)
mulaw <pcm >law:law(8,2048)
host-out name=speech <law
host-in name=in >q:inq(8,4096)
host-out name=echo <q
";

const SCRIPT: &str = r#"
import struct
B = 4096
desc = h.pread(B, 0).rstrip(b"\0").decode()
chan = {}
for line in desc.splitlines():
    f = line.split()
    if f[0] == "channel":
        chan[f[3]] = (f[2], int(f[4]))
assert desc.startswith("offhost-actions 1"), desc
assert set(chan) == {"speech", "echo", "in"}, desc
def status(name):
    return h.pread(B, (chan[name][1] + 2) * B).rstrip(b"\0").decode()
def record(name, rel, n=65536):
    b = h.pread(n, (chan[name][1] + rel) * B)
    assert b[:4] == b"OHDA", b[:16]
    st, cnt = struct.unpack("<II", b[4:12])
    return st, b[16:16 + cnt]
DATA, WAIT, POLL = 16, 1024, 2048
assert "state idle" in status("speech"), status("speech")
assert record("speech", DATA)[0] == 3          # not started
h.pread(B, chan["speech"][1] * B)              # start
assert "state started" in status("speech")
got = b""
for _ in range(100):
    st, d = record("speech", WAIT)
    assert st == 0, st
    got += d
    if len(got) >= 16000:
        break
assert len(got) >= 16000
# mu-law of a sine is not constant
assert len(set(got)) > 10
# the echo channel: nothing there yet, so the poll address answers "poll again"
h.pread(B, chan["echo"][1] * B)
h.pread(B, chan["in"][1] * B)
assert record("echo", POLL)[0] == 1
h.pwrite(b"hello engine", (chan["in"][1] + DATA) * B)
st, d = record("echo", WAIT)
assert (st, d) == (0, b"hello engine"), (st, d)
assert "bytes 12" in status("in"), status("in")
# stop the tone: what was produced can still be read, then end of stream
h.pread(B, (chan["speech"][1] + 1) * B)
ended = False
for _ in range(10000):
    st, d = record("speech", WAIT)
    if st == 2:
        ended = True
        break
    assert st == 0, st
assert ended
assert "state ended" in status("speech"), status("speech")
print("first pipeline ok")
# a bad description is refused
try:
    h.pwrite(b"nosuchtask >x\n", 16 * B)
    raise AssertionError("bad pipeline accepted")
except nbd.Error as e:
    assert e.errno == "EINVAL", e
# a new pipeline written into the control range starts at once
h.pwrite(b"fill bytes=5000 value=7 >f:fl(2,4096)\nhost-out name=sevens <f\n", 16 * B)
desc = h.pread(B, 0).rstrip(b"\0").decode()
assert "channel 0 out sevens 64" in desc, desc
h.pread(B, 64 * B)
total = b""
for _ in range(100):
    b = h.pread(65536, (64 + DATA) * B)
    st, cnt = struct.unpack("<II", b[4:12])
    if st == 2:
        break
    total += b[16:16 + cnt]
assert total == bytes([7]) * 5000, len(total)
assert h.pread(B, 1 * B).startswith(b"pipeline ")
print("second pipeline ok")
"#;

#[test]
fn nbdsh_drives_an_action_export() {
    let dir = tempfile::tempdir().unwrap();
    let ion = dir.path().join("p.ion");
    std::fs::write(&ion, PIPELINE).unwrap();
    let sock = dir.path().join("s.sock");
    let found = Command::new("sh")
        .args(["-c", "command -v nbdsh"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "nbdsh is required: install libnbd-bin and python3-libnbd"
    );
    let mut server = Reaped(
        Command::new(env!("CARGO_BIN_EXE_offhost"))
            .args(["nbd", "--listen"])
            .arg(format!("unix:{}", sock.display()))
            .arg("--export")
            .arg(format!("act=actions:{},wait=10s", ion.display()))
            .arg("--allow-control")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.starts_with("listening on"), "{line:?}");
    let path = std::env::var("PATH").unwrap_or_default();
    let out = Command::new("nbdsh")
        .env("PATH", format!("/usr/bin:/bin:{path}"))
        .arg("-u")
        .arg(format!("nbd+unix:///act?socket={}", sock.display()))
        .arg("-c")
        .arg(SCRIPT)
        .output()
        .unwrap();
    drop(server);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("second pipeline ok"),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
