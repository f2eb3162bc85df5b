//! The control connection: a Unix stream socket that carries the segment's memfd once
//! (SCM_RIGHTS) and then stays open, silent, so that each side learns when the other is gone.

use rustix::fd::{AsFd, BorrowedFd, OwnedFd};
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use std::io::{IoSlice, IoSliceMut, Read};
use std::mem::MaybeUninit;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::error::ShmError;

/// First bytes of the host's hello, sent together with the memfd.
pub(crate) const HELLO: [u8; 8] = *b"OFFHCTL1";
/// How long either side waits for the other during the handshake.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Refuses a peer that runs as another user.
pub(crate) fn check_peer_uid(sock: &UnixStream) -> Result<(), ShmError> {
    check_peer_uid_allowing(sock, &[])
}

/// Refuses a peer that runs as another user than ours and those in `allowed`.
pub(crate) fn check_peer_uid_allowing(sock: &UnixStream, allowed: &[u32]) -> Result<(), ShmError> {
    let cred = rustix::net::sockopt::socket_peercred(sock).map_err(ShmError::io("SO_PEERCRED"))?;
    let ours = rustix::process::getuid().as_raw();
    let theirs = cred.uid.as_raw();
    if ours != theirs && !allowed.contains(&theirs) {
        return Err(ShmError::PeerUid { ours, theirs });
    }
    Ok(())
}

/// Sends the hello and the segment's fd.
pub(crate) fn send_hello(sock: &UnixStream, fd: BorrowedFd<'_>) -> Result<(), ShmError> {
    let fds = [fd];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = SendAncillaryBuffer::new(&mut space);
    if !cmsg.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(ShmError::Handshake("no room for the fd".into()));
    }
    let n = rustix::net::sendmsg(
        sock,
        &[IoSlice::new(&HELLO)],
        &mut cmsg,
        SendFlags::NOSIGNAL,
    )
    .map_err(ShmError::io("sendmsg"))?;
    if n != HELLO.len() {
        return Err(ShmError::Handshake(format!("short hello: {n} bytes")));
    }
    Ok(())
}

/// Receives the hello and the segment's fd.
pub(crate) fn recv_hello(sock: &UnixStream) -> Result<OwnedFd, ShmError> {
    let mut hello = [0u8; HELLO.len()];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut cmsg = RecvAncillaryBuffer::new(&mut space);
    let msg = rustix::net::recvmsg(
        sock,
        &mut [IoSliceMut::new(&mut hello)],
        &mut cmsg,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(|e| match e {
        rustix::io::Errno::AGAIN => ShmError::Handshake("no hello from the peer in time".into()),
        e => ShmError::io("recvmsg")(e),
    })?;
    let mut fd = None;
    for m in cmsg.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = m {
            for f in fds {
                fd.get_or_insert(f);
            }
        }
    }
    if msg.bytes != HELLO.len() || hello != HELLO {
        return Err(ShmError::Handshake(format!(
            "bad hello: expected {:?}, got {:?}",
            String::from_utf8_lossy(&HELLO),
            String::from_utf8_lossy(&hello[..msg.bytes])
        )));
    }
    fd.ok_or_else(|| ShmError::Handshake("hello carried no segment fd".into()))
}

/// The engine's answer to the host's segment.
pub(crate) enum Verdict<'a> {
    /// Attached: the link is up.
    Accept,
    /// Refused: the reason's text crosses to the host (at most 1024 bytes), whose
    /// [`connect`](crate::connect) returns it in its error.
    Refuse(&'a dyn std::fmt::Display),
}

/// Engine: tells the host whether it accepted the segment.
pub(crate) fn send_verdict(sock: &UnixStream, verdict: Verdict<'_>) {
    let (status, msg) = match verdict {
        Verdict::Accept => (0u8, String::new()),
        Verdict::Refuse(why) => (1u8, why.to_string()),
    };
    // At most 1024 bytes, cut at a character boundary.
    let mut end = msg.len().min(1024);
    while !msg.is_char_boundary(end) {
        end -= 1;
    }
    let msg = &msg.as_bytes()[..end];
    let mut out = vec![status];
    out.extend_from_slice(&(msg.len() as u16).to_le_bytes());
    out.extend_from_slice(msg);
    // NOSIGNAL: a host that left before its verdict must not end an engine that does not
    // ignore SIGPIPE (a C program using the C binding). One send: the verdict is small.
    let _ = rustix::net::send(sock, &out, SendFlags::NOSIGNAL);
}

/// Host: waits for the engine's verdict on the segment.
pub(crate) fn recv_verdict(mut sock: &UnixStream) -> Result<(), ShmError> {
    let mut head = [0u8; 3];
    sock.read_exact(&mut head).map_err(|e| {
        ShmError::Handshake(format!("no verdict from the engine on the segment: {e}"))
    })?;
    let mut msg = vec![0u8; u16::from_le_bytes([head[1], head[2]]) as usize];
    sock.read_exact(&mut msg)
        .map_err(|e| ShmError::Handshake(format!("truncated verdict: {e}")))?;
    match head[0] {
        0 => Ok(()),
        _ => Err(ShmError::Handshake(format!(
            "the engine refused the segment: {}",
            String::from_utf8_lossy(&msg)
        ))),
    }
}

/// Non-blocking check of the control connection: `Err(PeerGone)` once the peer has closed it
/// or died. After the handshake the peer never writes, so readable means end of file.
pub(crate) fn check_alive(sock: &UnixStream) -> Result<(), ShmError> {
    let mut probe = [0u8; 1];
    match rustix::net::recv(
        sock.as_fd(),
        &mut probe,
        RecvFlags::PEEK | RecvFlags::DONTWAIT,
    ) {
        Ok((0, _)) => Err(ShmError::PeerGone),
        Ok(_) => Err(ShmError::CorruptPeer(
            "unexpected data on the control connection".into(),
        )),
        Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => Ok(()),
        Err(_) => Err(ShmError::PeerGone),
    }
}
