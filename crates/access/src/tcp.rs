//! Keepalive probes for the TCP connections of offhost's servers and clients.

use std::net::TcpStream;
use std::time::Duration;

/// Idle time before the kernel first probes a silent connection.
pub const KEEPALIVE_IDLE: Duration = Duration::from_secs(60);
/// Time between probes that go unanswered.
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);
/// Unanswered probes after which the connection fails.
pub const KEEPALIVE_PROBES: u32 = 6;

/// Turns on keepalive probes: a peer whose machine vanished without closing the connection
/// fails it within two minutes of silence (60 s, then six probes 10 s apart), so that the
/// threads and memory waiting on it are let go. Without probes, a connection nothing is
/// sent on waits for ever.
pub fn keepalive(s: &TcpStream) -> std::io::Result<()> {
    use rustix::net::sockopt;
    sockopt::set_tcp_keepidle(s, KEEPALIVE_IDLE)?;
    sockopt::set_tcp_keepintvl(s, KEEPALIVE_INTERVAL)?;
    sockopt::set_tcp_keepcnt(s, KEEPALIVE_PROBES)?;
    sockopt::set_socket_keepalive(s, true)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::net::sockopt;

    #[test]
    fn both_ends_probe_a_silent_connection() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (a, _) = l.accept().unwrap();
        for s in [&a, &c] {
            assert!(!sockopt::socket_keepalive(s).unwrap());
            keepalive(s).unwrap();
            assert!(sockopt::socket_keepalive(s).unwrap());
            assert_eq!(sockopt::tcp_keepidle(s).unwrap(), KEEPALIVE_IDLE);
            assert_eq!(sockopt::tcp_keepintvl(s).unwrap(), KEEPALIVE_INTERVAL);
            assert_eq!(sockopt::tcp_keepcnt(s).unwrap(), KEEPALIVE_PROBES);
        }
    }
}
