//! Who may open a session: TLS certificates, plain TCP only on request, peer uids.

mod common;

use std::time::Duration;

use offhost_link::{ChannelOptions, LinkError, LinkOptions, Server, Session};

fn echo(server: Server) {
    std::thread::spawn(move || offhost_link::serve_echo(&server));
}

fn tls_server() -> String {
    let s = Server::bind_with("tls:127.0.0.1:0", &common::options()).unwrap();
    let url = s.url().to_owned();
    echo(s);
    url
}

#[test]
fn a_tls_session_echoes_and_reports_its_transport() {
    let url = tls_server();
    let s = common::connect(&url).unwrap();
    assert_eq!(s.transport(), "tls");
    let ch = s.open("e", ChannelOptions::default()).unwrap();
    ch.send(b"over tls").unwrap();
    assert_eq!(ch.recv().unwrap().unwrap(), b"over tls");
}

#[test]
fn a_client_without_a_certificate_is_refused_at_connect() {
    let url = tls_server();
    let d = tempfile::tempdir().unwrap();
    std::fs::copy(
        common::cert_dir().join("ca-cert.pem"),
        d.path().join("ca-cert.pem"),
    )
    .unwrap();
    let e = Session::connect_with(&url, &LinkOptions::new().tls_certificates(d.path()))
        .expect_err("no client certificate");
    assert!(e.to_string().contains("not admitted"), "{e}");
    assert!(e.to_string().contains("CertificateRequired"), "{e}");
    // The server goes on serving others.
    common::connect(&url).unwrap();
}

#[test]
fn a_client_of_another_ca_is_refused_at_connect() {
    let url = tls_server();
    let d = tempfile::tempdir().unwrap();
    let other = d.path().join("other");
    offhost_access::certs::generate(&other, &[]).unwrap();
    // Trusting our CA, presenting a certificate of the other.
    std::fs::copy(
        common::cert_dir().join("ca-cert.pem"),
        d.path().join("ca-cert.pem"),
    )
    .unwrap();
    for f in ["client-cert.pem", "client-key.pem"] {
        std::fs::copy(other.join(f), d.path().join(f)).unwrap();
    }
    let e = Session::connect_with(&url, &LinkOptions::new().tls_certificates(d.path()))
        .expect_err("a certificate of another CA");
    assert!(e.to_string().contains("not admitted"), "{e}");
    // And a client that trusts only the other CA refuses our server.
    let e = Session::connect_with(&url, &LinkOptions::new().tls_certificates(&other))
        .expect_err("a server of another CA");
    assert!(e.to_string().contains("certificate"), "{e}");
}

#[test]
fn plain_tcp_against_a_tls_server_gets_nothing() {
    let url = tls_server();
    let tcp = url.replacen("tls:", "tcp:", 1);
    // The server takes the client's first frame for a broken handshake and drops it.
    match Session::connect(&tcp) {
        Err(_) => {}
        Ok(s) => {
            let ch = s.open("e", ChannelOptions::default());
            let r = ch.and_then(|ch| {
                ch.send(b"x")?;
                ch.recv_wait(Duration::from_secs(20))
            });
            assert!(
                r.is_err(),
                "plain tcp got an answer from a tls server: {r:?}"
            );
        }
    }
}

#[test]
fn servers_refuse_plain_tcp_unless_told_and_tls_without_certificates() {
    let e = Server::bind_with("tcp:127.0.0.1:0", &LinkOptions::new()).unwrap_err();
    assert!(matches!(e, LinkError::Insecure(..)), "{e}");
    let needs = |e: &LinkError| offhost_units::Needs::find(e).map(|n| n.setting);
    assert_eq!(needs(&e), Some(offhost_units::Setting::Insecure), "{e}");
    assert!(
        !e.to_string().contains("--"),
        "no flag in a library's words: {e}"
    );
    Server::bind_with("tcp:127.0.0.1:0", &LinkOptions::new().insecure(true)).unwrap();
    let e = Server::bind_with("tls:127.0.0.1:0", &LinkOptions::new()).unwrap_err();
    assert!(matches!(e, LinkError::NoCertificates(..)), "{e}");
    assert_eq!(needs(&e), Some(offhost_units::Setting::TlsCertificates));
    let e = Session::connect("tls:127.0.0.1:1").unwrap_err();
    assert!(matches!(e, LinkError::NoCertificates(..)), "{e}");
    assert!(
        e.to_string().contains("the setting tls_certificates"),
        "{e}"
    );
}

#[test]
fn a_unix_socket_is_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("s");
    let _s = Server::bind(&format!("unix:{}", p.display())).unwrap();
    let mode = std::fs::metadata(&p).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn silent_tls_clients_do_not_hold_up_a_good_one() {
    let url = tls_server();
    let addr = url.strip_prefix("tls:").unwrap();
    // Clients that connect and never say hello: before, the accept loop ran each handshake
    // in turn for its whole deadline, and the good client's own timed out behind them.
    let silent: Vec<_> = (0..6)
        .map(|_| std::net::TcpStream::connect(addr).unwrap())
        .collect();
    let t0 = std::time::Instant::now();
    let s = common::connect(&url).expect("a good client is served beside silent ones");
    let ch = s.open("ok", ChannelOptions::default()).unwrap();
    ch.send(b"still here").unwrap();
    let m = ch.recv_wait(Duration::from_secs(20)).unwrap();
    assert_eq!(m.as_deref(), Some(&b"still here"[..]));
    assert!(
        t0.elapsed() < offhost_link::DEFAULT_HANDSHAKE_TIMEOUT,
        "served only after the silent clients' deadline: {:?}",
        t0.elapsed()
    );
    drop(silent);
}

#[test]
fn tls_sessions_past_the_limit_are_refused_naming_the_flag() {
    let mut s = Server::bind_with("tls:127.0.0.1:0", &common::options()).unwrap();
    s.set_limits(offhost_link::Limits {
        max_sessions: 1,
        ..offhost_link::Limits::default()
    });
    let url = s.url().to_owned();
    echo(s);
    let first = common::connect(&url).unwrap();
    let ch = first.open("x", ChannelOptions::default()).unwrap();
    ch.send(b"x").unwrap();
    assert!(ch.recv_wait(Duration::from_secs(20)).unwrap().is_some());
    let why = match common::connect(&url) {
        Err(e) => e.to_string(),
        Ok(c) => match c.open("x", ChannelOptions::default()).and_then(|ch| {
            let _ = ch.send(b"x");
            ch.recv_wait(Duration::from_secs(20))
        }) {
            Err(e) => e.to_string(),
            Ok(m) => panic!("a second session was served: {m:?}"),
        },
    };
    assert!(why.contains("--max-sessions"), "{why}");
}
