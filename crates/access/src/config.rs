//! rustls configurations built from a certificate directory.

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};

use crate::certs::{CertDir, CA_CERT, CLIENT_CERT, CLIENT_KEY, SERVER_CERT, SERVER_KEY};
use crate::error::AccessError;

/// Whether a server asks clients for a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// A client must present a certificate signed by the directory's CA (the link; NBD with
    /// `--tls-verify-peer`).
    Required,
    /// A client certificate is verified against the CA when presented, and a client may
    /// present none (NBD's default, as nbdkit's).
    Optional,
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn certs(dir: &CertDir, name: &str) -> Result<Vec<CertificateDer<'static>>, AccessError> {
    let path = dir.file(name);
    // Read it ourselves first, so a missing file says so plainly.
    let pem = std::fs::read(&path).map_err(AccessError::file(&path))?;
    let v = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| AccessError::Pem {
            path: path.clone(),
            why: e.to_string(),
        })?;
    if v.is_empty() {
        return Err(AccessError::Pem {
            path,
            why: "no CERTIFICATE in it".into(),
        });
    }
    Ok(v)
}

fn key(dir: &CertDir, name: &str) -> Result<PrivateKeyDer<'static>, AccessError> {
    let path = dir.file(name);
    let pem = std::fs::read(&path).map_err(AccessError::file(&path))?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| AccessError::Pem {
        path,
        why: format!("no private key in it: {e}"),
    })
}

fn roots(dir: &CertDir) -> Result<RootCertStore, AccessError> {
    let mut roots = RootCertStore::empty();
    for c in certs(dir, CA_CERT)? {
        roots.add(c).map_err(|source| AccessError::Config {
            dir: dir.path().to_owned(),
            source,
        })?;
    }
    Ok(roots)
}

/// The largest TLS record this side sends, header included and the AEAD's type byte and tag
/// not (rustls's `max_fragment_size`): so that a full TLS 1.3 record is 5 + 16,378 + 1 + 16 =
/// 16,400 bytes, a multiple of 16. A stream of full records then keeps the kernel's socket
/// buffers 16-byte aligned for every record copied into them, as frames do on a plain socket
/// (`offhost_proto::frame`, "Why frames are 16-byte aligned"); with full 16 KiB records
/// (16,406 bytes) almost every record was copied to an address that is not.
pub const RECORD_SIZE: usize = 16_383;
/// The plaintext of one full record sent: [`RECORD_SIZE`] less the record header.
pub const RECORD_PLAINTEXT: usize = RECORD_SIZE - 5;

/// A server's TLS configuration: its certificate and key, and the CA it checks clients with.
#[derive(Debug, Clone)]
pub struct TlsServer {
    config: Arc<ServerConfig>,
}

impl TlsServer {
    /// Reads `ca-cert.pem`, `server-cert.pem` and `server-key.pem` from `dir`.
    pub fn load(dir: &CertDir, auth: ClientAuth) -> Result<TlsServer, AccessError> {
        let cfg_err = |source| AccessError::Config {
            dir: dir.path().to_owned(),
            source,
        };
        let roots = Arc::new(roots(dir)?);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider());
        let verifier = match auth {
            ClientAuth::Required => verifier,
            ClientAuth::Optional => verifier.allow_unauthenticated(),
        }
        .build()
        .map_err(|e| cfg_err(rustls::Error::General(e.to_string())))?;
        let mut config = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(cfg_err)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs(dir, SERVER_CERT)?, key(dir, SERVER_KEY)?)
            .map_err(cfg_err)?;
        config.max_fragment_size = Some(RECORD_SIZE);
        Ok(TlsServer {
            config: Arc::new(config),
        })
    }

    /// The rustls configuration.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.config.clone()
    }

    /// A new server connection.
    pub fn connection(&self) -> Result<rustls::ServerConnection, AccessError> {
        rustls::ServerConnection::new(self.config.clone()).map_err(|source| AccessError::Config {
            dir: "(server)".into(),
            source,
        })
    }
}

/// A client's TLS configuration: the CA it checks servers with, and its own certificate when
/// the directory has one.
#[derive(Debug, Clone)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
}

impl TlsClient {
    /// Reads `ca-cert.pem`, and `client-cert.pem` with `client-key.pem` when both are there,
    /// from `dir`.
    pub fn load(dir: &CertDir) -> Result<TlsClient, AccessError> {
        let cfg_err = |source| AccessError::Config {
            dir: dir.path().to_owned(),
            source,
        };
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(cfg_err)?
            .with_root_certificates(roots(dir)?);
        let mut config = if dir.has_client_identity() {
            builder
                .with_client_auth_cert(certs(dir, CLIENT_CERT)?, key(dir, CLIENT_KEY)?)
                .map_err(cfg_err)?
        } else {
            builder.with_no_client_auth()
        };
        config.max_fragment_size = Some(RECORD_SIZE);
        Ok(TlsClient {
            config: Arc::new(config),
        })
    }

    /// The rustls configuration.
    pub fn config(&self) -> Arc<ClientConfig> {
        self.config.clone()
    }

    /// A new connection to the server named `host` (a DNS name or an IP address, which the
    /// server's certificate must carry).
    pub fn connection(&self, host: &str) -> Result<rustls::ClientConnection, AccessError> {
        rustls::ClientConnection::new(self.config.clone(), server_name(host)?).map_err(|source| {
            AccessError::Config {
                dir: "(client)".into(),
                source,
            }
        })
    }
}

/// The TLS server name of `host` (`[::1]` is taken as `::1`).
pub fn server_name(host: &str) -> Result<ServerName<'static>, AccessError> {
    let h = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    ServerName::try_from(h.to_owned()).map_err(|_| AccessError::ServerName(host.to_owned()))
}
