//! TLS for NBD, as the protocol specifies it: the client asks with `NBD_OPT_STARTTLS` during
//! option haggling, the server answers `NBD_REP_ACK`, both run the TLS handshake on the same
//! socket, and the haggling goes on encrypted (fresh: nothing negotiated before is kept).
//!
//! The modes follow nbdkit's `--tls`:
//!
//! | mode | spec | a client that does not start TLS |
//! |---|---|---|
//! | `off` | NOTLS | is served; `NBD_OPT_STARTTLS` is answered `NBD_REP_ERR_UNSUP` |
//! | `on` | SELECTIVETLS (no export is TLS-only) | is served |
//! | `require` | FORCEDTLS | gets `NBD_REP_ERR_TLS_REQD` for every option but `NBD_OPT_STARTTLS` and `NBD_OPT_ABORT` (`NBD_OPT_EXPORT_NAME` ends the session) |
//!
//! Certificates come from a directory in nbdkit's layout (`--tls-certificates DIR`: the
//! server's `server-cert.pem`, `server-key.pem`, and `ca-cert.pem` to verify clients with). A
//! client certificate is verified when one is presented, and required with
//! `--tls-verify-peer`.

use std::path::Path;
use std::sync::Arc;

use offhost_access::{CertDir, ClientAuth, TlsReader, TlsServer, TlsStream, TlsWriter};

use crate::export::Export;
use crate::handshake::{serve_options, Haggle, Haggled, HandshakeError, Negotiated};
use crate::server::{Stream, HANDSHAKE_TIMEOUT};

/// `--tls=off|on|require`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum TlsMode {
    /// No TLS.
    #[default]
    Off,
    /// TLS offered, not required.
    On,
    /// TLS required before anything else.
    Require,
}

impl std::str::FromStr for TlsMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" | "no" | "false" => Ok(TlsMode::Off),
            "on" | "yes" | "true" => Ok(TlsMode::On),
            "require" | "required" => Ok(TlsMode::Require),
            _ => Err(format!("`{s}` is not off, on or require")),
        }
    }
}

/// A server's TLS: its mode and, unless off, its certificates.
#[derive(Debug, Clone, Default)]
pub struct NbdTls {
    mode: TlsMode,
    server: Option<TlsServer>,
}

/// TLS could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsSetupError {
    /// TLS on or required without a certificate directory.
    #[error("--tls={0} needs --tls-certificates DIR (`offhost certs DIR` creates one)")]
    NoCertificates(&'static str),
    /// The directory's certificates could not be loaded.
    #[error("{0}")]
    Certificates(#[from] offhost_access::AccessError),
}

impl NbdTls {
    /// No TLS.
    pub fn off() -> NbdTls {
        NbdTls::default()
    }

    /// TLS in `mode` with the certificates of `dir`; client certificates are required when
    /// `verify_peer`, and verified when presented otherwise.
    pub fn new(
        mode: TlsMode,
        dir: Option<&Path>,
        verify_peer: bool,
    ) -> Result<NbdTls, TlsSetupError> {
        if mode == TlsMode::Off {
            return Ok(NbdTls::off());
        }
        let name = if mode == TlsMode::On { "on" } else { "require" };
        let dir = dir.ok_or(TlsSetupError::NoCertificates(name))?;
        let auth = if verify_peer {
            ClientAuth::Required
        } else {
            ClientAuth::Optional
        };
        Ok(NbdTls {
            mode,
            server: Some(TlsServer::load(&CertDir::new(dir), auth)?),
        })
    }

    /// The mode.
    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    /// How option haggling treats TLS before it is on.
    pub(crate) fn haggle(&self) -> Haggle {
        Haggle {
            offer_tls: self.server.is_some(),
            require_tls: self.mode == TlsMode::Require,
            tls_active: false,
        }
    }
}

/// A connection after option haggling: plain, or TLS (both halves).
pub(crate) enum Haggled2 {
    Plain(Stream, Negotiated),
    Tls(TlsReader, TlsWriter, Negotiated),
}

/// After the client's `NBD_OPT_STARTTLS` was acknowledged on `stream`: the TLS handshake,
/// then option haggling over TLS until the client enters transmission.
pub(crate) fn upgrade(
    stream: Stream,
    tls: &NbdTls,
    exports: &[Arc<Export>],
    no_zeroes: bool,
) -> Result<Haggled2, HandshakeError> {
    let server = tls
        .server
        .as_ref()
        .expect("STARTTLS is acknowledged only when TLS is offered");
    let conn = server
        .connection()
        .map_err(|e| HandshakeError::Protocol(e.to_string()))?;
    let fd: std::os::fd::OwnedFd = match stream {
        Stream::Tcp(s) => s.into(),
        Stream::Unix(s) => s.into(),
    };
    let (r, w) = offhost_access::handshake(fd, conn, HANDSHAKE_TIMEOUT)
        .map_err(|e| HandshakeError::Protocol(e.to_string()))?;
    let mut s = TlsStream::new(r, w);
    s.set_read_timeout(Some(HANDSHAKE_TIMEOUT));
    let haggle = Haggle {
        tls_active: true,
        ..tls.haggle()
    };
    match serve_options(&mut s, exports, no_zeroes, haggle)? {
        Haggled::Go(n) => {
            s.set_read_timeout(None);
            let (r, w) = s.into_halves();
            Ok(Haggled2::Tls(r, w, n))
        }
        Haggled::StartTls => Err(HandshakeError::Protocol("NBD_OPT_STARTTLS twice".into())),
    }
}
