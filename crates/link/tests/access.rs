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
                ch.recv_timeout(Duration::from_secs(20))
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
    assert!(matches!(e, LinkError::Insecure(_)), "{e}");
    assert!(e.to_string().contains("--insecure"), "{e}");
    Server::bind_with("tcp:127.0.0.1:0", &LinkOptions::new().insecure(true)).unwrap();
    let e = Server::bind_with("tls:127.0.0.1:0", &LinkOptions::new()).unwrap_err();
    assert!(matches!(e, LinkError::NoCertificates(_)), "{e}");
    let e = Session::connect("tls:127.0.0.1:1").unwrap_err();
    assert!(matches!(e, LinkError::NoCertificates(_)), "{e}");
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
