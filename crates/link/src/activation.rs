//! Socket activation: listening sockets that systemd (or `systemd-socket-activate`) opened and
//! passed to this process (`LISTEN_FDS`, `LISTEN_PID`; descriptors from 3 on), taken by the
//! listeners `tls:systemd` and `tcp:systemd` in the order they are bound.
//!
//! The environment is read once and cleared (the sockets are not passed on to children): by
//! [`read_passed_sockets`], which a program should call before it starts threads (clearing
//! the environment races other threads' reads of it), or else by the first such listener.
//! Each socket must be a TCP stream socket that listens (`ListenStream=` in the `.socket`
//! unit); anything else is an error that names the descriptor.

use std::sync::{Mutex, OnceLock};

use crate::error::LinkError;

/// The address that names a socket passed by systemd in a `tcp:` or `tls:` listener URL.
pub const SYSTEMD: &str = "systemd";

/// What errors about passed sockets say they were about.
const WHAT: &str = "socket activation";

/// The sockets passed to this process, and how many listeners took one.
static PASSED: OnceLock<Mutex<(listenfd::ListenFd, usize)>> = OnceLock::new();

/// Reads which sockets systemd passed this process (`LISTEN_FDS`, `LISTEN_PID`) and clears
/// those variables, once; later calls do nothing. Call it before starting threads.
pub fn read_passed_sockets() {
    passed();
}

fn passed() -> &'static Mutex<(listenfd::ListenFd, usize)> {
    PASSED.get_or_init(|| Mutex::new((listenfd::ListenFd::from_env(), 0)))
}

/// The next listening socket systemd passed, for a `SCHEME:systemd` listener, with the URL
/// it listens at.
pub(crate) fn next_listener(scheme: &str) -> Result<(std::net::TcpListener, String), LinkError> {
    let err =
        |why: String| LinkError::io(WHAT, std::io::Error::new(std::io::ErrorKind::NotFound, why));
    let mut passed = passed().lock().unwrap_or_else(|e| e.into_inner());
    let (fds, taken) = &mut *passed;
    let index = *taken;
    if index >= fds.len() {
        return Err(err(match fds.len() {
            0 => "systemd passed this process no listening socket (LISTEN_FDS is not set for \
                  it): start it through its .socket unit (or systemd-socket-activate), or \
                  listen at HOST:PORT"
                .into(),
            n => format!(
                "systemd passed {n} listening socket(s), all taken by the --listen \
                 ...:{SYSTEMD} before this one"
            ),
        }));
    }
    let fd = 3 + index;
    let l = fds
        .take_tcp_listener(index)
        .map_err(|e| LinkError::io(format!("{WHAT}: descriptor {fd}"), e))?
        .ok_or_else(|| err(format!("descriptor {fd} was taken already")))?;
    *taken += 1;
    let listening = rustix::net::sockopt::socket_acceptconn(&l)
        .map_err(|e| LinkError::io(format!("{WHAT}: descriptor {fd}"), e.into()))?;
    if !listening {
        return Err(err(format!(
            "descriptor {fd} is a TCP socket that does not listen (use ListenStream= in the \
             .socket unit)"
        )));
    }
    let local = l
        .local_addr()
        .map_err(|e| LinkError::io("local address", e))?;
    Ok((l, format!("{scheme}:{local}")))
}
