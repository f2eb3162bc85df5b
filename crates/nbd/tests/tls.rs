//! NBD_OPT_STARTTLS as the protocol specifies it, driven byte by byte: the FORCEDTLS
//! refusals before TLS, the upgrade, haggling over TLS, and the modes' differences. Real
//! clients (nbdinfo, nbdcopy, qemu-img) are tested in crates/cli/tests.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use offhost_access::{certs, TlsClient, TlsStream};
use offhost_nbd::proto::*;
use offhost_nbd::{Export, ListenAddr, NbdTls, Server, TlsMode};

const T: Duration = Duration::from_secs(20);

fn start(mode: TlsMode, pki: &std::path::Path, verify_peer: bool) -> String {
    let exports = vec![Export::from_spec("disk=mem:1M").unwrap()];
    let mut server = Server::bind(&ListenAddr::Tcp("127.0.0.1:0".into()), exports, None).unwrap();
    server.set_tls(NbdTls::new(mode, Some(pki), verify_peer).unwrap());
    let addr = server.local_addr();
    std::thread::spawn(move || server.serve());
    addr.strip_prefix("tcp:").unwrap().to_owned()
}

fn pki() -> (tempfile::TempDir, std::path::PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("pki");
    certs::generate(&p, &[]).unwrap();
    (d, p)
}

fn read_n(s: &mut impl Read, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b).unwrap();
    b
}

fn greet(addr: &str) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(T)).unwrap();
    let hello = read_n(&mut s, 18);
    assert_eq!(&hello[8..16], &IHAVEOPT.to_be_bytes());
    s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
        .unwrap();
    s
}

fn option(s: &mut impl Write, opt: u32, data: &[u8]) {
    let mut m = IHAVEOPT.to_be_bytes().to_vec();
    m.extend_from_slice(&opt.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(data);
    s.write_all(&m).unwrap();
    s.flush().unwrap();
}

/// Reads one option reply: (option, reply type, data).
fn reply(s: &mut impl Read) -> (u32, u32, Vec<u8>) {
    let h = read_n(s, 20);
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
    let opt = u32::from_be_bytes(h[8..12].try_into().unwrap());
    let typ = u32::from_be_bytes(h[12..16].try_into().unwrap());
    (opt, typ, read_n(s, len))
}

fn go_data(name: &str) -> Vec<u8> {
    let mut d = (name.len() as u32).to_be_bytes().to_vec();
    d.extend_from_slice(name.as_bytes());
    d.extend_from_slice(&0u16.to_be_bytes());
    d
}

/// Sends NBD_OPT_GO and reads replies up to the final one; returns its type.
fn go(s: &mut (impl Read + Write), name: &str) -> u32 {
    option(s, OPT_GO, &go_data(name));
    loop {
        let (opt, typ, _) = reply(s);
        assert_eq!(opt, OPT_GO);
        if typ != REP_INFO {
            return typ;
        }
    }
}

fn starttls(mut s: TcpStream, pki: &std::path::Path) -> TlsStream {
    option(&mut s, OPT_STARTTLS, &[]);
    assert_eq!(reply(&mut s).1, REP_ACK);
    let client = TlsClient::load(&certs::CertDir::new(pki)).unwrap();
    let (mut r, w) =
        offhost_access::handshake(s.into(), client.connection("127.0.0.1").unwrap(), T).unwrap();
    r.set_timeout(Some(T));
    TlsStream::new(r, w)
}

#[test]
fn require_refuses_every_option_before_starttls_then_serves_over_tls() {
    let (_d, pki) = pki();
    let addr = start(TlsMode::Require, &pki, true);
    let mut s = greet(&addr);
    for (opt, data) in [
        (OPT_LIST, vec![]),
        (OPT_STRUCTURED_REPLY, vec![]),
        (OPT_INFO, go_data("disk")),
        (OPT_GO, go_data("disk")),
        (1000, vec![1, 2, 3]),
    ] {
        option(&mut s, opt, &data);
        let (o, typ, _) = reply(&mut s);
        assert_eq!((o, typ), (opt, REP_ERR_TLS_REQD), "option {opt}");
    }
    let mut t = starttls(s, &pki);
    // Over TLS: STARTTLS again is invalid, and the export is served.
    option(&mut t, OPT_STARTTLS, &[]);
    assert_eq!(reply(&mut t).1, REP_ERR_INVALID);
    assert_eq!(go(&mut t, "disk"), REP_ACK);
    // A write and a read back, in transmission over TLS.
    let mut req = Vec::new();
    let data = vec![0x5au8; 4096];
    req.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    req.extend_from_slice(&0u16.to_be_bytes());
    req.extend_from_slice(&1u16.to_be_bytes());
    req.extend_from_slice(&7u64.to_be_bytes());
    req.extend_from_slice(&4096u64.to_be_bytes());
    req.extend_from_slice(&4096u32.to_be_bytes());
    req.extend_from_slice(&data);
    req.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
    req.extend_from_slice(&0u16.to_be_bytes());
    req.extend_from_slice(&0u16.to_be_bytes());
    req.extend_from_slice(&8u64.to_be_bytes());
    req.extend_from_slice(&4096u64.to_be_bytes());
    req.extend_from_slice(&4096u32.to_be_bytes());
    t.write_all(&req).unwrap();
    t.flush().unwrap();
    let w = read_n(&mut t, 16);
    assert_eq!(&w[0..4], &SIMPLE_REPLY_MAGIC.to_be_bytes());
    assert_eq!(&w[4..8], &0u32.to_be_bytes());
    let r = read_n(&mut t, 16);
    assert_eq!(&r[8..16], &8u64.to_be_bytes());
    assert_eq!(read_n(&mut t, 4096), data);
}

#[test]
fn require_ends_a_session_that_names_an_export_before_tls() {
    let (_d, pki) = pki();
    let addr = start(TlsMode::Require, &pki, false);
    let mut s = greet(&addr);
    option(&mut s, OPT_EXPORT_NAME, b"disk");
    let mut b = [0u8; 1];
    assert_eq!(
        s.read(&mut b).unwrap_or(0),
        0,
        "the server closes the session"
    );
}

#[test]
fn on_serves_plain_clients_and_upgrades_those_that_ask() {
    let (_d, pki) = pki();
    let addr = start(TlsMode::On, &pki, false);
    let mut s = greet(&addr);
    assert_eq!(go(&mut s, "disk"), REP_ACK);
    let s = greet(&addr);
    let mut t = starttls(s, &pki);
    assert_eq!(go(&mut t, "disk"), REP_ACK);
}

#[test]
fn verify_peer_refuses_a_client_without_a_certificate() {
    let (_d, pki) = pki();
    let addr = start(TlsMode::Require, &pki, true);
    let anon = tempfile::tempdir().unwrap();
    std::fs::copy(pki.join("ca-cert.pem"), anon.path().join("ca-cert.pem")).unwrap();
    let mut s = greet(&addr);
    option(&mut s, OPT_STARTTLS, &[]);
    assert_eq!(reply(&mut s).1, REP_ACK);
    let client = TlsClient::load(&certs::CertDir::new(anon.path())).unwrap();
    let r = offhost_access::handshake(s.into(), client.connection("127.0.0.1").unwrap(), T);
    let refused = match r {
        Err(_) => true,
        Ok((mut r, w)) => {
            // TLS 1.3: the refusal arrives as an alert on the first read.
            let mut t = TlsStream::new(
                {
                    r.set_timeout(Some(T));
                    r
                },
                w,
            );
            option(&mut t, OPT_GO, &go_data("disk"));
            let mut b = [0u8; 20];
            t.read_exact(&mut b).is_err()
        }
    };
    assert!(refused);
}

#[test]
fn off_answers_starttls_unsupported() {
    let (_d, pki) = pki();
    let addr = start(TlsMode::Off, &pki, false);
    let mut s = greet(&addr);
    option(&mut s, OPT_STARTTLS, &[]);
    assert_eq!(reply(&mut s).1, REP_ERR_UNSUP);
    assert_eq!(go(&mut s, "disk"), REP_ACK);
}

#[test]
fn a_client_that_stalls_after_starttls_is_dropped_at_the_handshake_deadline() {
    use offhost_nbd::hostile;
    let (_d, pki) = pki();
    let exports = vec![Export::from_spec("disk=mem:1M").unwrap()];
    let mut server = Server::bind(&ListenAddr::Tcp("127.0.0.1:0".into()), exports, None).unwrap();
    server.set_tls(NbdTls::new(TlsMode::On, Some(&pki), false).unwrap());
    server.set_limits(offhost_nbd::Limits {
        handshake_timeout: Duration::from_millis(500),
        max_connections: 1,
        ..offhost_nbd::Limits::default()
    });
    let addr: ListenAddr = server.local_addr().parse().unwrap();
    std::thread::spawn(move || server.serve());
    let stalled = hostile::stalled_starttls(&addr).unwrap();
    // Before, the TLS handshake and the haggling after it had a fixed two minutes of their
    // own; now the handshake's deadline covers them, and the one connection slot comes back.
    let took = hostile::dropped_within(&stalled, T).expect("dropped by the deadline");
    assert!(took < Duration::from_secs(5), "{took:?}");
    drop(stalled);
    let t0 = std::time::Instant::now();
    loop {
        match hostile::idle(&addr, "disk") {
            Ok(_) => break,
            Err(e) => assert!(t0.elapsed() < T, "never served again: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
