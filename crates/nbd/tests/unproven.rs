//! Nothing unauthenticated holds what authenticated clients need (issue 46): connections that
//! have not got past TLS hold places among the unproven, not among `--max-connections`.
//! Before, with `--tls=require`, 70 silent connections filled 64 connection slots before
//! `NBD_OPT_STARTTLS`, and every certified client got `NBD_REP_ERR_POLICY` for as long as
//! they stayed.

use std::io::{Read, Write};
use std::net::{IpAddr, TcpStream};
use std::time::Duration;

use offhost_access::crowd::{Crowd, CrowdOptions, Target};
use offhost_access::{certs, TlsClient, TlsStream};
use offhost_nbd::proto::*;
use offhost_nbd::{Export, Limits, ListenAddr, NbdTls, Server, TlsMode};

const T: Duration = Duration::from_secs(20);

fn start(pki: &std::path::Path, limits: Limits) -> String {
    let exports = vec![Export::from_spec("disk=mem:1M").unwrap()];
    let mut server = Server::bind(&ListenAddr::Tcp("127.0.0.1:0".into()), exports, None).unwrap();
    server.set_tls(NbdTls::new(TlsMode::Require, Some(pki), true).unwrap());
    server.set_limits(limits);
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

fn read_n(s: &mut impl Read, n: usize) -> std::io::Result<Vec<u8>> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b)?;
    Ok(b)
}

fn option(s: &mut impl Write, opt: u32, data: &[u8]) -> std::io::Result<()> {
    let mut m = IHAVEOPT.to_be_bytes().to_vec();
    m.extend_from_slice(&opt.to_be_bytes());
    m.extend_from_slice(&(data.len() as u32).to_be_bytes());
    m.extend_from_slice(data);
    s.write_all(&m)?;
    s.flush()
}

/// One option reply: (reply type, data).
fn reply(s: &mut impl Read) -> std::io::Result<(u32, Vec<u8>)> {
    let h = read_n(s, 20)?;
    let len = u32::from_be_bytes(h[16..20].try_into().unwrap()) as usize;
    let typ = u32::from_be_bytes(h[12..16].try_into().unwrap());
    Ok((typ, read_n(s, len)?))
}

/// A certified client's whole way in: greeting, STARTTLS, TLS, NBD_OPT_GO. Returns the final
/// reply to GO, its message and the connection, or what failed before it.
fn certified_go(addr: &str, pki: &std::path::Path) -> Result<(u32, String, TlsStream), String> {
    let e = |what: &'static str| move |err: std::io::Error| format!("{what}: {err}");
    let mut s = TcpStream::connect(addr).map_err(e("connect"))?;
    s.set_read_timeout(Some(T)).unwrap();
    read_n(&mut s, 18).map_err(e("greeting"))?;
    s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
        .map_err(e("flags"))?;
    option(&mut s, OPT_STARTTLS, &[]).map_err(e("starttls"))?;
    let (typ, msg) = reply(&mut s).map_err(e("starttls reply"))?;
    if typ != REP_ACK {
        return Err(format!(
            "STARTTLS answered {typ:#x}: {}",
            String::from_utf8_lossy(&msg)
        ));
    }
    let client = TlsClient::load(&certs::CertDir::new(pki)).unwrap();
    let (mut r, w) =
        offhost_access::handshake(s.into(), client.connection("127.0.0.1").unwrap(), T)
            .map_err(|err| format!("tls: {err}"))?;
    r.set_timeout(Some(T));
    let mut t = TlsStream::new(r, w);
    let mut d = 4u32.to_be_bytes().to_vec();
    d.extend_from_slice(b"disk");
    d.extend_from_slice(&0u16.to_be_bytes());
    option(&mut t, OPT_GO, &d).map_err(e("go"))?;
    loop {
        let (typ, msg) = reply(&mut t).map_err(e("go reply"))?;
        if typ != REP_INFO {
            return Ok((typ, String::from_utf8_lossy(&msg).into_owned(), t));
        }
    }
}

fn crowd(addr: &str, count: usize, sources: Vec<IpAddr>) -> Crowd {
    Crowd::start(CrowdOptions {
        target: Target::Tcp {
            addr: addr.parse().unwrap(),
            sources,
        },
        count,
        trickle: None,
        at_most: Duration::from_secs(120),
    })
    .unwrap()
}

#[test]
fn certified_clients_are_served_while_70_silent_connections_stay() {
    let (_d, pki) = pki();
    let addr = start(&pki, Limits::default());
    let sources = (1..5).map(|n| IpAddr::from([127, 0, 0, n])).collect();
    let silent = crowd(&addr, 70, sources);
    for i in 0..3 {
        match certified_go(&addr, &pki) {
            Ok((REP_ACK, _, _)) => {}
            Ok((typ, why, _)) => panic!("try {i}: beside 70 silent, GO answered {typ:#x}: {why}"),
            Err(e) => panic!("try {i}: a certified client beside 70 silent: {e}"),
        }
    }
    drop(silent);
}

#[test]
fn connections_past_the_limit_are_refused_only_once_past_tls() {
    let (_d, pki) = pki();
    let addr = start(
        &pki,
        Limits {
            max_connections: 1,
            ..Limits::default()
        },
    );
    // Silent connections hold no connection slot: the one slot is the first certified
    // client's, and the second, past TLS, is told why it gets none.
    let silent = crowd(&addr, 10, vec![IpAddr::from([127, 0, 0, 2])]);
    let first = match certified_go(&addr, &pki) {
        Ok((REP_ACK, _, t)) => t,
        Ok((typ, why, _)) => panic!("the first certified client: {typ:#x}: {why}"),
        Err(e) => panic!("the first certified client: {e}"),
    };
    match certified_go(&addr, &pki) {
        Ok((REP_ERR_POLICY, why, _)) => assert!(why.contains("--max-connections"), "{why}"),
        Ok((typ, why, _)) => panic!("the second certified client: {typ:#x}: {why}"),
        Err(e) => panic!("the second certified client: {e}"),
    }
    drop((first, silent));
}
