//! Errors of certificate directories, TLS set-up and peer checks.

use std::path::PathBuf;

/// Access could not be set up, or a peer was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AccessError {
    /// A file of the certificate directory could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A PEM file holds nothing usable.
    #[error("{path}: {why}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// Creating certificates failed.
    #[error("generating certificates: {0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the configuration (a key that does not match its certificate, say).
    #[error("tls configuration from {dir}: {source}")]
    Config {
        /// The certificate directory.
        dir: PathBuf,
        /// The cause.
        source: rustls::Error,
    },
    /// An engine name that cannot be put in a certificate.
    #[error("{0}")]
    EngineName(String),
    /// A host name that cannot be a TLS server name.
    #[error("{0:?} is not a valid TLS server name (a DNS name or an IP address)")]
    ServerName(String),
    /// The TLS handshake failed (the peer's certificate was refused, or ours was).
    #[error("tls handshake: {0}")]
    Handshake(std::io::Error),
    /// The peer of a Unix socket runs as a user that is not allowed.
    #[error("peer uid {theirs} is not allowed (ours is {ours}; {needs} admits other uids)")]
    PeerUid {
        /// Our uid.
        ours: u32,
        /// The peer's uid.
        theirs: u32,
        /// What admits it: the setting `allow_uid`.
        #[source]
        needs: offhost_units::Needs,
    },
    /// The peer's credentials could not be read.
    #[error("SO_PEERCRED: {0}")]
    PeerCred(std::io::Error),
}

impl AccessError {
    pub(crate) fn file(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> AccessError {
        let path = path.into();
        move |source| AccessError::File { path, source }
    }
}
