//! Fixed newstyle handshake and option haggling (server side).

use std::io::{Read, Write};
use std::sync::Arc;

use crate::export::{Export, PREFERRED_BLOCK};
use crate::limits::Refused;
use crate::proto::*;

/// Largest option data accepted; longer options end the session (nothing this server knows
/// needs more than a name and a few information requests).
pub const MAX_OPTION_LEN: u32 = 64 * 1024;

/// What the client chose.
#[derive(Debug)]
pub struct Negotiated {
    /// The export in use.
    pub export: Arc<Export>,
    /// Structured replies were negotiated.
    pub structured: bool,
}

/// How the handshake ended without entering transmission.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HandshakeError {
    /// The socket failed or closed.
    #[error("i/o during handshake: {0}")]
    Io(#[from] std::io::Error),
    /// The client sent something that breaks the protocol; the session was dropped.
    #[error("client broke the handshake: {0}")]
    Protocol(String),
    /// The connection was refused its slot (told so with `NBD_REP_ERR_POLICY`, or, after
    /// `NBD_OPT_EXPORT_NAME`, which cannot carry an error, by the session's end).
    #[error("refused: {0}")]
    Refused(#[from] Refused),
    /// The client aborted (`NBD_OPT_ABORT`).
    #[error("client aborted the negotiation")]
    Aborted,
}

/// Transmission flags for an export.
pub fn transmission_flags(e: &Export, structured: bool) -> u16 {
    let mut f = TFLAG_HAS_FLAGS
        | TFLAG_SEND_FLUSH
        | TFLAG_SEND_FUA
        | TFLAG_SEND_TRIM
        | TFLAG_SEND_WRITE_ZEROES
        | TFLAG_CAN_MULTI_CONN;
    if e.readonly {
        // Writes of every kind are refused with EPERM; do not invite trims and zeroing.
        f = (f & !(TFLAG_SEND_TRIM | TFLAG_SEND_WRITE_ZEROES)) | TFLAG_READ_ONLY;
    }
    if e.backend.rotational() {
        f |= TFLAG_ROTATIONAL;
    }
    if structured {
        // Reads are always answered with a single data chunk.
        f |= TFLAG_SEND_DF;
    }
    f
}

fn find<'a>(exports: &'a [Arc<Export>], name: &str) -> Option<&'a Arc<Export>> {
    if name.is_empty() {
        // The empty name is the default export: the first one declared.
        return exports.first();
    }
    exports.iter().find(|e| e.name == name)
}

fn send_reply<S: Write>(s: &mut S, option: u32, reply: u32, data: &[u8]) -> std::io::Result<()> {
    let mut out = Vec::with_capacity(20 + data.len());
    encode_option_reply(&mut out, option, reply, data);
    s.write_all(&out)
}

/// Refuses a connection after its greeting (over TLS, say): answers every option with
/// `NBD_REP_ERR_POLICY` and `reason` (name the limit and the flag that raises it) until the
/// client aborts or gives up; an `NBD_OPT_EXPORT_NAME`, which cannot carry an error, ends
/// it. Bound the time this may take with the stream's timeouts.
pub fn refuse_options<S: Read + Write>(s: &mut S, reason: &str) -> Result<(), HandshakeError> {
    loop {
        let mut h = [0u8; OPTION_HEADER_LEN];
        s.read_exact(&mut h)?;
        let hdr = parse_option_header(&h).map_err(|e| HandshakeError::Protocol(e.to_string()))?;
        if hdr.length > MAX_OPTION_LEN {
            return Err(HandshakeError::Protocol("option too long".into()));
        }
        std::io::copy(
            &mut (&mut *s).take(u64::from(hdr.length)),
            &mut std::io::sink(),
        )?;
        match hdr.option {
            OPT_EXPORT_NAME => return Ok(()),
            OPT_ABORT => {
                let _ = send_reply(s, hdr.option, REP_ACK, &[]);
                return Ok(());
            }
            opt => send_reply(s, opt, REP_ERR_POLICY, reason.as_bytes())?,
        }
        s.flush()?;
    }
}

/// Runs the server side of the handshake on `s`, without TLS. Returns the negotiated export
/// when the client enters transmission.
pub fn serve_handshake<S: Read + Write>(
    s: &mut S,
    exports: &[Arc<Export>],
) -> Result<Negotiated, HandshakeError> {
    let no_zeroes = serve_greeting(s)?;
    match serve_options(s, exports, no_zeroes, Haggle::default(), &mut || Ok(()))? {
        Haggled::Go(n) => Ok(n),
        Haggled::StartTls => unreachable!("TLS is not offered"),
    }
}

/// What the option haggling may do about TLS (see `tls.rs`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Haggle {
    /// `NBD_OPT_STARTTLS` is accepted (`--tls=on` or `require`).
    pub offer_tls: bool,
    /// Every option but `NBD_OPT_STARTTLS` and `NBD_OPT_ABORT` is refused with
    /// `NBD_REP_ERR_TLS_REQD` until TLS is on (`--tls=require`: the spec's FORCEDTLS).
    pub require_tls: bool,
    /// TLS is on: this haggling runs after `NBD_OPT_STARTTLS`.
    pub tls_active: bool,
}

/// How option haggling ended.
#[derive(Debug)]
pub enum Haggled {
    /// The client entered transmission.
    Go(Negotiated),
    /// The client asked for TLS and was answered `NBD_REP_ACK`: the TLS handshake follows,
    /// then the haggling goes on over TLS (with a fresh state, as the spec asks).
    StartTls,
}

/// Sends the server's greeting and reads the client's flags; returns whether the client
/// asked for no zeroes.
pub fn serve_greeting<S: Read + Write>(s: &mut S) -> Result<bool, HandshakeError> {
    s.write_all(&greeting())?;
    s.flush()?;
    read_client_flags(s)
}

/// The server's greeting (fixed newstyle, no zeroes).
pub fn greeting() -> [u8; 18] {
    let mut hello = [0u8; 18];
    hello[..8].copy_from_slice(&NBD_MAGIC.to_be_bytes());
    hello[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    hello[16..].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    hello
}

/// Reads the client's flags after the greeting; returns whether it asked for no zeroes.
pub fn read_client_flags<S: Read>(s: &mut S) -> Result<bool, HandshakeError> {
    let mut cf = [0u8; 4];
    s.read_exact(&mut cf)?;
    let client_flags = u32::from_be_bytes(cf);
    if client_flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Err(HandshakeError::Protocol(format!(
            "unknown client flags {client_flags:#x}"
        )));
    }
    Ok(client_flags & FLAG_C_NO_ZEROES != 0)
}

/// Haggles options until the client enters transmission or asks for TLS. `admit` is asked
/// before a client enters transmission: an `Err` (a reason naming the limit) answers
/// `NBD_OPT_GO` with `NBD_REP_ERR_POLICY`, and ends the session on `NBD_OPT_EXPORT_NAME`.
pub fn serve_options<S: Read + Write>(
    s: &mut S,
    exports: &[Arc<Export>],
    no_zeroes: bool,
    haggle: Haggle,
    admit: &mut dyn FnMut() -> Result<(), Refused>,
) -> Result<Haggled, HandshakeError> {
    let mut structured = false;
    loop {
        let mut h = [0u8; OPTION_HEADER_LEN];
        s.read_exact(&mut h)?;
        let hdr = parse_option_header(&h).map_err(|e| HandshakeError::Protocol(e.to_string()))?;
        if hdr.length > MAX_OPTION_LEN {
            return Err(HandshakeError::Protocol(format!(
                "option {} carries {} bytes, more than {MAX_OPTION_LEN}",
                hdr.option, hdr.length
            )));
        }
        let mut data = vec![0u8; hdr.length as usize];
        s.read_exact(&mut data)?;
        let opt = hdr.option;
        if haggle.require_tls && !haggle.tls_active && opt != OPT_STARTTLS && opt != OPT_ABORT {
            if opt == OPT_EXPORT_NAME {
                // This option cannot carry an error: the spec says to end the session.
                return Err(HandshakeError::Protocol(
                    "NBD_OPT_EXPORT_NAME before TLS on a server that requires TLS".into(),
                ));
            }
            send_reply(
                s,
                opt,
                REP_ERR_TLS_REQD,
                b"this server requires TLS: send NBD_OPT_STARTTLS first",
            )?;
            s.flush()?;
            continue;
        }
        match opt {
            OPT_EXPORT_NAME => {
                let name = String::from_utf8_lossy(&data);
                let Some(e) = find(exports, &name) else {
                    // This option cannot carry an error: the spec says to end the session.
                    return Err(HandshakeError::Protocol(format!(
                        "NBD_OPT_EXPORT_NAME for unknown export `{name}`"
                    )));
                };
                // This option cannot carry an error either.
                admit()?;
                let mut out = Vec::with_capacity(134);
                out.extend_from_slice(&e.backend.size().to_be_bytes());
                out.extend_from_slice(&transmission_flags(e, structured).to_be_bytes());
                if !no_zeroes {
                    out.extend_from_slice(&[0u8; 124]);
                }
                s.write_all(&out)?;
                s.flush()?;
                return Ok(Haggled::Go(Negotiated {
                    export: e.clone(),
                    structured,
                }));
            }
            OPT_ABORT => {
                // The client may already have closed; a failed ack is not an error.
                let _ = send_reply(s, opt, REP_ACK, &[]).and_then(|_| s.flush());
                return Err(HandshakeError::Aborted);
            }
            OPT_LIST => {
                if !data.is_empty() {
                    send_reply(s, opt, REP_ERR_INVALID, b"NBD_OPT_LIST takes no data")?;
                } else {
                    for e in exports {
                        send_reply(s, opt, REP_SERVER, &rep_server(&e.name, &e.description))?;
                    }
                    send_reply(s, opt, REP_ACK, &[])?;
                }
            }
            OPT_STRUCTURED_REPLY => {
                if !data.is_empty() {
                    send_reply(
                        s,
                        opt,
                        REP_ERR_INVALID,
                        b"NBD_OPT_STRUCTURED_REPLY takes no data",
                    )?;
                } else {
                    structured = true;
                    send_reply(s, opt, REP_ACK, &[])?;
                }
            }
            OPT_INFO | OPT_GO => {
                let req = match parse_info_request(&data) {
                    Ok(r) => r,
                    Err(e) => {
                        send_reply(s, opt, REP_ERR_INVALID, e.to_string().as_bytes())?;
                        s.flush()?;
                        continue;
                    }
                };
                let Some(e) = find(exports, &req.name) else {
                    let msg = format!("no export named `{}`", req.name);
                    send_reply(s, opt, REP_ERR_UNKNOWN, msg.as_bytes())?;
                    s.flush()?;
                    continue;
                };
                if opt == OPT_GO {
                    if let Err(why) = admit() {
                        send_reply(s, opt, REP_ERR_POLICY, why.for_client().as_bytes())?;
                        s.flush()?;
                        continue;
                    }
                }
                send_reply(
                    s,
                    opt,
                    REP_INFO,
                    &info_export(e.backend.size(), transmission_flags(e, structured)),
                )?;
                // Block sizes are sent whether or not they were asked for (the spec allows it).
                let max = (e.max_payload as u64).min(e.backend.size().max(1)) as u32;
                send_reply(
                    s,
                    opt,
                    REP_INFO,
                    &info_block_size(
                        e.min_block,
                        PREFERRED_BLOCK.max(e.min_block),
                        max.max(e.min_block),
                    ),
                )?;
                if req.requests.contains(&INFO_NAME) {
                    send_reply(s, opt, REP_INFO, &info_string(INFO_NAME, &e.name))?;
                }
                if req.requests.contains(&INFO_DESCRIPTION) && !e.description.is_empty() {
                    send_reply(
                        s,
                        opt,
                        REP_INFO,
                        &info_string(INFO_DESCRIPTION, &e.description),
                    )?;
                }
                send_reply(s, opt, REP_ACK, &[])?;
                if opt == OPT_GO {
                    s.flush()?;
                    return Ok(Haggled::Go(Negotiated {
                        export: e.clone(),
                        structured,
                    }));
                }
            }
            OPT_STARTTLS => {
                if !data.is_empty() {
                    send_reply(s, opt, REP_ERR_INVALID, b"NBD_OPT_STARTTLS takes no data")?;
                } else if haggle.tls_active {
                    send_reply(s, opt, REP_ERR_INVALID, b"TLS is already on")?;
                } else if !haggle.offer_tls {
                    send_reply(s, opt, REP_ERR_UNSUP, b"this server does not offer TLS")?;
                } else {
                    send_reply(s, opt, REP_ACK, &[])?;
                    s.flush()?;
                    return Ok(Haggled::StartTls);
                }
            }
            _ => {
                let msg = format!("option {opt} is not supported by this server");
                send_reply(s, opt, REP_ERR_UNSUP, msg.as_bytes())?;
            }
        }
        s.flush()?;
    }
}
