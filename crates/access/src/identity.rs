//! Which engine a certificate names.
//!
//! `offhost certs DIR --engine NAME` gives engine `NAME` a client and a server certificate of
//! its own whose subject alternative names include the DNS name [`engine_dns_name`]`(NAME)`.
//! An engine can then hold the name another engine says in its hello to the certificate that
//! engine presented ([`names_engine`]), instead of taking the hello's word for it: the client
//! certificate of one that links to it, the server certificate of one it links to.

use rustls::pki_types::{CertificateDer, ServerName};

/// The DNS name an engine's certificate carries for engine `name`: `NAME.engine.offhost`,
/// lower case (names compare without case, as DNS names do).
pub fn engine_dns_name(name: &str) -> String {
    format!("{}.engine.offhost", name.to_ascii_lowercase())
}

/// Whether the certificate `der` (DER, as the TLS handshake received it, already verified
/// against the CA) names engine `name`. False for a certificate that names no engine, or
/// another one, and for a name that cannot be a DNS name.
pub fn names_engine(der: &[u8], name: &str) -> bool {
    let Ok(dns) = ServerName::try_from(engine_dns_name(name)) else {
        return false;
    };
    let der = CertificateDer::from(der);
    let Ok(cert) = webpki::EndEntityCert::try_from(&der) else {
        return false;
    };
    cert.verify_is_valid_for_subject_name(&dns).is_ok()
}
