//! In-process behaviour of the rings, batching, the pool and the errors at the call.

use offhost_shm::{pair, Config, Mode, ShmError};
use std::time::Duration;

const T: Option<Duration> = Some(Duration::from_secs(5));

fn cfg(mode: Mode) -> Config {
    Config {
        ring_bytes: 4096,
        pool_buffers: 4,
        buffer_size: 1024,
        mode,
        spin: Duration::from_micros(20),
        event_limit: None,
    }
}

#[test]
fn inline_records_arrive_in_order_both_ways() {
    let (mut host, mut engine) = pair(&cfg(Mode::Block)).unwrap();
    for i in 0..1000u32 {
        let msg = vec![i as u8; (i % 300) as usize];
        host.sender().send(&msg, T).unwrap();
        let r = engine.receiver().recv(T).unwrap();
        assert_eq!(r.bytes(), &msg[..]);
        drop(r);
        engine.sender().send(&i.to_le_bytes(), T).unwrap();
        assert_eq!(host.receiver().recv(T).unwrap().bytes(), i.to_le_bytes());
    }
}

#[test]
fn batch_is_published_once_and_invisible_before_flush() {
    let (mut host, mut engine) = pair(&cfg(Mode::Poll)).unwrap();
    for i in 0..10u8 {
        assert!(host.sender().write(&[i; 5]).unwrap());
    }
    assert!(host.sender().has_staged());
    assert!(
        engine.receiver().try_recv().unwrap().is_none(),
        "visible before flush"
    );
    host.sender().flush().unwrap();
    for i in 0..10u8 {
        assert_eq!(
            engine.receiver().try_recv().unwrap().unwrap().bytes(),
            [i; 5]
        );
    }
    assert!(engine.receiver().try_recv().unwrap().is_none());
}

#[test]
fn an_inline_record_offered_is_consumed_only_when_taken() {
    let (mut host, mut engine) = pair(&cfg(Mode::Poll)).unwrap();
    let rx = engine.receiver();
    assert_eq!(
        rx.try_take_inline(|_| panic!("nothing was sent")).unwrap(),
        None
    );
    host.sender().send(b"first", T).unwrap();
    host.sender().send(b"second", T).unwrap();
    // Declined: it stays the next record, for an offer and for `try_recv`.
    let mut seen = Vec::new();
    let r = rx.try_take_inline(|b| {
        seen.push(b.to_vec());
        false
    });
    assert_eq!(r.unwrap(), Some(false));
    let r = rx.try_take_inline(|b| {
        seen.push(b.to_vec());
        true
    });
    assert_eq!(r.unwrap(), Some(true));
    assert_eq!(seen, [b"first".to_vec(), b"first".to_vec()]);
    assert_eq!(rx.try_recv().unwrap().unwrap().bytes(), b"second");
    assert_eq!(rx.try_take_inline(|_| true).unwrap(), None);
    // A buffer record is not offered, and stays for `recv`.
    let mut b = host.sender().try_alloc().unwrap().unwrap();
    b.set_range(0, 3).unwrap();
    b.fill(9);
    host.sender().send_buf(b, T).unwrap();
    let rx = engine.receiver();
    assert_eq!(
        rx.try_take_inline(|_| panic!("offered a buffer")).unwrap(),
        Some(false)
    );
    let r = rx.recv(T).unwrap();
    assert!(r.is_buf());
    assert_eq!(r.bytes(), [9; 3]);
    // Taken records free their room: a ring's worth of them passes through.
    drop(r);
    for i in 0..200u8 {
        host.sender().send(&[i; 40], T).unwrap();
        let r = engine.receiver().try_take_inline(|b| b == [i; 40]);
        assert_eq!(r.unwrap(), Some(true), "record {i}");
    }
}

#[test]
fn a_waiting_offer_takes_the_record_that_arrives_or_times_out() {
    for mode in [Mode::Poll, Mode::Adaptive, Mode::Block] {
        let (mut host, mut engine) = pair(&cfg(mode)).unwrap();
        let rx = engine.receiver();
        let r = rx.wait_take_inline(Some(Duration::from_millis(20)), |_| panic!("nothing sent"));
        assert!(matches!(r, Err(ShmError::Timeout)), "{mode:?}: {r:?}");
        // A record sent while the receiver waits is offered to it, and consumed once taken.
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            host.sender().send(b"late", T).unwrap();
            host.sender().send(b"next", T).unwrap();
            host
        });
        let mut seen = Vec::new();
        let took = rx.wait_take_inline(T, |b| {
            seen.push(b.to_vec());
            true
        });
        assert!(took.unwrap(), "{mode:?}");
        let mut host = sender.join().unwrap();
        // Declined: it stays the next record.
        let took = rx.wait_take_inline(T, |b| {
            seen.push(b.to_vec());
            false
        });
        assert!(!took.unwrap());
        assert_eq!(seen, [b"late".to_vec(), b"next".to_vec()], "{mode:?}");
        assert_eq!(rx.try_recv().unwrap().unwrap().bytes(), b"next");
        // A buffer record is not offered.
        let mut b = host.sender().try_alloc().unwrap().unwrap();
        b.set_range(0, 2).unwrap();
        host.sender().send_buf(b, T).unwrap();
        assert!(!rx
            .wait_take_inline(T, |_| panic!("offered a buffer"))
            .unwrap());
        assert!(rx.recv(T).unwrap().is_buf());
        // The peer gone and every record taken: PeerGone, not a wait for ever.
        drop(host);
        let r = rx.wait_take_inline(T, |_| panic!("nothing sent"));
        assert!(matches!(r, Err(ShmError::PeerGone)), "{mode:?}: {r:?}");
    }
}

#[test]
fn ring_fills_then_drains_with_wraparound() {
    let (mut host, mut engine) = pair(&cfg(Mode::Block)).unwrap();
    let mut sent = 0u32;
    let mut got = 0u32;
    for round in 0..50 {
        // Fill until full with odd sizes so records and pads wrap at varied offsets.
        while host
            .sender()
            .try_send(&vec![sent as u8; 37 + round])
            .unwrap()
        {
            sent += 1;
        }
        while let Some(r) = engine.receiver().try_recv().unwrap() {
            assert_eq!(r.bytes()[0], got as u8, "record {got}");
            got += 1;
        }
        assert_eq!(sent, got);
    }
}

#[test]
fn record_larger_than_half_the_ring_is_an_error_at_the_call() {
    let (mut host, _engine) = pair(&cfg(Mode::Block)).unwrap();
    let max = host.sender().max_record();
    assert_eq!(max, 4096 / 2 - 16);
    let big = vec![0u8; max + 1];
    for r in [
        host.sender().send(&big, None).map(|_| ()),
        host.sender().try_send(&big).map(|_| ()),
        host.sender().write(&big).map(|_| ()),
        host.sender().send_batch(&[b"ok", &big], None),
    ] {
        match r {
            Err(ShmError::RecordTooLarge { len, max: m }) => {
                assert_eq!((len, m), (max + 1, max));
            }
            other => panic!("expected RecordTooLarge, got {other:?}"),
        }
    }
    // The largest record still goes through.
    host.sender().send(&vec![7u8; max], T).unwrap();
}

#[test]
fn recv_times_out_when_nothing_comes() {
    let (_host, mut engine) = pair(&cfg(Mode::Adaptive)).unwrap();
    match engine.receiver().recv(Some(Duration::from_millis(50))) {
        Err(ShmError::Timeout) => {}
        other => panic!("expected Timeout, got {:?}", other.map(|r| r.len())),
    };
}

#[test]
fn buffers_travel_by_descriptor_and_return_home() {
    let (mut host, mut engine) = pair(&cfg(Mode::Block)).unwrap();
    for round in 0..20u8 {
        // Exhaust the host's pool, sending each buffer over.
        let mut n = 0;
        while let Some(mut b) = host.sender().try_alloc().unwrap() {
            b.set_range(16, 100).unwrap();
            b.fill(round);
            host.sender().send_buf(b, T).unwrap();
            n += 1;
        }
        assert_eq!(n, 4);
        for _ in 0..n {
            let r = engine.receiver().recv(T).unwrap();
            assert!(r.is_buf());
            assert_eq!(r.bytes(), &[round; 100][..]);
            let buf = r.take_buf().unwrap();
            if round % 2 == 0 {
                drop(buf); // released by the other side, across the free ring
            } else {
                engine.sender().send_buf(buf, T).unwrap(); // forwarded back home
            }
        }
        if round % 2 == 1 {
            for _ in 0..n {
                let r = host.receiver().recv(T).unwrap();
                assert_eq!(r.bytes(), &[round; 100][..]);
            } // dropped at home
        }
        // Every buffer is allocatable again.
        let b = host.sender().alloc(T).unwrap();
        drop(b);
    }
    // Engine-homed buffers are distinct from host-homed ones.
    let e = engine.sender().try_alloc().unwrap().unwrap();
    assert!(e.index() >= 4);
}

#[test]
fn buffer_range_is_checked() {
    let (mut host, _engine) = pair(&cfg(Mode::Block)).unwrap();
    let mut b = host.sender().try_alloc().unwrap().unwrap();
    assert!(matches!(
        b.set_range(1000, 100),
        Err(ShmError::BufferRange { .. })
    ));
    assert_eq!(b.capacity(), 1024);
    b.set_len(1024).unwrap();
}

#[test]
fn alloc_waits_for_the_peer_to_release() {
    let (mut host, mut engine) = pair(&cfg(Mode::Block)).unwrap();
    let mut held = Vec::new();
    while let Some(b) = host.sender().try_alloc().unwrap() {
        held.push(b);
    }
    assert!(matches!(
        host.sender().alloc(Some(Duration::from_millis(20))),
        Err(ShmError::Timeout)
    ));
    for b in held {
        host.sender().send_buf(b, T).unwrap();
    }
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..4 {
            drop(engine.receiver().recv(T).unwrap());
        }
        engine
    });
    let b = host.sender().alloc(T).unwrap();
    assert_eq!(b.capacity(), 1024);
    drop(t.join().unwrap());
}

#[test]
fn dropping_one_side_ends_the_other_after_pending_records() {
    let (mut host, mut engine) = pair(&cfg(Mode::Adaptive)).unwrap();
    host.sender().send(b"last words", T).unwrap();
    engine.check_peer().unwrap();
    drop(host);
    assert!(matches!(engine.check_peer(), Err(ShmError::PeerGone)));
    assert_eq!(engine.receiver().recv(T).unwrap().bytes(), b"last words");
    assert!(matches!(engine.receiver().recv(T), Err(ShmError::PeerGone)));
}

#[test]
fn peer_learns_of_hang_up_even_while_buffers_are_held() {
    let (mut host, mut engine) = pair(&cfg(Mode::Block)).unwrap();
    let kept = host.sender().try_alloc().unwrap().unwrap();
    host.sender().write(b"staged, not flushed").unwrap();
    drop(host); // the sender's drop publishes what it staged
    assert_eq!(
        engine.receiver().recv(T).unwrap().bytes(),
        b"staged, not flushed"
    );
    assert!(matches!(engine.receiver().recv(T), Err(ShmError::PeerGone)));
    drop(kept);
}

/// This thread's voluntary context switches so far (each is a sleep it was woken from).
fn voluntary_switches() -> u64 {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap()
}

/// Receives `n` records sent one at a time, 1 ms apart; with `limit`, each wait asks to be
/// woken only once all the records still to come are there. Returns the receiving thread's
/// voluntary context switches.
fn wake_ups_receiving(n: u8, limit: bool) -> u64 {
    let (mut host, mut engine) = pair(&cfg(Mode::Block)).unwrap();
    let waiter = std::thread::spawn(move || {
        let before = voluntary_switches();
        let mut got = 0u8;
        while got < n {
            let rx = host.receiver();
            if limit {
                rx.wait_ready_for(usize::from(n - got), 16, T).unwrap();
            } else {
                rx.wait_ready(T).unwrap();
            }
            while let Some(r) = rx.try_recv().unwrap() {
                assert_eq!(r.bytes(), [got; 16], "records arrive whole and in order");
                got += 1;
            }
        }
        voluntary_switches() - before
    });
    for i in 0..n {
        std::thread::sleep(Duration::from_millis(1));
        engine.sender().send(&[i; 16], T).unwrap();
    }
    waiter.join().unwrap()
}

#[test]
fn a_wait_with_an_event_limit_sleeps_through_publications_below_it() {
    // Without a limit every publication wakes the sleeping receiver: the control, which shows
    // that this test can tell the two apart.
    let each = wake_ups_receiving(40, false);
    assert!(each >= 30, "{each} wake-ups for 40 records 1 ms apart");
    // With it the receiver sleeps until the last record (a liveness check every 100 ms, or a
    // wait that began after a record came, may add a few).
    let limited = wake_ups_receiving(40, true);
    assert!(
        limited <= 6,
        "{limited} wake-ups for 40 records with an event limit"
    );
}

#[test]
fn a_receiver_with_an_event_limit_is_woken_once_per_batch_and_loses_nothing() {
    let (mut host, mut engine) = pair(&cfg(Mode::Block)).unwrap();
    let limit = offhost_shm::EventLimit {
        records: 8,
        min_len: 16,
        delay: Duration::from_secs(5),
    };
    host.receiver().set_event_limit(Some(limit));
    assert_eq!(host.receiver().event_limit(), Some(limit));
    let waiter = std::thread::spawn(move || {
        let before = voluntary_switches();
        for i in 0..40u8 {
            let r = host.receiver().recv(T).unwrap();
            assert_eq!(r.bytes(), [i; 16], "records arrive whole and in order");
        }
        voluntary_switches() - before
    });
    for i in 0..40u8 {
        std::thread::sleep(Duration::from_millis(1));
        engine.sender().send(&[i; 16], T).unwrap();
    }
    let woken = waiter.join().unwrap();
    // Five batches of eight (the control above shows about one wake-up per record without a
    // limit); liveness checks may add a few.
    assert!(
        woken <= 12,
        "{woken} wake-ups for 40 records with a limit of 8"
    );
    // A limit of one record, or no delay, is no limit.
    let (mut a, _b) = pair(&cfg(Mode::Block)).unwrap();
    for l in [(1, Duration::from_secs(1)), (8, Duration::ZERO)] {
        a.receiver().set_event_limit(Some(offhost_shm::EventLimit {
            records: l.0,
            min_len: 0,
            delay: l.1,
        }));
        assert_eq!(a.receiver().event_limit(), None);
    }
}

#[test]
fn a_lone_record_under_an_event_limit_is_still_delivered() {
    let (mut host, mut engine) = pair(&cfg(Mode::Block)).unwrap();
    host.receiver()
        .set_event_limit(Some(offhost_shm::EventLimit {
            records: 64,
            min_len: 0,
            delay: Duration::from_millis(20),
        }));
    engine.sender().send(b"alone", T).unwrap();
    assert_eq!(host.receiver().recv(T).unwrap().bytes(), b"alone");
    let waiter = std::thread::spawn(move || {
        let r = host.receiver().recv(T).map(|r| r.bytes().to_vec());
        (r, host)
    });
    std::thread::sleep(Duration::from_millis(5));
    engine.sender().send(b"late", T).unwrap();
    let (r, _host) = waiter.join().unwrap();
    assert_eq!(r.unwrap(), b"late");
}

/// Runs `f` on a thread that shares one CPU with a thread that never stops running.
fn on_a_busy_cpu<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let mine = sched_getaffinity(None).unwrap();
    let cpu = (0..CpuSet::MAX_CPU).find(|&c| mine.is_set(c)).unwrap();
    let mut one = CpuSet::new();
    one.set(cpu);
    let stop = Arc::new(AtomicBool::new(false));
    let busy = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            sched_setaffinity(None, &one).unwrap();
            let t = std::time::Instant::now();
            while !stop.load(Ordering::Relaxed) && t.elapsed() < Duration::from_secs(20) {
                std::hint::spin_loop();
            }
        })
    };
    let out = std::thread::spawn(move || {
        sched_setaffinity(None, &one).unwrap();
        f()
    })
    .join();
    stop.store(true, Ordering::Relaxed);
    busy.join().unwrap();
    out.unwrap()
}

#[test]
fn an_adaptive_wait_whose_spins_keep_failing_on_a_busy_cpu_sleeps_at_once_and_still_gets_every_record(
) {
    let mut c = cfg(Mode::Adaptive);
    c.spin = Duration::from_micros(200);
    let (host, engine) = pair(&c).unwrap();
    let (mut tx, _) = host.split();
    let (_, mut rx) = engine.split();
    // Each record comes 3 ms after the last: far beyond the 200 us spin.
    let sender = std::thread::spawn(move || {
        for i in 0..30u8 {
            std::thread::sleep(Duration::from_millis(3));
            tx.send(&[i], T).unwrap();
        }
        tx
    });
    let s = on_a_busy_cpu(move || {
        for i in 0..30u8 {
            assert_eq!(rx.recv(T).unwrap().bytes(), [i]);
        }
        rx.spin_stats()
    });
    let _tx = sender.join().unwrap();
    // Spins at the 1st, 3rd, 7th, 15th and 31st wait, the others sleep at once. A wait
    // that was preempted past its record counts as a success and starts the doubling over,
    // so the bound leaves room for a few.
    assert!(s.skipped >= 15, "{s:?}");
    assert!(s.failed >= 3 && s.failed <= s.spun, "{s:?}");
    // A record already there when `recv` looks is taken before any spin or sleep.
    assert!(s.spun + s.skipped <= 30, "{s:?}");
}
