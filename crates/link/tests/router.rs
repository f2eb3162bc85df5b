//! A node's mailboxes: each bounded, and all of them together (`RouterLimits::total_bytes`),
//! for peers' messages (which wait, while their link is up) and local sends (which wait
//! as submissions).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use offhost_link::offload::{HostSink, Posted, Router, RouterLimits};
use offhost_link::peer::{Deliver, DeliverError, Failure, Notify};

/// Records receives and sends that ended.
#[derive(Default)]
struct Sink {
    got: Mutex<Vec<(u64, usize)>>,
    sent: Mutex<Vec<(u64, Result<u64, Failure>)>>,
}

impl Notify for Sink {
    fn done(&self, _handle: u32, token: u64, _len: u64, result: Result<u64, Failure>) {
        self.sent.lock().unwrap().push((token, result));
    }
    fn flush(&self) {}
}

impl HostSink for Sink {
    fn received(&self, _handle: u32, id: u64, result: Result<Option<&[u8]>, Failure>) -> bool {
        let len = result.ok().flatten().map_or(0, <[u8]>::len);
        self.got.lock().unwrap().push((id, len));
        true
    }
}

fn router() -> Arc<Router> {
    Arc::new(Router::new(RouterLimits {
        mailboxes: 16,
        mailbox_bytes: 1000,
        total_bytes: 1500,
    }))
}

fn post(r: &Router, sink: &Arc<Sink>, channel: &str, id: u64) {
    r.post(
        channel,
        Posted {
            sink: sink.clone(),
            owner: 1,
            handle: 1,
            id,
            max: 0,
        },
    );
}

#[test]
fn a_peers_message_waits_for_room_in_the_total_and_gives_up_when_its_link_goes() {
    let r = router();
    let up = || true;
    r.deliver("p", "a", &[1; 800], &up).unwrap();
    // "b" is empty, but 800 more would pass the total of 1500.
    let t = Instant::now();
    let down_later = || t.elapsed() < Duration::from_millis(150);
    let e = r.deliver("p", "b", &[2; 800], &down_later).unwrap_err();
    assert!(
        matches!(&e, DeliverError::LinkDown { channel } if channel == "b"),
        "{e}"
    );
    assert_eq!(r.queued("b"), 0);
    // Waiting while the link is up: a receive from "a" makes room.
    let waiter = {
        let r = r.clone();
        std::thread::spawn(move || r.deliver("p", "b", &[2; 800], &|| true))
    };
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(r.queued("b"), 0, "waits for the total");
    let sink = Arc::new(Sink::default());
    post(&r, &sink, "a", 7);
    waiter.join().unwrap().unwrap();
    assert_eq!(r.queued("b"), 1);
    assert_eq!(*sink.got.lock().unwrap(), vec![(7, 800)]);
}

#[test]
fn a_local_send_waiting_for_the_total_goes_in_when_another_mailbox_is_received_from() {
    let r = router();
    r.deliver("p", "a", &[1; 900], &|| true).unwrap();
    let sender = Arc::new(Sink::default());
    r.deliver_local("c", vec![3; 700], 5, sender.clone(), 1, 42);
    assert_eq!((r.queued("c"), r.waiting("c")), (0, 1));
    assert!(sender.sent.lock().unwrap().is_empty(), "not in yet");
    let receiver = Arc::new(Sink::default());
    post(&r, &receiver, "a", 1);
    assert_eq!((r.queued("c"), r.waiting("c")), (1, 0));
    let sent = sender.sent.lock().unwrap();
    assert!(
        matches!(sent.as_slice(), [(42, Ok(700))]),
        "{:?}",
        sent.len()
    );
}

#[test]
fn when_everything_is_empty_one_message_over_the_total_still_goes() {
    let r = router();
    r.deliver("p", "a", &[1; 4000], &|| false).unwrap();
    assert_eq!(r.queued("a"), 1);
}

/// Mailboxes nobody reads fill the total; the channels whose hosts do receive are still
/// served: a message waiting for room goes to a receive posted after it, and one that finds a
/// receive posted goes straight to it.
#[test]
fn mailboxes_nobody_reads_do_not_stop_the_channels_that_are_read() {
    let r = router();
    let up = || true;
    r.deliver("hostile", "x", &[1; 1000], &up).unwrap();
    r.deliver("hostile", "y", &[1; 500], &up).unwrap();
    // The total (1500) is full, and "x" and "y" are never received from.
    let sender = Arc::new(Sink::default());
    r.deliver_local("b", vec![3; 800], 5, sender.clone(), 1, 42);
    assert_eq!((r.queued("b"), r.waiting("b")), (0, 1), "waits for room");
    let receiver = Arc::new(Sink::default());
    post(&r, &receiver, "b", 7);
    assert_eq!(*receiver.got.lock().unwrap(), vec![(7, 800)]);
    assert_eq!((r.queued("b"), r.waiting("b")), (0, 0));
    let sent = sender.sent.lock().unwrap();
    assert!(matches!(sent.as_slice(), [(42, Ok(800))]), "{}", sent.len());
    drop(sent);
    // A peer's message to a channel with a receive posted does not wait for the total.
    post(&r, &receiver, "c", 8);
    r.deliver("p", "c", &[4; 900], &|| false).unwrap();
    assert_eq!(receiver.got.lock().unwrap()[1], (8, 900));
    // And one that waits for room goes to the receive posted after it.
    let waiter = {
        let r = r.clone();
        std::thread::spawn(move || r.deliver("p", "d", &[5; 600], &|| true))
    };
    std::thread::sleep(Duration::from_millis(50));
    post(&r, &receiver, "d", 9);
    waiter.join().unwrap().unwrap();
    assert_eq!(receiver.got.lock().unwrap()[2], (9, 600));
    assert_eq!(
        (r.queued("x"), r.queued("y")),
        (1, 1),
        "the unread ones are kept"
    );
}
