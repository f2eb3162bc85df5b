//! `offhost nbd --tls=require` against real clients: nbdinfo, nbdcopy (64 MiB read back
//! bit-exact) and qemu-img over TLS with certificates made by `offhost certs`; a client
//! without TLS refused during option haggling with NBD_REP_ERR_TLS_REQD; a client without a
//! certificate refused under --tls-verify-peer.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::Reaped;

const BIN: &str = env!("CARGO_BIN_EXE_offhost");

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn ok(o: &Output, what: &str) -> String {
    assert!(
        o.status.success(),
        "{what} failed: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// A TLS-only server with a 64 MiB memory disk `d`; returns it and its port.
fn serve(pki: &Path) -> (Reaped, u16) {
    let mut child = Reaped(
        Command::new(BIN)
            .args([
                "nbd",
                "--listen",
                "tcp:127.0.0.1:0",
                "--export",
                "d=mem:64M",
            ])
            .args(["--tls=require", "--tls-verify-peer", "--tls-certificates"])
            .arg(pki)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start offhost nbd"),
    );
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("listening on tcp:127.0.0.1:")
        .unwrap_or_else(|| panic!("server did not start: {line:?}"))
        .parse()
        .unwrap();
    (child, port)
}

fn certs(dir: &Path) -> std::path::PathBuf {
    let p = dir.join("pki");
    ok(
        &Command::new(BIN).arg("certs").arg(&p).output().unwrap(),
        "offhost certs",
    );
    p
}

/// Deterministic pseudo-random bytes (xorshift64*), no two 8-byte words alike in practice.
fn random(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        v.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    v.truncate(len);
    v
}

#[test]
fn nbdinfo_nbdcopy_and_qemu_img_work_over_tls() {
    let d = tempfile::tempdir().unwrap();
    let pki = certs(d.path());
    let (_server, port) = serve(&pki);
    let uri = format!(
        "nbds://127.0.0.1:{port}/d?tls-certificates={}",
        pki.display()
    );

    let info = ok(
        &Command::new("nbdinfo").arg(&uri).output().unwrap(),
        "nbdinfo",
    );
    assert!(info.contains("with TLS"), "{info}");
    assert!(info.contains("67108864"), "{info}");

    // 64 MiB of random data in, and back out bit-exact.
    let data = random(64 << 20);
    let src = d.path().join("src.bin");
    std::fs::write(&src, &data).unwrap();
    ok(
        &Command::new("nbdcopy")
            .arg(&src)
            .arg(&uri)
            .output()
            .unwrap(),
        "nbdcopy to the disk",
    );
    let back = d.path().join("back.bin");
    ok(
        &Command::new("nbdcopy")
            .arg(&uri)
            .arg(&back)
            .output()
            .unwrap(),
        "nbdcopy from the disk",
    );
    assert!(
        std::fs::read(&back).unwrap() == data,
        "64 MiB came back different"
    );

    // qemu-img with its x509 credentials object.
    let object = format!(
        "tls-creds-x509,id=tls0,dir={},endpoint=client",
        pki.display()
    );
    let image = format!("driver=nbd,host=127.0.0.1,port={port},export=d,tls-creds=tls0");
    let out = ok(
        &Command::new("qemu-img")
            .args(["info", "--object", &object, "--image-opts", &image])
            .output()
            .unwrap(),
        "qemu-img info",
    );
    assert!(out.contains("67108864"), "{out}");
    let small = d.path().join("small.raw");
    let small_data = random(1 << 20).into_iter().rev().collect::<Vec<u8>>();
    std::fs::write(&small, &small_data).unwrap();
    ok(
        &Command::new("qemu-img")
            .args(["convert", "-n", "-f", "raw", "--object", &object])
            .arg(&small)
            .args(["--target-image-opts", &image])
            .output()
            .unwrap(),
        "qemu-img convert",
    );
    let got = Command::new("nbdcopy").arg(&uri).arg("-").output().unwrap();
    ok(&got, "nbdcopy of what qemu-img wrote");
    assert!(
        got.stdout[..1 << 20] == small_data[..] && got.stdout[1 << 20..] == data[1 << 20..],
        "qemu-img's write came back different"
    );
}

#[test]
fn clients_without_tls_or_a_certificate_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let pki = certs(d.path());
    let (_server, port) = serve(&pki);

    // nbdinfo without TLS gives up.
    let o = Command::new("nbdinfo")
        .arg(format!("nbd://127.0.0.1:{port}/d"))
        .output()
        .unwrap();
    assert!(!o.status.success(), "plain nbdinfo was served");

    // On the wire: the option is answered NBD_REP_ERR_TLS_REQD (2^31 + 5).
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut hello = [0u8; 18];
    s.read_exact(&mut hello).unwrap();
    s.write_all(&3u32.to_be_bytes()).unwrap();
    let mut opt = b"IHAVEOPT".to_vec();
    opt.extend_from_slice(&3u32.to_be_bytes()); // NBD_OPT_LIST
    opt.extend_from_slice(&0u32.to_be_bytes());
    s.write_all(&opt).unwrap();
    let mut reply = [0u8; 20];
    s.read_exact(&mut reply).unwrap();
    assert_eq!(
        u32::from_be_bytes(reply[12..16].try_into().unwrap()),
        (1 << 31) + 5
    );

    // A TLS client with no certificate of its own, under --tls-verify-peer.
    let anon = d.path().join("anon");
    std::fs::create_dir(&anon).unwrap();
    std::fs::copy(pki.join("ca-cert.pem"), anon.join("ca-cert.pem")).unwrap();
    let o = Command::new("nbdinfo")
        .arg(format!(
            "nbds://127.0.0.1:{port}/d?tls-certificates={}",
            anon.display()
        ))
        .output()
        .unwrap();
    assert!(
        !o.status.success(),
        "a client without a certificate was served"
    );
}
