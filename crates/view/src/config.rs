//! Where the view listens and who may see it: loopback by default; any other address only
//! over TLS with client certificates, or when plain HTTP is asked for.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use offhost_access::{CertDir, ClientAuth, TlsServer};
use offhost_units::{Needs, Setting};

/// The address `--view` takes when given none.
pub const DEFAULT_ADDR: &str = "127.0.0.1:7480";

/// The most clients (connections) a view serves at once, by default.
pub const DEFAULT_CLIENTS: usize = 16;

/// How a view serves.
#[derive(Debug, Clone)]
pub struct ViewConfig {
    /// Where it listens.
    pub addr: SocketAddr,
    /// A certificate directory: serve HTTPS and require client certificates signed by its
    /// CA.
    pub tls_certificates: Option<PathBuf>,
    /// Serve plain HTTP on an address other than loopback.
    pub insecure: bool,
    /// The most connections at once; more are answered 503 and closed.
    pub clients: usize,
    /// How often the page gets fresh numbers.
    pub period: Duration,
    /// How long a push channel may go unread (a stalled or vanished browser) before it is
    /// closed.
    pub stall: Duration,
}

impl ViewConfig {
    /// A view on `addr` with the defaults: plain HTTP (loopback only), 16 clients, a look a
    /// second, 30 s of stall.
    pub fn new(addr: SocketAddr) -> ViewConfig {
        ViewConfig {
            addr,
            tls_certificates: None,
            insecure: false,
            clients: DEFAULT_CLIENTS,
            period: Duration::from_secs(1),
            stall: Duration::from_secs(30),
        }
    }

    /// The TLS configuration to serve with, or `None` for plain HTTP, which is refused on
    /// an address other than loopback unless [`insecure`](Self::insecure).
    pub(crate) fn tls(&self) -> Result<Option<TlsServer>, ViewError> {
        match &self.tls_certificates {
            Some(dir) => TlsServer::load(&CertDir::new(dir), ClientAuth::Required)
                .map(Some)
                .map_err(|e| ViewError::Certificates(dir.clone(), e)),
            None if self.addr.ip().is_loopback() || self.insecure => Ok(None),
            None => Err(ViewError::Insecure(
                self.addr,
                Needs::new(Setting::TlsCertificates),
            )),
        }
    }
}

/// Parses `--view`'s address: `HOST:PORT`, `:PORT` (loopback) or `PORT` (loopback).
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let s = s.trim();
    let full = if let Some(port) = s.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else if s.parse::<u16>().is_ok() {
        format!("127.0.0.1:{s}")
    } else {
        s.to_string()
    };
    full.parse().map_err(|_| {
        format!("'{s}' is not an address to serve the view on (HOST:PORT, :PORT or PORT; e.g. {DEFAULT_ADDR})")
    })
}

/// Why a view did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// Plain HTTP on an address other than loopback.
    #[error("the view on {0} would be seen by anyone who reaches it: serve it on loopback, or over TLS with client certificates, or allow plain HTTP")]
    Insecure(SocketAddr, #[source] Needs),
    /// The certificate directory did not load.
    #[error("the view's certificates in {}", .0.display())]
    Certificates(PathBuf, #[source] offhost_access::AccessError),
    /// The address could not be bound.
    #[error("the view cannot listen on {0}")]
    Bind(SocketAddr, #[source] std::io::Error),
    /// Its thread did not start.
    #[error("the view's thread did not start")]
    Thread(#[source] std::io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_and_who_may_listen_where() {
        assert_eq!(parse_addr(":9000").unwrap().to_string(), "127.0.0.1:9000");
        assert_eq!(parse_addr("9000").unwrap().to_string(), "127.0.0.1:9000");
        assert_eq!(parse_addr("[::1]:80").unwrap().to_string(), "[::1]:80");
        assert!(parse_addr("examples/pet.ion")
            .unwrap_err()
            .contains("not an address"));
        let open = ViewConfig::new("0.0.0.0:9000".parse().unwrap());
        let e = open.tls().unwrap_err();
        assert!(matches!(e, ViewError::Insecure(..)), "{e}");
        let needs = offhost_units::explain(&e, |r| Some(format!("{r:?}")));
        assert!(needs.contains("TlsCertificates"), "{needs}");
        assert!(ViewConfig {
            insecure: true,
            ..open
        }
        .tls()
        .unwrap()
        .is_none());
    }
}
