//! TLS between two threads over loopback TCP: mutual authentication, refusals, and both
//! halves of one connection used at once.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use offhost_access::certs::{self, CertDir};
use offhost_access::{
    handshake, AccessError, ClientAuth, TlsClient, TlsReader, TlsServer, TlsWriter,
};

const T: Duration = Duration::from_secs(10);

fn pki() -> (tempfile::TempDir, CertDir) {
    let d = tempfile::tempdir().unwrap();
    let dir = certs::generate(&d.path().join("pki"), &[]).unwrap();
    (d, dir)
}

type Halves = Result<(TlsReader, TlsWriter), AccessError>;

/// Runs a server handshake in a thread and a client handshake here; returns both results.
fn pair(server: &TlsServer, client: &TlsClient) -> (Halves, Halves) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let conn = server.connection().unwrap();
    let srv = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        handshake(s.into(), conn, T)
    });
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let c = handshake(s.into(), client.connection("127.0.0.1").unwrap(), T);
    (srv.join().unwrap(), c)
}

#[test]
fn both_halves_carry_data_at_once_and_close_notify_ends_the_input() {
    let (_d, dir) = pki();
    let server = TlsServer::load(&dir, ClientAuth::Required).unwrap();
    let client = TlsClient::load(&dir).unwrap();
    let (s, c) = pair(&server, &client);
    let (mut sr, mut sw) = s.unwrap();
    let (mut cr, mut cw) = c.unwrap();
    let data: Vec<u8> = (0..8u32 << 20).map(|i| (i * 7 + i / 4096) as u8).collect();
    std::thread::scope(|scope| {
        // Server: echo everything back from a second thread while the first reads.
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        scope.spawn(move || {
            let mut buf = vec![0u8; 100_000];
            loop {
                let n = sr.read(&mut buf).unwrap();
                if n == 0 {
                    return;
                }
                tx.send(buf[..n].to_vec()).unwrap();
            }
        });
        scope.spawn(move || {
            for chunk in rx {
                sw.write_all(&chunk).unwrap();
            }
            sw.flush().unwrap();
            sw.shutdown();
        });
        let d = &data;
        scope.spawn(move || {
            for part in d.chunks(300_001) {
                cw.write_all(part).unwrap();
            }
            cw.flush().unwrap();
            cw.shutdown();
        });
        let mut got = Vec::new();
        cr.read_to_end(&mut got).unwrap();
        assert!(got == data, "echo came back whole and in order");
    });
}

/// A non-blocking write reports only bytes whose records left: against a peer that reads
/// nothing, writes go on until the socket is full and then say `WouldBlock`; once the peer
/// reads, the bytes not reported are offered again and every byte arrives once, in order.
#[test]
fn a_write_the_socket_cannot_take_reports_only_what_left() {
    let (_d, dir) = pki();
    let server = TlsServer::load(&dir, ClientAuth::Required).unwrap();
    let client = TlsClient::load(&dir).unwrap();
    let (s, c) = pair(&server, &client);
    let (sr, _sw) = s.unwrap();
    let (_cr, mut cw) = c.unwrap();
    let data: Vec<u8> = (0..64u32 << 20)
        .map(|i| (i * 13 + i / 65536) as u8)
        .collect();
    let mut at = 0;
    let stuck = loop {
        match cw.write_nb(&data[at..]) {
            Ok(n) => {
                assert!(n > 0 && n <= offhost_access::stream::WRITE_CHUNK, "{n}");
                at += n;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break at,
            Err(e) => panic!("{e}"),
        }
        assert!(at < data.len(), "64 MiB fitted in the socket buffers");
    };
    assert!(stuck > 0);
    deliver(sr, cw, &data, at, |cw, at| cw.write_nb(&data[at..]));
}

/// Writes `data` from `at` on with `write` (non-blocking; waits for room on `WouldBlock`)
/// while another thread reads all of it on `sr`; asserts every byte arrived once, in order.
fn deliver(
    mut sr: TlsReader,
    mut cw: TlsWriter,
    data: &[u8],
    mut at: usize,
    mut write: impl FnMut(&mut TlsWriter, usize) -> std::io::Result<usize>,
) {
    let len = data.len();
    std::thread::scope(|scope| {
        let reader = scope.spawn(move || {
            // A writer that failed must not leave this waiting for ever.
            sr.set_timeout(Some(T));
            let mut got = vec![0u8; len];
            sr.read_exact(&mut got).unwrap();
            got
        });
        while at < len {
            match write(&mut cw, at) {
                Ok(n) => {
                    // At most a chunk, and the piece an earlier call left owed: a piece, and
                    // the tail it takes when that ends its write.
                    use offhost_access::stream::{WRITE_CHUNK, WRITE_PIECE, WRITE_TAIL};
                    let most = WRITE_CHUNK + WRITE_PIECE + WRITE_TAIL;
                    assert!(n > 0 && n <= most, "{n}");
                    at += n;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    cw.wait(Some(T)).unwrap();
                }
                Err(e) => panic!("{e}"),
            }
        }
        cw.flush().unwrap();
        assert!(
            reader.join().unwrap() == data,
            "bytes lost, doubled or reordered"
        );
    });
}

/// The same with the bytes offered as many slices of odd sizes (`write_vectored_nb`, which
/// encrypts from the slices without joining them): every byte arrives once, in order.
#[test]
fn a_write_of_many_slices_arrives_whole_and_in_order() {
    let (_d, dir) = pki();
    let server = TlsServer::load(&dir, ClientAuth::Required).unwrap();
    let client = TlsClient::load(&dir).unwrap();
    let (s, c) = pair(&server, &client);
    let (sr, _sw) = s.unwrap();
    let (_cr, cw) = c.unwrap();
    let data: Vec<u8> = (0..24u32 << 20).map(|i| (i * 7 + i / 4099) as u8).collect();
    // Slices of 1, 12, 0, 5000 and 70001 bytes in turn, over at most 3 MiB from `at`.
    let slices = |at: usize| -> Vec<&[u8]> {
        let (mut v, mut i, mut k) = (Vec::new(), at, 0);
        while i < data.len() && i - at < 3 << 20 {
            let n = [1, 12, 0, 5000, 70_001][k % 5].min(data.len() - i);
            v.push(&data[i..i + n]);
            i += n;
            k += 1;
        }
        v
    };
    deliver(sr, cw, &data, 0, |cw, at| cw.write_vectored_nb(&slices(at)));
}

fn refused(server: &TlsServer, client: &TlsClient) -> String {
    let (s, c) = pair(server, client);
    let s = s.err().map(|e| e.to_string());
    // In TLS 1.3 the client may finish its side before the server refuses it: then its
    // first read reports the server's alert.
    let c = match c {
        Err(e) => Some(e.to_string()),
        Ok((mut r, _w)) => {
            r.set_timeout(Some(T));
            let mut b = [0u8; 1];
            r.read(&mut b).err().map(|e| e.to_string())
        }
    };
    let s = s.expect("the server refuses the handshake");
    assert!(c.is_some(), "the client learns it was refused");
    s
}

#[test]
fn a_client_without_a_certificate_is_refused() {
    let (_d, dir) = pki();
    let server = TlsServer::load(&dir, ClientAuth::Required).unwrap();
    std::fs::remove_file(dir.file(certs::CLIENT_KEY)).unwrap();
    let client = TlsClient::load(&dir).unwrap();
    let why = refused(&server, &client);
    assert!(why.contains("certificate"), "{why}");
}

#[test]
fn a_client_certificate_from_another_ca_is_refused() {
    let (_d, dir) = pki();
    let (_e, other) = pki();
    let server = TlsServer::load(&dir, ClientAuth::Required).unwrap();
    // Trusts our CA (so it accepts the server) but presents a certificate of another CA.
    let mixed = tempfile::tempdir().unwrap();
    for (from, name) in [
        (&dir, certs::CA_CERT),
        (&other, certs::CLIENT_CERT),
        (&other, certs::CLIENT_KEY),
    ] {
        std::fs::copy(from.file(name), mixed.path().join(name)).unwrap();
    }
    let client = TlsClient::load(&CertDir::new(mixed.path())).unwrap();
    let why = refused(&server, &client);
    assert!(
        why.contains("certificate") || why.contains("issuer"),
        "{why}"
    );
}

#[test]
fn a_client_that_does_not_trust_the_server_refuses_it() {
    let (_d, dir) = pki();
    let (_e, other) = pki();
    let server = TlsServer::load(&dir, ClientAuth::Required).unwrap();
    let client = TlsClient::load(&other).unwrap();
    let (_s, c) = pair(&server, &client);
    let e = c.expect_err("the client refuses an unknown server");
    assert!(e.to_string().contains("certificate"), "{e}");
}

#[test]
fn optional_client_auth_admits_a_client_without_a_certificate() {
    let (_d, dir) = pki();
    let server = TlsServer::load(&dir, ClientAuth::Optional).unwrap();
    std::fs::remove_file(dir.file(certs::CLIENT_CERT)).unwrap();
    let client = TlsClient::load(&dir).unwrap();
    let (s, c) = pair(&server, &client);
    let (_sr, mut sw) = s.unwrap();
    let (mut cr, _cw) = c.unwrap();
    sw.write_all(b"hello").unwrap();
    let mut b = [0u8; 5];
    cr.read_exact(&mut b).unwrap();
    assert_eq!(&b, b"hello");
}

#[test]
fn plain_bytes_are_not_a_handshake() {
    let (_d, dir) = pki();
    let server = TlsServer::load(&dir, ClientAuth::Required).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let conn = server.connection().unwrap();
    let srv = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        handshake(s.into(), conn, T)
    });
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    assert!(srv.join().unwrap().is_err());
}

/// Ciphertext that arrives a few bytes at a time (a relay between the two ends passes it on
/// in pieces of 1 to 7 bytes, so record headers arrive cut at every point), from the
/// handshake on: every byte arrives once, in order, and the end of the input is seen.
#[test]
fn records_cut_anywhere_on_the_wire_arrive_whole() {
    let (_d, dir) = pki();
    let server = TlsServer::load(&dir, ClientAuth::Required).unwrap();
    let client = TlsClient::load(&dir).unwrap();
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay = TcpListener::bind("127.0.0.1:0").unwrap();
    let (port, relay_port) = (
        l.local_addr().unwrap().port(),
        relay.local_addr().unwrap().port(),
    );
    // client -> relay -> server, in pieces; server -> client as it comes.
    std::thread::spawn(move || {
        let (mut from_client, _) = relay.accept().unwrap();
        let mut to_server = TcpStream::connect(("127.0.0.1", port)).unwrap();
        to_server.set_nodelay(true).unwrap();
        let (mut back_from, mut back_to) = (
            to_server.try_clone().unwrap(),
            from_client.try_clone().unwrap(),
        );
        std::thread::spawn(move || std::io::copy(&mut back_from, &mut back_to));
        let (mut buf, mut k) = ([0u8; 4096], 0usize);
        loop {
            let n = match from_client.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let mut at = 0;
            while at < n {
                k += 1;
                let piece = (k % 7 + 1).min(n - at);
                if to_server.write_all(&buf[at..at + piece]).is_err() {
                    return;
                }
                at += piece;
            }
        }
        let _ = to_server.shutdown(std::net::Shutdown::Write);
    });
    let conn = server.connection().unwrap();
    let srv = std::thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        let (mut r, _w) = handshake(s.into(), conn, T).unwrap();
        r.set_timeout(Some(T));
        let mut got = Vec::new();
        r.read_to_end(&mut got).unwrap();
        got
    });
    let s = TcpStream::connect(("127.0.0.1", relay_port)).unwrap();
    let (_r, mut w) = handshake(s.into(), client.connection("127.0.0.1").unwrap(), T).unwrap();
    let data: Vec<u8> = (0..200_000u32).map(|i| (i * 13 + i / 997) as u8).collect();
    for part in data.chunks(20_011) {
        w.write_all(part).unwrap();
    }
    w.flush().unwrap();
    w.shutdown();
    let got = srv.join().unwrap();
    assert_eq!(got.len(), data.len());
    assert!(got == data, "arrived whole and in order");
}
