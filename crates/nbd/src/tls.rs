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

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use offhost_access::{CertDir, ClientAuth, TlsReader, TlsServer, TlsWriter};

use crate::export::Export;
use crate::handshake::{
    refuse_options, serve_options, Haggle, Haggled, HandshakeError, Negotiated,
};
use crate::limits::Refused;
use crate::server::Stream;

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

/// A `--tls` mode that is not `off`, `on` or `require`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not off, on or require")]
pub struct TlsModeError(pub String);

impl std::str::FromStr for TlsMode {
    type Err = TlsModeError;
    fn from_str(s: &str) -> Result<Self, TlsModeError> {
        match s {
            "off" | "no" | "false" => Ok(TlsMode::Off),
            "on" | "yes" | "true" => Ok(TlsMode::On),
            "require" | "required" => Ok(TlsMode::Require),
            _ => Err(TlsModeError(s.to_owned())),
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
    #[error("TLS mode {0} needs a certificate directory ({1})")]
    NoCertificates(&'static str, #[source] offhost_units::Needs),
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
        let dir = dir.ok_or(TlsSetupError::NoCertificates(
            name,
            offhost_units::Needs::new(offhost_units::Setting::TlsCertificates),
        ))?;
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
/// then option haggling over TLS until the client enters transmission, all by `deadline` (the
/// handshake's, which began before `NBD_OPT_STARTTLS`).
///
/// `admit` is asked once the TLS handshake is over (the client is past TLS): refused, every
/// option over TLS is answered `NBD_REP_ERR_POLICY` with its reason.
pub(crate) fn upgrade(
    stream: Stream,
    tls: &NbdTls,
    exports: &[Arc<Export>],
    no_zeroes: bool,
    deadline: Instant,
    admit: &mut dyn FnMut() -> Result<(), Refused>,
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
    let left = left_until(deadline).map_err(HandshakeError::Io)?;
    let (r, w) = offhost_access::handshake(fd, conn, left)
        .map_err(|e| HandshakeError::Protocol(e.to_string()))?;
    let mut s = DeadlineTls { r, w, deadline };
    if let Err(why) = admit() {
        refuse_options(&mut s, &why.for_client())?;
        return Err(HandshakeError::Refused(why));
    }
    let haggle = Haggle {
        tls_active: true,
        ..tls.haggle()
    };
    match serve_options(&mut s, exports, no_zeroes, haggle, admit)? {
        Haggled::Go(n) => {
            let (mut r, w) = (s.r, s.w);
            r.set_timeout(None);
            Ok(Haggled2::Tls(r, w, n))
        }
        Haggled::StartTls => Err(HandshakeError::Protocol("NBD_OPT_STARTTLS twice".into())),
    }
}

/// The time left until `deadline`, or the error that names the handshake's limit.
fn left_until(deadline: Instant) -> io::Result<std::time::Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(crate::limits::deadline_passed)
}

/// Option haggling over TLS: every read and write ends by the handshake's deadline.
struct DeadlineTls {
    r: TlsReader,
    w: TlsWriter,
    deadline: Instant,
}

fn past_deadline(e: io::Error) -> io::Error {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => crate::limits::deadline_passed(),
        _ => e,
    }
}

impl io::Read for DeadlineTls {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.r.set_timeout(Some(left_until(self.deadline)?));
        self.r.read(buf).map_err(past_deadline)
    }
}

impl io::Write for DeadlineTls {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        loop {
            match self.w.write_nb(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.w.wait(Some(left_until(self.deadline)?))?;
                }
                r => return r,
            }
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        // A write returns once its records have left; an empty one sends what is owed.
        self.write(&[]).map(|_| ())
    }
}
