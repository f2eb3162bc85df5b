//! `host-in` and messages sent where its pool keeps its data: taken into the pool whole.

use std::time::Duration;

use offhost_engine::{
    EngineConfig, HostInput, HostOutput, Pipeline, Registry, Running, Stats, DEFAULT_HEADROOM,
    DEFAULT_TAILROOM, LAST,
};

const T: Duration = Duration::from_secs(20);
const SIZE: usize = 4096;

fn cfg() -> EngineConfig {
    EngineConfig {
        workers: 1,
        pin: false,
        batch: 16,
    }
}

/// Starts the pipeline `text` with one worker.
fn start(text: &str) -> Running {
    Pipeline::parse(text)
        .unwrap()
        .start(&Registry::with_builtins(), &cfg())
        .unwrap()
}

/// Starts `text`, with its host-in `in` and host-out `out`.
fn open(text: &str) -> (Running, HostInput, HostOutput) {
    let mut run = start(text);
    let input = run.host_input("in").unwrap();
    let out = run.host_output("out").unwrap();
    (run, input, out)
}

/// Ends the stream into `in`, checks `out` ends too, and waits for the pipeline.
fn end(run: Running, mut input: HostInput, out: &HostOutput) -> Stats {
    input.close();
    assert!(matches!(out.recv_timeout(T), Ok(None)));
    run.wait().unwrap()
}

/// A pool buffer's storage.
const STORAGE: usize = DEFAULT_HEADROOM + SIZE + DEFAULT_TAILROOM;

/// `data` at `front` of a buffer with room for `capacity` bytes, behind the part flag for
/// `whole=true`; and where `data` starts in it.
fn laid_out(front: usize, whole: bool, data: &[u8], capacity: usize) -> (Vec<u8>, usize) {
    let mut v = Vec::with_capacity(capacity);
    v.resize(front, 0xaa);
    if whole {
        v.push(LAST);
    }
    v.extend_from_slice(data);
    let at = v.as_ptr() as usize + front + usize::from(whole);
    (v, at)
}

#[test]
fn a_message_where_the_pool_keeps_its_data_enters_the_pool_without_a_copy() {
    for whole in [false, true] {
        let text = format!("host-in name=in whole={whole} >a:p(2,{SIZE})\nhost-out name=out <a\n");
        let (run, input, out) = open(&text);
        let front = input.front();
        assert_eq!(front, DEFAULT_HEADROOM - usize::from(whole));
        let data: Vec<u8> = (0..3000u32).map(|i| (i * 13) as u8).collect();

        // At the front, and at least half a buffer: the message's own buffer comes out.
        let (v, at) = laid_out(front, whole, &data, STORAGE);
        input.send_quiet_at(v, front).unwrap();
        input.wake();
        let b = out.recv_timeout(T).unwrap().unwrap();
        assert_eq!(&b[..], &data[..], "whole={whole}");
        assert_eq!(b.as_ptr() as usize, at, "whole={whole}: taken, not copied");
        assert!(b.pool_name().is_some(), "a pool buffer");
        drop(b);

        // Shorter than half a buffer, somewhere else in its buffer, or in a buffer that would
        // swell the pool: copied, same bytes.
        for (front_at, len, capacity) in [
            (front, 100, STORAGE),
            (front + 1, 3000, STORAGE),
            (0, 3000, STORAGE),
            (front, 3000, 2 * STORAGE),
        ] {
            let (v, at) = laid_out(front_at, whole, &data[..len], capacity);
            input.send_quiet_at(v, front_at).unwrap();
            input.wake();
            let b = out.recv_timeout(T).unwrap().unwrap();
            assert_eq!(&b[..], &data[..len], "whole={whole} at {front_at}");
            assert_ne!(
                b.as_ptr() as usize,
                at,
                "whole={whole} at {front_at}: copied"
            );
        }
        let stats = end(run, input, &out);
        // The pool keeps its count: each buffer taken in gave its storage away.
        assert!(
            stats.pools.iter().all(|p| p.free == p.count),
            "{:?}",
            stats.pools
        );
    }
}

#[test]
fn a_message_said_to_start_past_its_buffer_fails_the_task_with_a_reason() {
    let text = format!("host-in name=in >a:p(2,{SIZE})\nnull <a\n");
    let mut run = start(&text);
    let input = run.host_input("in").unwrap();
    input.send_quiet_at(vec![1; 10], 20).unwrap();
    input.wake();
    let err = run.wait().unwrap_err().to_string();
    assert!(err.contains("start at byte 20 of a buffer of 10"), "{err}");
}

/// What the daemon passes on from a peer's `in/` channel, at the front: a part with no flag,
/// a bad flag, or more than a pool buffer holds fails the pipeline's host-in with an error
/// that says which (the daemon itself goes on serving: `tests/daemon.rs`).
#[test]
fn bad_parts_at_the_front_fail_host_in_saying_what_is_wrong() {
    let text = format!("host-in name=in whole=true >a:p(2,{SIZE})\nnull <a\n");
    let cases: [(Vec<u8>, &str); 3] = [
        (vec![], "an empty message"),
        // Long enough to be taken whole, were the flag not looked at.
        (
            vec![7; 3000],
            "a part starts with 7, not MORE (1) or LAST (0)",
        ),
        (
            [&[LAST][..], &[1; SIZE + 1]].concat(),
            "does not fit a buffer of its free list",
        ),
    ];
    for (part, want) in cases {
        let mut run = start(&text);
        let mut input = run.host_input("in").unwrap();
        let front = input.front();
        let mut v = Vec::with_capacity(STORAGE);
        v.resize(front, 0);
        v.extend_from_slice(&part);
        input.send_quiet_at(v, front).unwrap();
        // The end of the stream: a part passed on would end the pipeline well.
        input.close();
        let err = run.wait().unwrap_err().to_string();
        assert!(
            err.contains("host-in channel 'in'") && err.contains(want),
            "{err}"
        );
    }
}

/// A host sending messages far larger than host-in's pool buffers, while nothing reads the
/// pipeline's output: it waits once the bytes queued reach `max_queued` (64 buffers' worth,
/// each counted as at least 64 KiB), instead of queueing 64 messages of any size; all arrive
/// once the output is read, and the spares the host gets back are pool-buffer sized again.
#[test]
fn large_messages_wait_for_room_by_bytes_and_their_buffers_are_not_kept_as_spares() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    const MSG: usize = 1 << 20;
    const COUNT: usize = 24;
    let text = format!("host-in name=in >a:p(2,{SIZE})\nhost-out name=out <a\n");
    let (run, input, out) = open(&text);
    assert_eq!(input.max_queued(), 64 * (64 << 10));
    let per_queue = input.max_queued() / MSG;
    let sent = Arc::new(AtomicUsize::new(0));
    let sender = {
        let sent = sent.clone();
        std::thread::spawn(move || {
            for i in 0..COUNT {
                input.send(vec![i as u8; MSG]).unwrap();
                sent.fetch_add(1, Ordering::SeqCst);
            }
            input
        })
    };
    // Nothing reads `out`: the pool's two buffers fill, host-in holds one message, and the
    // queue as many as fit its bytes. The old count-only bound let all 24 through.
    let t = std::time::Instant::now();
    while sent.load(Ordering::SeqCst) < per_queue {
        assert!(t.elapsed() < T, "{} sent", sent.load(Ordering::SeqCst));
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(300));
    let stuck = sent.load(Ordering::SeqCst);
    assert!(
        (per_queue..=per_queue + 1).contains(&stuck),
        "{stuck} sent, {per_queue} fit the queue"
    );
    let mut got = vec![0usize; COUNT];
    for _ in 0..COUNT * MSG / SIZE {
        let b = out.recv_timeout(T).unwrap().unwrap();
        assert!(b.iter().all(|&x| x == b[0]));
        got[usize::from(b[0])] += b.len();
    }
    assert!(got.iter().all(|&n| n == MSG), "{got:?}");
    let input = sender.join().unwrap();
    // The 1 MiB buffers went back to the allocator, not to the spares.
    for _ in 0..8 {
        assert!(input.spare().capacity() <= STORAGE + STORAGE / 4);
    }
    end(run, input, &out);
}

/// A message in a buffer with less room than a pool buffer's storage is copied, and that
/// buffer is not kept as a spare: the spares handed out afterwards all have room for a pool
/// buffer, so a message received into any of them can enter the pool without a copy (a
/// buffer too small for that would circulate, and be copied, for as long as the stream ran).
#[test]
fn a_buffer_too_small_for_the_pool_is_copied_and_not_kept() {
    let text = format!("host-in name=in whole=true >a:p(2,{SIZE})\nhost-out name=out <a\n");
    let (run, input, out) = open(&text);
    let front = input.front();
    let data = vec![5u8; SIZE];
    for _ in 0..4 {
        // Room for the message, not for the pool's tailroom.
        let (v, at) = laid_out(front, true, &data, front + 1 + SIZE);
        assert!(v.capacity() < STORAGE);
        input.send_quiet_at(v, front).unwrap();
        input.wake();
        let b = out.recv_timeout(T).unwrap().unwrap();
        assert_eq!(&b[..], &data[..]);
        assert_ne!(b.as_ptr() as usize, at, "copied");
    }
    for _ in 0..8 {
        let c = input.spare().capacity();
        assert!(
            (STORAGE..=STORAGE + STORAGE / 4).contains(&c),
            "a spare of {c}"
        );
    }
    end(run, input, &out);
}

/// A host that receives messages into its spares gets, as its next spare, the storage of the
/// buffer the pipeline freed last, still in the cache from its last message, not one that
/// waited in the pool meanwhile; and the pool and the spares keep their counts however long
/// the stream runs.
#[test]
fn the_next_spare_is_the_storage_the_pipeline_freed_last() {
    let text = format!("host-in name=in >a:p(4,{SIZE})\nhost-out name=out <a\n");
    let (run, input, out) = open(&text);
    let front = input.front();
    let mut last = None;
    for i in 0..200u32 {
        let mut v = input.spare();
        let at = v.as_ptr() as usize;
        if let Some(last) = last {
            assert_eq!(
                at, last,
                "message {i}: the storage freed last comes back first"
            );
        }
        v.resize(front, 0);
        v.extend((0..SIZE as u32).map(|j| (i + j) as u8));
        input.send_quiet_at(v, front).unwrap();
        input.wake();
        let b = out.recv_timeout(T).unwrap().unwrap();
        assert!(b
            .iter()
            .enumerate()
            .all(|(j, &x)| x == (i + j as u32) as u8));
        assert_eq!(b.as_ptr() as usize, at + front, "taken whole");
        drop(b);
        last = Some(at);
    }
    let stats = end(run, input, &out);
    assert!(
        stats.pools.iter().all(|p| p.free == p.count),
        "{:?}",
        stats.pools
    );
}
