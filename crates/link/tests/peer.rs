//! Peer links between two nodes over loopback, through a TCP relay the test can cut or freeze:
//! what the sender is told when a link fails, the retry policy delivering exactly once and in
//! order, a refusal, a silent peer.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use offhost_link::peer::{
    Deliver, DeliverError, ErrorCode, Failure, Lane, Notify, Outgoing, Payload, PeerConfig, Peers,
};
use offhost_link::{LinkOptions, Server};
use offhost_proto::peer::CONTROL_CHANNEL;

/// Records what arrives; refuses channel `nope`.
#[derive(Default)]
struct Inbox {
    got: Mutex<Vec<(String, Vec<u8>)>>,
}

impl Deliver for Inbox {
    fn deliver(
        &self,
        _from: &str,
        channel: &str,
        msg: &[u8],
        _live: &dyn Fn() -> bool,
    ) -> Result<(), DeliverError> {
        if channel == "nope" {
            return Err(DeliverError::Destination {
                channel: channel.into(),
                source: "no such channel here".into(),
            });
        }
        self.got
            .lock()
            .unwrap()
            .push((channel.into(), msg.to_vec()));
        Ok(())
    }
}

/// Collects how messages ended.
#[derive(Default)]
struct Results {
    done: Mutex<Vec<(u64, Result<u64, Failure>)>>,
    cv: Condvar,
}

impl Notify for Results {
    fn done(&self, _h: u32, token: u64, _len: u64, r: Result<u64, Failure>) {
        self.done.lock().unwrap().push((token, r));
    }
    fn flush(&self) {
        self.cv.notify_all();
    }
}

impl Results {
    fn wait_for(&self, n: usize, bound: Duration) -> Vec<(u64, Result<u64, Failure>)> {
        let t0 = Instant::now();
        let mut d = self.done.lock().unwrap();
        while d.len() < n {
            assert!(
                t0.elapsed() < bound,
                "only {} of {n} ended within {bound:?}",
                d.len()
            );
            d = self
                .cv
                .wait_timeout(d, Duration::from_millis(50))
                .unwrap()
                .0;
        }
        d.clone()
    }
}

/// A node that accepts peer links on plain tcp (loopback).
fn node(name: &str, inbox: Arc<dyn Deliver>) -> (Peers, String) {
    node_with(PeerConfig::new(name), inbox)
}

/// A node of `config` (made insecure: plain tcp on loopback) that accepts peer links.
fn node_with(config: PeerConfig, inbox: Arc<dyn Deliver>) -> (Peers, String) {
    serve(
        config,
        LinkOptions::new().insecure(true),
        "tcp:127.0.0.1:0",
        inbox,
    )
}

/// A node of `config` with link options `opts` that accepts peer links at `bind`; its URL.
fn serve(
    config: PeerConfig,
    opts: LinkOptions,
    bind: &str,
    inbox: Arc<dyn Deliver>,
) -> (Peers, String) {
    let server = Server::bind_with(bind, &opts).unwrap();
    let url = server.url().to_owned();
    let peers = Peers::new(config.options(opts), inbox).unwrap();
    let p = peers.clone();
    std::thread::spawn(move || loop {
        let Ok(s) = server.accept() else { return };
        let p = p.clone();
        std::thread::spawn(move || {
            if let Ok(ch) = s.accept_timeout(Some(Duration::from_secs(5))) {
                if ch.name() == CONTROL_CHANNEL {
                    p.accept(s, ch);
                }
            }
        });
    });
    (peers, url)
}

/// Node `a`, whose peer `b` is at `url`.
fn a_to_b(url: &str) -> Peers {
    Peers::new(
        PeerConfig::new("a")
            .peer("b", url)
            .options(LinkOptions::new().insecure(true)),
        Arc::new(Inbox::default()),
    )
    .unwrap()
}

/// A TCP relay to `upstream` whose connections can be cut (closed) or frozen (kept open,
/// nothing forwarded).
struct Relay {
    url: String,
    conns: Arc<Mutex<Vec<TcpStream>>>,
    frozen: Arc<AtomicBool>,
}

impl Relay {
    fn start(upstream: &str) -> Relay {
        let up = upstream.strip_prefix("tcp:").unwrap().to_owned();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("tcp:{}", l.local_addr().unwrap());
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let frozen: Arc<AtomicBool> = Arc::default();
        let (c2, f2) = (conns.clone(), frozen.clone());
        std::thread::spawn(move || {
            for down in l.incoming() {
                let Ok(down) = down else { return };
                let Ok(upc) = TcpStream::connect(&up) else {
                    continue;
                };
                c2.lock().unwrap().push(down.try_clone().unwrap());
                c2.lock().unwrap().push(upc.try_clone().unwrap());
                for (mut a, mut b) in [
                    (down.try_clone().unwrap(), upc.try_clone().unwrap()),
                    (upc, down),
                ] {
                    let f = f2.clone();
                    std::thread::spawn(move || {
                        let mut buf = vec![0u8; 64 << 10];
                        loop {
                            let n = match a.read(&mut buf) {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            while f.load(Ordering::Acquire) {
                                std::thread::sleep(Duration::from_millis(20));
                            }
                            if b.write_all(&buf[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = b.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Relay { url, conns, frozen }
    }

    fn cut(&self) {
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

fn msg(i: u64) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    v.resize(8 + (i as usize * 37) % 3000, (i % 251) as u8);
    v
}

fn send(stream: &offhost_link::peer::Stream, r: &Arc<Results>, i: u64) {
    stream.send(Outgoing {
        data: Payload::Bytes(msg(i)),
        notify: r.clone(),
        handle: 1,
        token: i,
    });
}

#[test]
fn a_cut_link_fails_every_unacknowledged_message_and_delivered_ones_arrived() {
    let inbox = Arc::new(Inbox::default());
    let (_b, burl) = node("b", inbox.clone());
    let relay = Relay::start(&burl);
    let a = a_to_b(&relay.url);
    let s = a.stream("b", "x", Lane::Bulk, None).unwrap();
    let r = Arc::new(Results::default());
    for i in 0..300 {
        send(&s, &r, i);
    }
    r.wait_for(300, Duration::from_secs(20));
    for i in 300..3000 {
        send(&s, &r, i);
        if i == 1500 {
            relay.cut();
        }
    }
    let done = r.wait_for(3000, Duration::from_secs(10));
    let ok: Vec<u64> = done
        .iter()
        .filter(|(_, r)| r.is_ok())
        .map(|(t, _)| *t)
        .collect();
    let failed = done.len() - ok.len();
    assert!(done.iter().all(|(_, r)| match r {
        Ok(_) => true,
        Err(f) => matches!(f.code, ErrorCode::LinkFailed | ErrorCode::Unreachable),
    }));
    assert!(failed > 0, "messages were in flight at the cut");
    // Every message reported delivered is at b, once, in order.
    let got = inbox.got.lock().unwrap().clone();
    let firsts: Vec<u64> = got
        .iter()
        .map(|(_, m)| u64::from_le_bytes(m[..8].try_into().unwrap()))
        .collect();
    for t in &ok {
        assert!(
            firsts.contains(t),
            "message {t} was reported delivered but is not at b"
        );
    }
    assert!(
        firsts.windows(2).all(|w| w[0] < w[1]),
        "in order, no copies"
    );
}

#[test]
fn with_retry_cuts_deliver_everything_exactly_once_in_order() {
    let inbox = Arc::new(Inbox::default());
    let (_b, burl) = node("b", inbox.clone());
    let relay = Relay::start(&burl);
    let a = Peers::new(
        PeerConfig::new("a")
            .peer("b", &relay.url)
            .options(LinkOptions::new().insecure(true))
            .retry_for(Duration::from_secs(20)),
        Arc::new(Inbox::default()),
    )
    .unwrap();
    let s = a.stream("b", "x", Lane::Bulk, None).unwrap();
    let r = Arc::new(Results::default());
    let n = 4000;
    for i in 0..n {
        send(&s, &r, i);
        if i % 1000 == 500 {
            relay.cut();
        }
    }
    let done = r.wait_for(n as usize, Duration::from_secs(60));
    assert!(
        done.iter().all(|(_, r)| r.is_ok()),
        "{:?}",
        done.iter().find(|(_, r)| r.is_err())
    );
    let got = inbox.got.lock().unwrap().clone();
    let firsts: Vec<u64> = got
        .iter()
        .map(|(_, m)| u64::from_le_bytes(m[..8].try_into().unwrap()))
        .collect();
    if let Some(i) = (0..n as usize).find(|&i| firsts.get(i) != Some(&(i as u64))) {
        panic!(
            "every message once, in order: at {i} found {:?} (of {} received)",
            &firsts[i.saturating_sub(2)..(i + 3).min(firsts.len())],
            firsts.len()
        );
    }
    assert_eq!(firsts.len(), n as usize);
    for (_, m) in &got {
        let i = u64::from_le_bytes(m[..8].try_into().unwrap());
        assert_eq!(m, &msg(i));
    }
}

#[test]
fn a_refused_channel_fails_its_messages() {
    let (_b, burl) = node("b", Arc::new(Inbox::default()));
    let a = Peers::new(
        PeerConfig::new("a")
            .peer("b", &burl)
            .options(LinkOptions::new().insecure(true)),
        Arc::new(Inbox::default()),
    )
    .unwrap();
    let s = a.stream("b", "nope", Lane::Urgent, None).unwrap();
    let r = Arc::new(Results::default());
    for i in 0..5 {
        send(&s, &r, i);
    }
    let done = r.wait_for(5, Duration::from_secs(10));
    for (_, res) in done {
        let f = res.unwrap_err();
        assert_eq!(f.code, ErrorCode::Refused, "{f}");
        assert!(f.reason.contains("no such channel here"), "{f}");
    }
    // An unknown peer and a plain tcp URL without --insecure are refused at once.
    assert_eq!(
        a.stream("zz", "x", Lane::Bulk, None).unwrap_err().code,
        ErrorCode::UnknownPeer
    );
    let strict = Peers::new(PeerConfig::new("s"), Arc::new(Inbox::default())).unwrap();
    assert_eq!(
        strict
            .stream("tcp:127.0.0.1:1", "x", Lane::Bulk, None)
            .unwrap_err()
            .code,
        ErrorCode::BadAddress
    );
}

#[test]
fn a_silent_peer_is_given_up_after_the_link_timeout() {
    let (_b, burl) = node("b", Arc::new(Inbox::default()));
    let relay = Relay::start(&burl);
    let a = Peers::new(
        PeerConfig::new("a")
            .peer("b", &relay.url)
            .options(LinkOptions::new().insecure(true))
            .link_timeout(Duration::from_millis(500)),
        Arc::new(Inbox::default()),
    )
    .unwrap();
    let s = a.stream("b", "x", Lane::Bulk, None).unwrap();
    let r = Arc::new(Results::default());
    send(&s, &r, 0);
    r.wait_for(1, Duration::from_secs(10));
    relay.frozen.store(true, Ordering::Release);
    let t0 = Instant::now();
    for i in 1..20 {
        send(&s, &r, i);
    }
    let done = r.wait_for(20, Duration::from_secs(10));
    eprintln!("a frozen link was given up after {:?}", t0.elapsed());
    assert!(done[1..]
        .iter()
        .all(|(_, r)| matches!(r, Err(f) if f.code == ErrorCode::LinkFailed)));
    relay.frozen.store(false, Ordering::Release);
}

/// A full mailbox makes the reader of that stream wait (the link's credit for it stops); when
/// the link goes down the readers give up waiting and end, so that reconnecting peers cannot
/// pile up threads blocked on full mailboxes.
#[test]
fn readers_waiting_on_full_mailboxes_end_with_their_link() {
    use offhost_link::offload::{Router, RouterLimits};
    let router = Arc::new(Router::new(RouterLimits {
        mailboxes: 16,
        mailbox_bytes: 1024,
        ..RouterLimits::default()
    }));
    let (b, burl) = node("b", router.clone());
    let relay = Relay::start(&burl);
    let a = a_to_b(&relay.url);
    let r = Arc::new(Results::default());
    // Four channels nobody receives from, each sent more than its mailbox holds (the first
    // 1000-byte message goes in, the second waits).
    let streams: Vec<_> = (0..4)
        .map(|c| a.stream("b", &format!("x{c}"), Lane::Bulk, None).unwrap())
        .collect();
    for (c, s) in streams.iter().enumerate() {
        for i in 0..4 {
            s.send(Outgoing {
                data: Payload::Bytes(vec![c as u8; 1000]),
                notify: r.clone(),
                handle: 1,
                token: (c * 100 + i) as u64,
            });
        }
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while b.stats().readers < 4 || (0..4).any(|c| router.queued(&format!("x{c}")) != 1) {
        assert!(Instant::now() < deadline, "{:?}", b.stats());
        std::thread::sleep(Duration::from_millis(20));
    }
    // The readers wait on the full mailboxes; now the link goes down.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(b.stats().readers, 4);
    assert!((0..4).all(|c| router.queued(&format!("x{c}")) == 1));
    // Down for good: `a` gives up its links (no reconnect sends the messages again), and the
    // relay's connections are cut.
    a.close();
    relay.cut();
    let t = Instant::now();
    while b.stats().readers > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "readers still waiting after the link went down: {:?}",
            b.stats()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(b.stats().sessions, 0);
}

/// A session to `url` that says hello as engine `name`, and its control channel.
fn session_as(url: &str, name: &str) -> (offhost_link::Session, offhost_link::Channel) {
    use offhost_link::{ChannelOptions, Session};
    use offhost_proto::peer::{PeerMessage, PEER_VERSION};
    let s = Session::connect_with(url, &LinkOptions::new().insecure(true)).unwrap();
    let control = s.open(CONTROL_CHANNEL, ChannelOptions::default()).unwrap();
    let mut hello = Vec::new();
    PeerMessage::Hello {
        lane: Lane::Bulk,
        version: PEER_VERSION,
        // A restarted engine draws a new instance: one per name here.
        instance: name.bytes().fold(7, |a, b| a * 31 + u64::from(b)),
        name,
    }
    .encode(&mut hello);
    control.send(&hello).unwrap();
    let theirs = control.recv().unwrap().unwrap();
    assert!(matches!(
        PeerMessage::decode(&theirs),
        Ok(PeerMessage::Hello { .. })
    ));
    (s, control)
}

/// The reason of the next refusal on `control`.
fn refusal(control: &offhost_link::Channel) -> String {
    use offhost_proto::peer::PeerMessage;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        assert!(Instant::now() < deadline, "no refusal");
        let Some(m) = control.recv().unwrap() else {
            panic!("control channel closed")
        };
        if let Ok(PeerMessage::Refused { reason, .. }) = PeerMessage::decode(&m) {
            return reason.to_owned();
        }
    }
}

/// Waits for `b`'s data readers to end.
fn readers_end(b: &Peers) {
    let t = Instant::now();
    while b.stats().readers > 0 {
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", b.stats());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A hostile peer names a data channel whose first sequence number is the last there is (a
/// message there would leave no number for the next one): the channel is refused with a
/// reason, nothing is delivered, nothing wraps or panics, and the reader ends.
#[test]
fn a_sequence_number_past_the_last_is_refused_not_wrapped() {
    use offhost_link::ChannelOptions;
    let inbox = Arc::new(Inbox::default());
    let (b, burl) = node("b", inbox.clone());
    let (s, control) = session_as(&burl, "evil");
    let data = s
        .open(&format!("d/1/{}/x", u64::MAX), ChannelOptions::default())
        .unwrap();
    data.send(b"last").unwrap();
    data.send(b"past the last").unwrap();
    let reason = refusal(&control);
    assert!(reason.contains("sequence number past"), "{reason}");
    let got = inbox.got.lock().unwrap().clone();
    assert!(got.is_empty(), "{got:?}");
    readers_end(&b);
}

/// A peer whose messages are larger than this engine's largest (its own may be larger, or it
/// is hostile): the messages within it are delivered, the first over it is refused with both
/// sizes, and the reader ends.
#[test]
fn a_message_over_this_engines_largest_is_refused() {
    use offhost_link::ChannelOptions;
    let inbox = Arc::new(Inbox::default());
    let (b, burl) = node("b", inbox.clone());
    let (s, control) = session_as(&burl, "evil");
    let data = s
        .open(
            "d/1/0/x",
            ChannelOptions {
                recv_buffer: 4 << 20,
                max_message: 2 << 20,
                ..ChannelOptions::default()
            },
        )
        .unwrap();
    data.send(&[1u8; 1 << 20]).unwrap();
    data.send(&vec![2u8; (1 << 20) + 1]).unwrap();
    let reason = refusal(&control);
    assert!(
        reason.contains("a message of 1048577 bytes, this engine takes 1048576 at most"),
        "{reason}"
    );
    let got = inbox.got.lock().unwrap().clone();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1.len(), 1 << 20);
    readers_end(&b);
}

/// Peers that link to us under ever new names: each name's lane (and its sending thread)
/// stays, so only as many are made as twice the links we may have; a peer past that is
/// still served what it sends.
#[test]
fn names_past_the_lane_budget_get_no_lane_but_are_served() {
    use offhost_link::ChannelOptions;
    let inbox = Arc::new(Inbox::default());
    let (b, url) = node_with(PeerConfig::new("b").max_links(1), inbox.clone());
    for (i, name) in ["e1", "e2", "e3"].iter().enumerate() {
        let (s, _control) = session_as(&url, name);
        let data = s.open("d/1/0/x", ChannelOptions::default()).unwrap();
        data.send(name.as_bytes()).unwrap();
        let t = Instant::now();
        while inbox.got.lock().unwrap().len() <= i {
            assert!(t.elapsed() < Duration::from_secs(10), "{name} not served");
            std::thread::sleep(Duration::from_millis(10));
        }
        s.close();
        while b.stats().sessions > 0 {
            assert!(t.elapsed() < Duration::from_secs(10), "{:?}", b.stats());
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    assert_eq!(b.stats().lanes, 2, "{:?}", b.stats());
    let got: Vec<Vec<u8>> = inbox
        .got
        .lock()
        .unwrap()
        .iter()
        .map(|(_, m)| m.clone())
        .collect();
    assert_eq!(got, vec![b"e1".to_vec(), b"e2".to_vec(), b"e3".to_vec()]);
}

/// An engine that says it is a peer of our table (any engine with a certificate of the CA
/// could say so) gets no messages for that peer: we send them on our own link to the URL of
/// the table.
#[test]
fn a_session_claiming_a_table_peers_name_gets_none_of_its_messages() {
    let a_inbox = Arc::new(Inbox::default());
    let (_a, aurl) = node("a", a_inbox.clone());
    let (b, burl) = node_with(
        PeerConfig::new("b").peer("a", &aurl),
        Arc::new(Inbox::default()),
    );
    // The impostor links to b first, as "a".
    let (impostor, _control) = session_as(&burl, "a");
    let t = Instant::now();
    while b.stats().sessions < 1 {
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(10));
    }
    let s = b.stream("a", "x", Lane::Bulk, None).unwrap();
    let r = Arc::new(Results::default());
    send(&s, &r, 1);
    let done = r.wait_for(1, Duration::from_secs(10));
    assert!(done[0].1.is_ok(), "delivered");
    assert_eq!(a_inbox.got.lock().unwrap().len(), 1, "the real a has it");
    assert!(
        impostor
            .accept_timeout(Some(Duration::from_millis(200)))
            .is_err(),
        "the impostor was sent a data channel"
    );
}

/// A node of `config` that accepts peer links on `tls:` with the certificates in `pki`.
fn tls_node(config: PeerConfig, pki: &std::path::Path, inbox: Arc<dyn Deliver>) -> (Peers, String) {
    let opts = LinkOptions::new().tls_certificates(pki);
    serve(config, opts, "tls:127.0.0.1:0", inbox)
}

/// Engine `name`, presenting the certificates of `pki`, sends one message to `b` at `url`;
/// how it ended.
fn one_message_as(name: &str, pki: &std::path::Path, url: &str) -> Result<u64, Failure> {
    one_message_from(PeerConfig::new(name), pki, url)
}

/// As [`one_message_as`] from an engine of `config`.
fn one_message_from(config: PeerConfig, pki: &std::path::Path, url: &str) -> Result<u64, Failure> {
    let a = Peers::new(
        config
            .peer("b", url)
            .options(LinkOptions::new().tls_certificates(pki)),
        Arc::new(Inbox::default()),
    )
    .unwrap();
    let s = a.stream("b", "x", Lane::Bulk, None).unwrap();
    let r = Arc::new(Results::default());
    send(&s, &r, 1);
    r.wait_for(1, Duration::from_secs(10))[0].1.clone()
}

#[test]
fn with_certified_names_an_engine_is_taken_only_for_the_name_its_certificate_proves() {
    let d = tempfile::tempdir().unwrap();
    let pki = d.path().join("pki");
    offhost_access::certs::generate_with_engines(&pki, &[], &["alpha".into(), "b".into()]).unwrap();
    let alpha_pki = pki.join("engines/alpha");
    let inbox = Arc::new(Inbox::default());
    let (_b, burl) = tls_node(
        PeerConfig::new("b").certified_names(true),
        &pki,
        inbox.clone(),
    );
    // alpha with its own certificate.
    assert!(one_message_as("alpha", &alpha_pki, &burl).is_ok());
    assert_eq!(inbox.got.lock().unwrap().len(), 1);
    // alpha's certificate, another name.
    let e = one_message_as("mallory", &alpha_pki, &burl).unwrap_err();
    assert!(
        e.reason.contains("certificate does not name that engine"),
        "{}",
        e.reason
    );
    // The shared client certificate names no engine.
    let e = one_message_as("alpha", &pki, &burl).unwrap_err();
    assert!(e.reason.contains("\"alpha\""), "{}", e.reason);
    assert_eq!(inbox.got.lock().unwrap().len(), 1, "nothing more arrived");
    // Without the requirement a hello's name is taken at its word.
    let (_c, curl) = tls_node(PeerConfig::new("b"), &pki, Arc::new(Inbox::default()));
    assert!(one_message_as("mallory", &alpha_pki, &curl).is_ok());
    // Linking out, the engine we reach must prove its name too: b's server certificate above
    // is the shared one; with its own it is taken.
    let alpha = || PeerConfig::new("alpha").certified_names(true);
    let e = one_message_from(alpha(), &alpha_pki, &curl).unwrap_err();
    assert!(
        e.reason
            .contains("its server certificate does not name that engine"),
        "{}",
        e.reason
    );
    let (_b2, b2url) = tls_node(
        PeerConfig::new("b"),
        &pki.join("engines/b"),
        Arc::new(Inbox::default()),
    );
    assert!(one_message_from(alpha(), &alpha_pki, &b2url).is_ok());
}
