//! The server against a hand-driven client: every byte on the wire is chosen by the test, so
//! bad input (unknown options, out-of-range and misaligned requests, garbage, clients that
//! vanish mid-request) can be sent on purpose. Real clients are tested in crates/cli/tests.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use offhost_nbd::proto::*;
use offhost_nbd::MemDisk;
use offhost_nbd::{Backend, Export, ListenAddr, Server};

/// A backend whose reads at offset 0 wait until a write at offset 8192 arrives: proves that
/// later requests overtake a blocked one and replies leave out of order.
struct Latch {
    mem: MemDisk,
    opened: Mutex<bool>,
    cv: Condvar,
}

impl Backend for Latch {
    fn size(&self) -> u64 {
        self.mem.size()
    }
    fn read(&self, off: u64, buf: &mut [u8]) -> Result<(), Errno> {
        if off == 0 {
            let g = self.opened.lock().unwrap();
            let (g, to) = self
                .cv
                .wait_timeout_while(g, Duration::from_secs(10), |o| !*o)
                .unwrap();
            if to.timed_out() || !*g {
                return Err(Errno::Io);
            }
        }
        self.mem.read(off, buf)
    }
    fn write(&self, off: u64, data: &[u8], fua: bool) -> Result<(), Errno> {
        self.mem.write(off, data, fua)?;
        if off == 8192 {
            *self.opened.lock().unwrap() = true;
            self.cv.notify_all();
        }
        Ok(())
    }
    fn trim(&self, off: u64, len: u64, fua: bool) -> Result<(), Errno> {
        self.mem.trim(off, len, fua)
    }
    fn write_zeroes(&self, off: u64, len: u64, fua: bool) -> Result<(), Errno> {
        self.mem.write_zeroes(off, len, fua)
    }
    fn flush(&self) -> Result<(), Errno> {
        Ok(())
    }
    fn may_block(&self) -> bool {
        true
    }
    fn kind(&self) -> &'static str {
        "memory held until released (a test's)"
    }
}

fn start() -> String {
    let latch = Arc::new(Latch {
        mem: MemDisk::new(1 << 20),
        opened: Mutex::new(false),
        cv: Condvar::new(),
    });
    let exports = vec![
        Export::from_spec("disk=mem:1M").unwrap(),
        Export::from_spec("ro=mem:1M,readonly").unwrap(),
        Export::from_spec("aligned=mem:1M,block=512,max=64K").unwrap(),
        Export::new("latch", latch),
    ];
    let mut server = Server::bind(&ListenAddr::Tcp("127.0.0.1:0".into()), exports, None).unwrap();
    // Exercise the polling reader here (the end-to-end tests run with the default, no polling).
    server.set_spin(Duration::from_micros(20));
    // And several workers per connection (the default is one).
    server.set_conn_threads(3);
    let addr = server.local_addr();
    std::thread::spawn(move || server.serve());
    addr.strip_prefix("tcp:").unwrap().to_owned()
}

struct Client {
    s: TcpStream,
}

fn u16b(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}
fn u32b(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}
fn u64b(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().unwrap())
}

impl Client {
    fn connect(addr: &str) -> Self {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut c = Self { s };
        let hello = c.read(18);
        assert_eq!(u64b(&hello), NBD_MAGIC);
        assert_eq!(u64b(&hello[8..]), IHAVEOPT);
        assert_eq!(u16b(&hello[16..]), FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES);
        c.s.write_all(&(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).to_be_bytes())
            .unwrap();
        c
    }
    fn read(&mut self, n: usize) -> Vec<u8> {
        let mut b = vec![0u8; n];
        self.s.read_exact(&mut b).unwrap();
        b
    }
    fn option(&mut self, opt: u32, data: &[u8]) {
        let mut b = Vec::new();
        b.extend_from_slice(&IHAVEOPT.to_be_bytes());
        b.extend_from_slice(&opt.to_be_bytes());
        b.extend_from_slice(&(data.len() as u32).to_be_bytes());
        b.extend_from_slice(data);
        self.s.write_all(&b).unwrap();
    }
    /// Reads one option reply: (option, reply type, data).
    fn opt_reply(&mut self) -> (u32, u32, Vec<u8>) {
        let h = self.read(20);
        assert_eq!(u64b(&h), OPT_REPLY_MAGIC);
        let len = u32b(&h[16..]) as usize;
        (u32b(&h[8..]), u32b(&h[12..]), self.read(len))
    }
    fn go(&mut self, name: &str) -> (u64, u16) {
        let mut d = Vec::new();
        d.extend_from_slice(&(name.len() as u32).to_be_bytes());
        d.extend_from_slice(name.as_bytes());
        d.extend_from_slice(&0u16.to_be_bytes());
        self.option(OPT_GO, &d);
        let (mut size, mut flags) = (0, 0);
        loop {
            let (opt, rep, data) = self.opt_reply();
            assert_eq!(opt, OPT_GO);
            match rep {
                REP_INFO if u16b(&data) == INFO_EXPORT => {
                    size = u64b(&data[2..]);
                    flags = u16b(&data[10..]);
                }
                REP_INFO => {}
                REP_ACK => return (size, flags),
                other => panic!("GO failed: {other:#x} {}", String::from_utf8_lossy(&data)),
            }
        }
    }
    fn request(&mut self, flags: u16, cmd: u16, handle: u64, off: u64, len: u32, data: &[u8]) {
        let mut b = Vec::new();
        encode_request(&mut b, flags, cmd, handle, off, len);
        b.extend_from_slice(data);
        self.s.write_all(&b).unwrap();
    }
    /// Reads a simple reply: (error, handle).
    fn simple(&mut self) -> (u32, u64) {
        let h = self.read(16);
        assert_eq!(u32b(&h), SIMPLE_REPLY_MAGIC);
        (u32b(&h[4..]), u64b(&h[8..]))
    }
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.s.read(&mut b), Ok(0) | Err(_))
    }
}

#[test]
fn unknown_and_malformed_options_get_errors_then_go_works() {
    let addr = start();
    let mut c = Client::connect(&addr);
    c.option(0x7777, b"whatever");
    let (opt, rep, msg) = c.opt_reply();
    assert_eq!((opt, rep), (0x7777, REP_ERR_UNSUP));
    assert!(String::from_utf8_lossy(&msg).contains("not supported"));
    c.option(OPT_LIST, b"x");
    assert_eq!(c.opt_reply().1, REP_ERR_INVALID);
    // INFO whose name length runs past the data.
    c.option(OPT_INFO, &[0, 0, 0, 200, b'a', 0, 0]);
    assert_eq!(c.opt_reply().1, REP_ERR_INVALID);
    let mut d = Vec::new();
    d.extend_from_slice(&7u32.to_be_bytes());
    d.extend_from_slice(b"missing");
    d.extend_from_slice(&0u16.to_be_bytes());
    c.option(OPT_GO, &d);
    let (_, rep, msg) = c.opt_reply();
    assert_eq!(rep, REP_ERR_UNKNOWN);
    assert!(String::from_utf8_lossy(&msg).contains("missing"));
    c.option(OPT_LIST, &[]);
    let mut names = Vec::new();
    loop {
        let (_, rep, data) = c.opt_reply();
        if rep == REP_ACK {
            break;
        }
        assert_eq!(rep, REP_SERVER);
        let n = u32b(&data) as usize;
        names.push(String::from_utf8(data[4..4 + n].to_vec()).unwrap());
    }
    assert_eq!(names, ["disk", "ro", "aligned", "latch"]);
    let (size, flags) = c.go("ro");
    assert_eq!(size, 1 << 20);
    assert!(flags & TFLAG_READ_ONLY != 0 && flags & TFLAG_CAN_MULTI_CONN != 0);
}

#[test]
fn abort_is_acknowledged_and_export_name_enters_transmission() {
    let addr = start();
    let mut c = Client::connect(&addr);
    c.option(OPT_ABORT, &[]);
    assert_eq!(c.opt_reply().1, REP_ACK);
    assert!(c.closed());
    let mut c = Client::connect(&addr);
    c.option(OPT_EXPORT_NAME, b"disk");
    // NO_ZEROES was negotiated: size and flags only.
    let r = c.read(10);
    assert_eq!(u64b(&r), 1 << 20);
    c.request(0, 1, 1, 0, 4, b"abcd");
    assert_eq!(c.simple(), (0, 1));
    c.request(0, 0, 2, 0, 4, &[]);
    assert_eq!(c.simple(), (0, 2));
    assert_eq!(c.read(4), b"abcd");
    // Unknown export through EXPORT_NAME cannot be answered: the session ends.
    let mut c = Client::connect(&addr);
    c.option(OPT_EXPORT_NAME, b"nope");
    assert!(c.closed());
}

#[test]
fn range_alignment_size_and_permission_errors() {
    let addr = start();
    let mut c = Client::connect(&addr);
    c.go("disk");
    let end = 1u64 << 20;
    c.request(0, 0, 1, end - 2, 4, &[]);
    assert_eq!(c.simple(), (Errno::Inval as u32, 1));
    // A write beyond the end: ENOSPC, and its payload is consumed (next request parses).
    c.request(0, 1, 2, end, 3, b"xyz");
    assert_eq!(c.simple(), (Errno::NoSpc as u32, 2));
    c.request(0, 0, 3, u64::MAX - 1, 4, &[]);
    assert_eq!(c.simple(), (Errno::Inval as u32, 3));
    c.request(0, 9, 4, 0, 0, &[]);
    assert_eq!(c.simple(), (Errno::Inval as u32, 4), "unknown command");
    c.request(1 << 9, 0, 5, 0, 4, &[]);
    assert_eq!(c.simple(), (Errno::Inval as u32, 5), "unknown flag");
    c.request(CMD_FLAG_FUA, 3, 6, 0, 0, &[]);
    assert_eq!(c.simple(), (0, 6), "flush with FUA is accepted");

    let mut c = Client::connect(&addr);
    c.go("aligned");
    c.request(0, 0, 1, 100, 512, &[]);
    assert_eq!(c.simple(), (Errno::Inval as u32, 1), "misaligned offset");
    c.request(0, 1, 2, 0, 100, &[7u8; 100]);
    assert_eq!(c.simple(), (Errno::Inval as u32, 2), "misaligned length");
    c.request(0, 0, 3, 0, 128 << 10, &[]);
    assert_eq!(c.simple(), (Errno::Inval as u32, 3), "oversize read");
    let big = vec![1u8; 128 << 10];
    c.request(0, 1, 4, 0, big.len() as u32, &big);
    assert_eq!(c.simple(), (Errno::Inval as u32, 4), "oversize write");
    c.request(0, 0, 5, 512, 512, &[]);
    assert_eq!(c.simple(), (0, 5));
    assert_eq!(c.read(512), vec![0u8; 512]);

    let mut c = Client::connect(&addr);
    c.go("ro");
    c.request(0, 1, 1, 0, 4, b"abcd");
    assert_eq!(c.simple(), (Errno::Perm as u32, 1));
    c.request(0, 4, 2, 0, 4096, &[]);
    assert_eq!(c.simple(), (Errno::Perm as u32, 2), "trim on read-only");
    c.request(0, 6, 3, 0, 4096, &[]);
    assert_eq!(c.simple(), (Errno::Perm as u32, 3), "zeroes on read-only");
}

#[test]
fn structured_replies_carry_data_chunks_and_error_messages() {
    let addr = start();
    let mut c = Client::connect(&addr);
    c.option(OPT_STRUCTURED_REPLY, &[]);
    assert_eq!(c.opt_reply().1, REP_ACK);
    let (_, flags) = c.go("disk");
    assert!(flags & TFLAG_SEND_DF != 0);
    c.request(0, 1, 1, 10, 3, b"xyz");
    assert_eq!(c.simple(), (0, 1));
    c.request(CMD_FLAG_DF, 0, 2, 10, 3, &[]);
    let h = c.read(20);
    assert_eq!(u32b(&h), STRUCTURED_REPLY_MAGIC);
    assert_eq!(u16b(&h[4..]), REPLY_FLAG_DONE);
    assert_eq!(u16b(&h[6..]), REPLY_TYPE_OFFSET_DATA);
    assert_eq!(u64b(&h[8..]), 2);
    assert_eq!(u32b(&h[16..]), 11);
    let p = c.read(11);
    assert_eq!(u64b(&p), 10);
    assert_eq!(&p[8..], b"xyz");
    c.request(0, 0, 3, 1 << 20, 1, &[]);
    let h = c.read(20);
    assert_eq!(u16b(&h[6..]), REPLY_TYPE_ERROR);
    let p = c.read(u32b(&h[16..]) as usize);
    assert_eq!(u32b(&p), Errno::Inval as u32);
    let n = u16b(&p[4..]) as usize;
    assert!(String::from_utf8_lossy(&p[6..6 + n]).contains("beyond the end"));
}

#[test]
fn a_blocked_request_is_overtaken_and_replies_leave_out_of_order() {
    let addr = start();
    let mut c = Client::connect(&addr);
    c.go("latch");
    // Handle 1 blocks until a write at 8192 arrives, so handle 2 must be answered first.
    c.request(0, 0, 1, 0, 8, &[]);
    c.request(0, 1, 2, 4096, 4, b"next");
    assert_eq!(c.simple(), (0, 2));
    // Handle 3 opens the latch; 1 and 3 then finish in either order.
    c.request(0, 1, 3, 8192, 4, b"open");
    let mut seen = Vec::new();
    for _ in 0..2 {
        let (err, h) = c.simple();
        assert_eq!(err, 0);
        if h == 1 {
            assert_eq!(c.read(8), vec![0u8; 8]);
        }
        seen.push(h);
    }
    seen.sort();
    assert_eq!(seen, [1, 3]);
}

#[test]
fn garbage_and_vanishing_clients_do_not_disturb_others() {
    let addr = start();
    let mut good = Client::connect(&addr);
    good.go("disk");
    // Garbage instead of a request: the server drops that connection.
    let mut bad = Client::connect(&addr);
    bad.go("disk");
    bad.s.write_all(&[0xAB; 64]).unwrap();
    assert!(bad.closed());
    // Garbage instead of the option magic.
    let mut bad = Client::connect(&addr);
    bad.s.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    assert!(bad.closed());
    // A write whose payload never fully arrives, then the client goes away.
    let mut gone = Client::connect(&addr);
    gone.go("disk");
    let mut b = Vec::new();
    encode_request(&mut b, 0, 1, 1, 0, 65536);
    b.extend_from_slice(&[5u8; 1000]);
    gone.s.write_all(&b).unwrap();
    drop(gone);
    // An option announcing more data than the server accepts.
    let mut huge = Client::connect(&addr);
    let mut h = Vec::new();
    h.extend_from_slice(&IHAVEOPT.to_be_bytes());
    h.extend_from_slice(&OPT_GO.to_be_bytes());
    h.extend_from_slice(&u32::MAX.to_be_bytes());
    huge.s.write_all(&h).unwrap();
    assert!(huge.closed());
    // The first client, connected all along, and a new one still work.
    good.request(0, 1, 9, 0, 4, b"fine");
    assert_eq!(good.simple(), (0, 9));
    let mut fresh = Client::connect(&addr);
    fresh.go("disk");
    fresh.request(0, 0, 1, 0, 4, &[]);
    assert_eq!(fresh.simple(), (0, 1));
    assert_eq!(fresh.read(4), b"fine");
    fresh.request(0, 2, 2, 0, 0, &[]);
    assert!(fresh.closed(), "NBD_CMD_DISC closes the connection");
}
