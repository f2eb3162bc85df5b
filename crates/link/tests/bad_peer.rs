//! A peer that sends garbage gets an error frame and a closed link; the server keeps serving.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use offhost_link::{ChannelOptions, Session};
use offhost_proto::Frame;

fn garbage_then_error_frame(stream: &mut (impl Read + Write), garbage: &[u8]) -> (u32, String) {
    stream.write_all(garbage).unwrap();
    let mut got = Vec::new();
    // The server answers with its link credit, then an error frame, then end of file.
    stream.read_to_end(&mut got).unwrap();
    let mut at = 0;
    while let Some((f, used)) = Frame::decode(&got[at..]).expect("server sends valid frames") {
        if let Frame::Error {
            channel: 0,
            code,
            reason,
        } = f
        {
            return (code, reason.to_owned());
        }
        at += used;
    }
    panic!("no error frame in {} bytes from the server", got.len());
}

fn check(transport: &str, connect: impl Fn(&str) -> Box<dyn ReadWrite>) {
    let (url, _dir) = common::echo_server(transport);
    let cases: [(&str, Vec<u8>); 3] = [
        ("unknown kind", vec![0x99; offhost_proto::frame::HEADER_LEN]),
        ("unknown channel", {
            let mut v = Vec::new();
            Frame::Data {
                channel: 41,
                last: true,
                payload: b"x",
            }
            .encode(&mut v);
            v
        }),
        ("credit overrun", {
            let mut v = Vec::new();
            Frame::Open {
                channel: 1,
                packet_shift: 3,
                sync: false,
                recv_buffer: 8,
                max_message: 8,
                name: "x",
            }
            .encode(&mut v);
            for _ in 0..2 {
                Frame::Data {
                    channel: 1,
                    last: true,
                    payload: &[0; 8],
                }
                .encode(&mut v);
            }
            v
        }),
    ];
    for (what, bytes) in cases {
        let mut s = connect(&url);
        let (code, reason) = garbage_then_error_frame(&mut s, &bytes);
        assert_eq!(code, offhost_proto::CODE_PROTOCOL, "{what}");
        assert!(!reason.is_empty(), "{what}");
    }
    // Truncated frame, then the client hangs up: no panic, server still serves.
    {
        let mut s = connect(&url);
        s.write_all(&[2, 0, 0, 0, 1]).unwrap();
    }
    let session = Session::connect(&url).unwrap();
    let ch = session.open("still-up", ChannelOptions::default()).unwrap();
    ch.send(b"ok").unwrap();
    assert_eq!(
        ch.recv_wait(Duration::from_secs(20)).unwrap().unwrap(),
        b"ok"
    );
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

#[test]
fn tcp_server_survives_bad_peers() {
    check("tcp", |url| {
        Box::new(std::net::TcpStream::connect(url.strip_prefix("tcp:").unwrap()).unwrap())
    });
}

#[test]
fn unix_server_survives_bad_peers() {
    check("unix", |url| {
        Box::new(
            std::os::unix::net::UnixStream::connect(url.strip_prefix("unix:").unwrap()).unwrap(),
        )
    });
}

#[test]
fn accept_ends_when_the_peer_says_goodbye_while_it_still_holds_the_link() {
    for transport in ["tcp", "unix", "shm", "mem"] {
        let (url, _dir) = common::fresh_url(transport);
        let server = offhost_link::Server::bind_with(&url, &common::options()).unwrap();
        let url = server.url().to_owned();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let s = server.accept().unwrap();
            let first = s.accept().map(|c| c.name().to_owned());
            // The peer said goodbye and will open nothing more: this accept must end.
            let next = s.accept().map(|c| c.name().to_owned());
            let _ = tx.send((first, next));
        });
        let s = common::connect(&url).unwrap();
        let ch = s
            .open("held", offhost_link::ChannelOptions::default())
            .unwrap();
        s.close();
        let (first, next) = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("{transport}: accept did not return after goodbye"));
        assert_eq!(first.unwrap(), "held", "{transport}");
        assert!(next.is_err(), "{transport}: {next:?}");
        drop((ch, s)); // held to here: the link stayed up all along
    }
}
