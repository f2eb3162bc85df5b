//! What every TCP connection of a link is set to, at both ends.

use std::net::TcpStream;

use crate::error::LinkError;

/// Sets `TCP_NODELAY` (a link batches its own writes) and keepalive probes
/// ([`offhost_access::tcp::keepalive`]): a session that nothing is sent on otherwise never
/// finds out that its peer's machine has vanished.
pub(crate) fn tune(s: &TcpStream) -> Result<(), LinkError> {
    s.set_nodelay(true)
        .map_err(|e| LinkError::io("set TCP_NODELAY", e))?;
    offhost_access::tcp::keepalive(s).map_err(|e| LinkError::io("set TCP keepalive", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_connection_is_tuned_at_both_ends() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, _) = l.accept().unwrap();
        for s in [&a, &c] {
            tune(s).unwrap();
            assert!(s.nodelay().unwrap());
            assert!(rustix::net::sockopt::socket_keepalive(s).unwrap());
        }
    }
}
