//! Attaching to segments that are not what they claim: each gets an error naming what is wrong,
//! on the engine side and in the verdict the host receives; the listener keeps serving.

mod common;

use offhost_shm::{connect, pair, Config, Listener, Mode};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{MemfdFlags, SealFlags};
use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
use std::io::{IoSlice, Read};
use std::mem::MaybeUninit;
use std::os::unix::net::UnixStream;
use std::time::Duration;

fn config() -> Config {
    Config {
        ring_bytes: 4096,
        pool_buffers: 2,
        buffer_size: 1024,
        mode: Mode::Block,
        spin: Duration::from_micros(10),
        event_limit: None,
    }
}

/// A copy of a valid segment's first page, and the valid segment's size.
fn valid_image() -> (Vec<u8>, u64) {
    let (host, _engine) = pair(&config()).unwrap();
    let size = host.layout().total_size();
    let mut page = vec![0u8; 4096];
    rustix::io::pread(host.segment_fd(), &mut page, 0).unwrap();
    (page, size)
}

fn memfd(image: &[u8], size: u64, seal: bool) -> OwnedFd {
    let fd = rustix::fs::memfd_create("bad-segment", MemfdFlags::ALLOW_SEALING).unwrap();
    rustix::fs::ftruncate(&fd, size).unwrap();
    let n = image.len().min(size as usize);
    rustix::io::pwrite(&fd, &image[..n], 0).unwrap();
    if seal {
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW).unwrap();
    }
    fd
}

/// Hands `fd` (or nothing) to a listener as a host would; returns the engine's error and the
/// verdict text the host received.
fn offer(fd: Option<OwnedFd>) -> (String, String) {
    let addr = common::abstract_addr("attach");
    let listener = Listener::bind(&addr).unwrap();
    let engine = std::thread::spawn(move || {
        let err = listener
            .accept()
            .err()
            .expect("accept must fail")
            .to_string();
        // The listener still serves a good host afterwards.
        let ok = std::thread::spawn(move || listener.accept().map(|_| ()));
        (err, ok)
    });
    let mut sock = UnixStream::connect_addr(&
        <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(
            &addr.as_bytes()[1..],
        )
        .unwrap(),
    )
    .unwrap_or_else(|_| panic!("connect {addr}"));
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    let fds;
    if let Some(fd) = &fd {
        fds = [fd.as_fd()];
        assert!(cmsg.push(SendAncillaryMessage::ScmRights(&fds)));
    }
    rustix::net::sendmsg(
        &sock,
        &[IoSlice::new(b"OFFHCTL1")],
        &mut cmsg,
        SendFlags::empty(),
    )
    .unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut verdict = Vec::new();
    let _ = sock.read_to_end(&mut verdict);
    let (err, ok) = engine.join().unwrap();
    let good = connect(&addr, &config()).expect("good host after a bad one");
    ok.join().unwrap().expect("good host accepted");
    drop(good);
    assert!(!verdict.is_empty(), "no verdict sent to the host");
    assert_eq!(verdict[0], 1, "verdict must be a refusal");
    (err, String::from_utf8_lossy(&verdict[3..]).into_owned())
}

fn assert_refused(fd: Option<OwnedFd>, expect: &str) {
    let (err, verdict) = offer(fd);
    assert!(
        err.contains(expect),
        "engine error {err:?} lacks {expect:?}"
    );
    assert!(
        verdict.contains(expect),
        "verdict {verdict:?} lacks {expect:?}"
    );
}

#[test]
fn wrong_magic_is_refused_with_expected_and_found() {
    let (mut img, size) = valid_image();
    img[0..8].copy_from_slice(b"NOTOFFHS");
    let found = format!("{:#018x}", u64::from_le_bytes(*b"NOTOFFHS"));
    let expected = format!("{:#018x}", offhost_shm::MAGIC);
    let (err, verdict) = offer(Some(memfd(&img, size, true)));
    for text in [&err, &verdict] {
        assert!(text.contains("magic mismatch"), "{text}");
        assert!(text.contains(&found) && text.contains(&expected), "{text}");
    }
}

#[test]
fn wrong_version_is_refused() {
    let (mut img, size) = valid_image();
    img[8..12].copy_from_slice(&99u32.to_le_bytes());
    assert_refused(
        Some(memfd(&img, size, true)),
        &format!(
            "version mismatch: expected {}, found 99",
            offhost_shm::VERSION
        ),
    );
}

#[test]
fn wrong_file_size_is_refused() {
    let (img, size) = valid_image();
    assert_refused(
        Some(memfd(&img, size + 4096, true)),
        &format!(
            "layout mismatch in file size: expected {size}, found {}",
            size + 4096
        ),
    );
}

#[test]
fn inconsistent_layout_is_refused() {
    let (mut img, size) = valid_image();
    // ring_bytes lives at offset 24: a different (valid) size moves every later region.
    img[24..32].copy_from_slice(&8192u64.to_le_bytes());
    assert_refused(Some(memfd(&img, size, true)), "layout mismatch in free_off");
    let (mut img, size) = valid_image();
    img[24..32].copy_from_slice(&1000u64.to_le_bytes());
    assert_refused(
        Some(memfd(&img, size, true)),
        "ring_bytes 1000 must be a power of two",
    );
}

#[test]
fn tiny_unsealed_or_missing_segments_are_refused() {
    let (img, size) = valid_image();
    assert_refused(Some(memfd(&img, 100, true)), "segment too small: 100 bytes");
    assert_refused(
        Some(memfd(&img, size, false)),
        "not sealed against shrinking",
    );
    assert_refused(None, "hello carried no segment fd");
}
