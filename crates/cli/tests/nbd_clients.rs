//! `offhost nbd` end to end with real NBD clients: nbdinfo, nbdcopy, nbdsh (libnbd), qemu-img,
//! qemu-io. A missing client fails the test with the package to install.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

struct Served {
    child: Child,
    socket: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("nbd.sock");
        let mut child = Command::new(env!("CARGO_BIN_EXE_offhost"))
            .arg("nbd")
            .arg("--listen")
            .arg(format!("unix:{}", socket.display()))
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start offhost nbd");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(
            line.starts_with("listening on unix:"),
            "server did not start: {line:?}"
        );
        Self {
            child,
            socket,
            _dir: dir,
        }
    }
    fn uri(&self, export: &str) -> String {
        format!("nbd+unix:///{export}?socket={}", self.socket.display())
    }
    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }
}

fn tool(name: &str, package: &str) -> Command {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {name}"))
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        found,
        "`{name}` is required by this test: install {package}"
    );
    Command::new(name)
}

fn ok(o: Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn nbdsh(uri: Option<&str>, code: &str) -> Output {
    let mut c = tool("nbdsh", "libnbd-bin + python3-libnbd");
    // nbdsh runs `python3`; python3-libnbd is installed for the system interpreter, which a
    // user-level python (pyenv, venv) earlier on PATH would hide.
    let path = std::env::var("PATH").unwrap_or_default();
    c.env("PATH", format!("/usr/bin:/bin:{path}"));
    if let Some(u) = uri {
        c.arg("-u").arg(u);
    }
    c.arg("-c").arg(code).output().unwrap()
}

fn random_file(path: &Path, len: usize, seed: u64) {
    let mut x = seed | 1;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        // xorshift64
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    std::fs::File::create(path).unwrap().write_all(&v).unwrap();
}

#[test]
fn nbdinfo_lists_exports_with_sizes_and_flags() {
    let s = Served::start(&[
        "--export",
        "disk=mem:1G",
        "--export",
        "ro=mem:64M,readonly,block=512",
    ]);
    let out = ok(
        tool("nbdinfo", "libnbd-bin")
            .args(["--list", "--json"])
            .arg(s.uri(""))
            .output()
            .unwrap(),
        "nbdinfo --list",
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ex = v["exports"].as_array().unwrap();
    assert_eq!(ex.len(), 2, "{out}");
    assert_eq!(ex[0]["export-name"], "disk");
    assert_eq!(ex[0]["export-size"], 1u64 << 30);
    assert_eq!(ex[0]["is_read_only"], false);
    assert_eq!(ex[0]["can_multi_conn"], true);
    assert_eq!(ex[1]["export-name"], "ro");
    assert_eq!(ex[1]["export-size"], 64u64 << 20);
    assert_eq!(ex[1]["is_read_only"], true);
    assert_eq!(ex[1]["block_size_minimum"], 512);
}

#[test]
fn nbdcopy_round_trips_64_mib_bit_exact() {
    let s = Served::start(&["--export", "disk=mem:64M"]);
    let dir = tempfile::tempdir().unwrap();
    let (src, back) = (dir.path().join("src"), dir.path().join("back"));
    random_file(&src, 64 << 20, 0x5eed);
    let copy = |a: &str, b: &str| {
        ok(
            tool("nbdcopy", "libnbd-bin").args([a, b]).output().unwrap(),
            "nbdcopy",
        )
    };
    copy(src.to_str().unwrap(), &s.uri("disk"));
    copy(&s.uri("disk"), back.to_str().unwrap());
    assert!(
        std::fs::read(&src).unwrap() == std::fs::read(&back).unwrap(),
        "64 MiB copied through the server came back different"
    );
}

#[test]
fn qemu_img_convert_and_qemu_io_patterns() {
    let s = Served::start(&["--export", "disk=mem:16M"]);
    let dir = tempfile::tempdir().unwrap();
    let (src, back) = (dir.path().join("src.raw"), dir.path().join("back.raw"));
    random_file(&src, 16 << 20, 42);
    ok(
        tool("qemu-img", "qemu-utils")
            .args(["convert", "-n", "-f", "raw", "-O", "raw"])
            .arg(&src)
            .arg(s.uri("disk"))
            .output()
            .unwrap(),
        "qemu-img convert in",
    );
    ok(
        tool("qemu-img", "qemu-utils")
            .args(["convert", "-f", "raw", "-O", "raw"])
            .arg(s.uri("disk"))
            .arg(&back)
            .output()
            .unwrap(),
        "qemu-img convert out",
    );
    assert!(std::fs::read(&src).unwrap() == std::fs::read(&back).unwrap());

    let qio = |cmds: &[&str]| {
        let mut c = tool("qemu-io", "qemu-utils");
        c.args(["-f", "raw"]);
        for x in cmds {
            c.arg("-c").arg(x);
        }
        c.arg(s.uri("disk")).output().unwrap()
    };
    let o = qio(&[
        "write -P 0xab 1M 1M",
        "write -z 3M 64k",
        "write -P 0x11 5000 3000",
    ]);
    let text = ok(o, "qemu-io write");
    assert!(!text.contains("failed"), "{text}");
    // A new process (new connection) verifies what the first one wrote.
    let o = qio(&[
        "read -P 0xab 1M 1M",
        "read -P 0 3M 64k",
        "read -P 0x11 5000 3000",
    ]);
    let text = ok(o, "qemu-io read");
    assert!(!text.contains("Pattern verification failed"), "{text}");
    // And verification can fail: the wrong pattern is caught.
    let o = qio(&["read -P 0xcd 1M 4k"]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(text.contains("Pattern verification failed"), "{text}");
}

#[test]
fn bad_requests_from_libnbd_get_errors_and_the_server_keeps_serving() {
    let mut s = Served::start(&[
        "--export",
        "disk=mem:1M",
        "--export",
        "ro=mem:1M,readonly",
        "--export",
        "aligned=mem:1M,block=4096",
    ]);
    let code = r#"
def expect(f, code, what):
    try:
        f()
    except nbd.Error as e:
        assert e.errno == code, (what, e.errno, e.string)
        return
    raise AssertionError(what + ": no error")
h.set_strict_mode(0)
expect(lambda: h.pread(512, (1 << 20) - 256), "EINVAL", "read past end")
expect(lambda: h.pwrite(b"x" * 512, (1 << 20) - 256), "ENOSPC", "write past end")
h.pwrite(b"ok" * 256, 0)
assert h.pread(512, 0) == b"ok" * 256
h2 = nbd.NBD()
h2.set_export_name("ro")
h2.connect_uri(URI_RO)
h2.set_strict_mode(0)
expect(lambda: h2.pwrite(b"x" * 512, 0), "EPERM", "write to read-only")
h3 = nbd.NBD()
h3.set_export_name("aligned")
h3.connect_uri(URI_AL)
h3.set_strict_mode(0)
expect(lambda: h3.pread(100, 10), "EINVAL", "misaligned read")
expect(lambda: h3.pread(64 << 20, 0), "EINVAL", "oversize read")
assert h3.pread(4096, 4096) == bytes(4096)
print("checked")
"#
    .replace("URI_RO", &format!("{:?}", s.uri("ro")))
    .replace("URI_AL", &format!("{:?}", s.uri("aligned")));
    let out = ok(nbdsh(Some(&s.uri("disk")), &code), "nbdsh bad requests");
    assert!(out.contains("checked"));
    assert!(s.alive());
    // Another client afterwards still reads what the first one wrote.
    let out = ok(
        nbdsh(Some(&s.uri("disk")), "print(h.pread(4, 0))"),
        "second client",
    );
    assert!(out.contains("okok"), "{out}");
}

#[test]
fn concurrent_connections_write_disjoint_ranges_then_verify() {
    let s = Served::start(&["--export", "disk=mem:64M"]);
    // Four connections, each keeping up to 16 writes in flight over its own 16 MiB range;
    // then every connection verifies a range written by another.
    let code = r#"
import os
N, RANGE, BS = 4, 16 << 20, 64 << 10
hs, data = [], {}
for c in range(N):
    x = nbd.NBD(); x.connect_uri(URI); hs.append(x)
for c, x in enumerate(hs):
    blocks = [os.urandom(BS) for _ in range(RANGE // BS)]
    data[c] = blocks
# Interleave the connections: each step issues one write per connection, at most 16 in flight each.
for i in range(RANGE // BS):
    for c, x in enumerate(hs):
        while x.aio_in_flight() >= 16:
            x.poll(-1)
        x.aio_pwrite(data[c][i], c * RANGE + i * BS)
for x in hs:
    while x.aio_in_flight() > 0:
        x.poll(-1)
bad = 0
for c, x in enumerate(hs):
    owner = (c + 1) % N
    for i in range(RANGE // BS):
        if x.pread(BS, owner * RANGE + i * BS) != data[owner][i]:
            bad += 1
print("bad", bad)
assert bad == 0
"#
    .replace("URI", &format!("{:?}", s.uri("disk")));
    let out = ok(nbdsh(None, &code), "nbdsh concurrent writers");
    assert!(out.contains("bad 0"), "{out}");
}

#[test]
fn trace_report_characterises_a_client() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.trace");
    let svg = dir.path().join("t.svg");
    let s = Served::start(&[
        "--export",
        "disk=mem:16M",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    let mut c = tool("qemu-io", "qemu-utils");
    c.args(["-f", "raw", "-c", "write -P 1 0 64k", "-c", "read 0 4k"])
        .arg(s.uri("disk"));
    ok(c.output().unwrap(), "qemu-io");
    // The server writes the trace out when the connection closes; wait for it (bounded).
    for _ in 0..200 {
        let t = std::fs::read_to_string(&trace).unwrap_or_default();
        if t.lines().filter(|l| !l.starts_with('#')).count() >= 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(s);
    let out = ok(
        Command::new(env!("CARGO_BIN_EXE_offhost"))
            .args(["nbd", "report", "--json", "--plot"])
            .arg(&svg)
            .arg(&trace)
            .output()
            .unwrap(),
        "offhost nbd report",
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let find = |cmd: &str, bytes: u64| {
        rows.iter()
            .find(|r| r["command"] == cmd && r["bytes"] == bytes)
            .unwrap_or_else(|| panic!("no {cmd} {bytes} row in {out}"))
    };
    assert_eq!(find("write", 65536)["count"], 1);
    assert_eq!(find("read", 4096)["count"], 1);
    assert!(find("write", 65536)["transfer_mb_per_s"].as_f64().unwrap() > 0.0);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
}

#[test]
fn drive_model_export_keeps_data_and_reports_rotational() {
    let s = Served::start(&[
        "--export",
        "slow=mem:8M,rpm=15000,seek=1ms,rate=200M,spt=128,tpc=4,cache=write-behind",
        "--export",
        "ra=mem:8M,rpm=15000,seek=1ms,rate=200M,cache=read-ahead",
    ]);
    let out = ok(
        tool("nbdinfo", "libnbd-bin")
            .args(["--json"])
            .arg(s.uri("slow"))
            .output()
            .unwrap(),
        "nbdinfo",
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["exports"][0]["is_rotational"], true, "{out}");
    for export in ["slow", "ra"] {
        let mut c = tool("qemu-io", "qemu-utils");
        c.args([
            "-f",
            "raw",
            "-c",
            "write -P 0x3c 0 256k",
            "-c",
            "write -P 0x4d 7M 64k",
            "-c",
            "flush",
            "-c",
            "read -P 0x3c 0 256k",
            "-c",
            "read -P 0x4d 7M 64k",
        ])
        .arg(s.uri(export));
        let text = ok(c.output().unwrap(), "qemu-io on a modelled drive");
        assert!(!text.contains("failed"), "{text}");
    }
}
