//! Access control shared by offhost's servers and clients.
//!
//! - [`certs`]: the certificate directory in nbdkit/libnbd's layout (`ca-cert.pem`,
//!   `server-cert.pem`, `server-key.pem`, `client-cert.pem`, `client-key.pem`), and
//!   [`certs::generate`] that creates one (a CA, a server and a client certificate);
//! - [`config`]: rustls configurations from such a directory: a server that presents its
//!   certificate and verifies client certificates against the CA, a client that verifies the
//!   server and presents its own;
//! - [`stream`]: one TLS connection over a stream socket split into a reading and a writing
//!   half that different threads use at once (the link's wire and the NBD transmission
//!   phase);
//! - [`identity`]: which engine a certificate names (`offhost certs --engine NAME`);
//! - [`peer`]: who may connect to a Unix socket (`SO_PEERCRED` against our uid and an allow
//!   list);
//! - [`tcp`]: keepalive probes, so that a peer that vanished without closing its TCP
//!   connection is found out;
//! - [`unproven`]: the budget of connections that have not yet proved who they are (per
//!   source and in total, with a deadline; the oldest silent one makes way), so that nothing
//!   unauthenticated holds what authenticated peers need;
//! - [`lobby`]: where accepted connections wait, with no thread, until their peer has said
//!   something (a silent or trickling crowd costs a descriptor each, never a handshake);
//! - [`crowd`]: connections that never prove themselves (silent or trickling, from many
//!   source addresses), for the tests and benchmarks of that budget.
//!
//! Everything is rustls with the *ring* provider: no OpenSSL.
#![forbid(unsafe_code)]

pub mod certs;
pub mod config;
pub mod crowd;
mod error;
pub mod identity;
pub mod lobby;
pub mod peer;
pub mod stream;
pub mod tcp;
pub mod unproven;

pub use certs::CertDir;
pub use config::{ClientAuth, TlsClient, TlsServer};
pub use error::AccessError;
pub use lobby::{Lobby, LobbyLimits, LOBBY_PER_HANDSHAKE};
pub use peer::AllowUids;
pub use stream::{handshake, handshake_observed, TlsReader, TlsStream, TlsWriter};
pub use unproven::{Source, Ticket, Unproven, UnprovenLimits, UnprovenStats};
