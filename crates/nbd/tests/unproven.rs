//! Nothing unauthenticated holds what authenticated clients need (issue 46): connections that
//! have not got past TLS hold places among the unproven, not among `--max-connections`.
//! Before, with `--tls=require`, 70 silent connections filled 64 connection slots before
//! `NBD_OPT_STARTTLS`, and every certified client got `NBD_REP_ERR_POLICY` for as long as
//! they stayed.

use std::net::IpAddr;
use std::time::Duration;

use offhost_access::crowd::{Crowd, CrowdOptions, Target};
use offhost_access::{certs, TlsStream};
use offhost_nbd::proto::*;
use offhost_nbd::{hostile, Export, Limits, ListenAddr, NbdTls, Server, TlsMode};

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

/// A certified client's whole way in ([`hostile::certified_go`]), its message as text.
fn certified_go(addr: &str, pki: &std::path::Path) -> Result<(u32, String, TlsStream), String> {
    hostile::certified_go(addr, pki, "disk", T)
        .map(|(typ, msg, t)| (typ, String::from_utf8_lossy(&msg).into_owned(), t))
        .map_err(|e| e.to_string())
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
