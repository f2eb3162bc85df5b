//! One point of `bench mux`: a server whose threads read every channel, and the sessions and
//! sender threads that load it.

use std::sync::Barrier;
use std::thread::JoinHandle;

use offhost_bench::cpu::thread_cpu_s;

use super::*;

/// Channel options for `size`-byte messages with a receive window of `window` bytes.
pub(super) fn options(size: usize, window: u32) -> ChannelOptions {
    ChannelOptions {
        packet_size: size.clamp(64, 64 << 10).next_power_of_two(),
        recv_buffer: window,
        max_message: size.max(8) as u64,
        send_mode: SendMode::Async,
    }
}

/// What one point sends.
pub(super) struct Load {
    /// Links (sessions).
    pub(super) sessions: usize,
    /// Channels on each.
    pub(super) per_session: usize,
    /// Message size, bytes.
    pub(super) size: usize,
    /// Messages per channel at most.
    pub(super) count: u64,
    /// Time per sender at most.
    pub(super) cap: Duration,
    /// Every channel's options.
    pub(super) options: ChannelOptions,
}

/// What one point measured.
pub(super) struct Measured {
    /// Messages received.
    pub(super) messages: u64,
    /// Bytes received.
    pub(super) bytes: u64,
    /// From the first send to the last message received.
    pub(super) seconds: f64,
    /// The senders' CPU time, summed.
    pub(super) sender_cpu_s: f64,
}

/// What one receiving thread took.
struct Got {
    messages: u64,
    bytes: u64,
    last: Option<Instant>,
}

/// What one sending thread sent.
struct Sent {
    messages: u64,
    start: Instant,
    cpu_s: f64,
}

/// Runs one point: a server on a fresh address of `t` whose thread accepts `load.sessions`
/// sessions of `load.per_session` channels each and reads every channel on a thread of its
/// own, and as many sessions and sender threads here.
pub(super) fn one_point(t: Transport, pki: Option<&Pki>, load: &Load) -> Result<Measured> {
    let (url, _dir) = listen_url(t)?;
    let link = match pki {
        Some(p) if t.is_tls() => p.link_options(),
        _ => LinkOptions::new().insecure(true),
    };
    let server = Server::bind_with(&url, &link)?;
    let url = server.url().to_owned();
    let (sessions, per) = (load.sessions, load.per_session);
    let receivers = std::thread::Builder::new()
        .name("mux-accept".into())
        .spawn(move || receive_all(&server, sessions, per))?;
    // On an error here the server thread may wait for a session that never comes: it is left
    // behind rather than joined.
    let (sent, clients) = send_all(&url, t.is_tls().then_some(&link), load)?;
    let got = receivers
        .join()
        .map_err(|_| Error::Check("the receiving thread panicked".into()))??;
    drop(clients);
    let messages: u64 = got.iter().map(|g| g.messages).sum();
    let bytes: u64 = got.iter().map(|g| g.bytes).sum();
    let sent_messages: u64 = sent.iter().map(|s| s.messages).sum();
    check(messages == sent_messages, || {
        format!("received {messages} messages of {sent_messages} sent")
    })?;
    check(bytes == sent_messages * load.size as u64, || {
        format!(
            "received {bytes} bytes of {} sent",
            sent_messages * load.size as u64
        )
    })?;
    let first = sent
        .iter()
        .map(|s| s.start)
        .min()
        .ok_or_else(|| Error::Check("no sender".into()))?;
    let last = got
        .iter()
        .filter_map(|g| g.last)
        .max()
        .ok_or_else(|| Error::Check("nothing received".into()))?;
    let seconds = last.saturating_duration_since(first).as_secs_f64();
    check(seconds > 0.0, || "no time passed".into())?;
    Ok(Measured {
        messages,
        bytes,
        seconds,
        sender_cpu_s: sent.iter().map(|s| s.cpu_s).sum(),
    })
}

/// The receiving side: accepts `sessions` sessions of `per` channels each, reads each channel
/// on a thread of its own until its end of stream; what each took.
fn receive_all(server: &Server, sessions: usize, per: usize) -> Result<Vec<Got>> {
    let mut threads: Vec<JoinHandle<Result<Got>>> = Vec::with_capacity(sessions * per);
    for _ in 0..sessions {
        let session = server.accept()?;
        for _ in 0..per {
            let ch = session.accept()?;
            threads.push(
                std::thread::Builder::new()
                    .name("mux-recv".into())
                    .spawn(move || receive(&ch))?,
            );
        }
    }
    threads
        .into_iter()
        .map(|h| {
            h.join()
                .map_err(|_| Error::Check("a receiving thread panicked".into()))?
        })
        .collect()
}

/// Says it is ready, then counts the messages of `ch` and their bytes, in place, until the end
/// of stream.
fn receive(ch: &Channel) -> Result<Got> {
    ch.send(b"r")?;
    let mut got = Got {
        messages: 0,
        bytes: 0,
        last: None,
    };
    loop {
        let mut bytes = 0u64;
        let k = ch.recv_each(1024, |m| bytes += m.len() as u64)?;
        if k == 0 {
            return Ok(got);
        }
        got.last = Some(Instant::now());
        got.messages += k as u64;
        got.bytes += bytes;
    }
}

/// The sending side: connects the sessions, opens their channels, waits until every
/// receiver is ready, then sends on each channel from a thread of its own; what each sent,
/// and the sessions (to be closed once the receivers are done).
fn send_all(
    url: &str,
    tls: Option<&LinkOptions>,
    load: &Load,
) -> Result<(Vec<Sent>, Vec<Session>)> {
    let mut sessions = Vec::with_capacity(load.sessions);
    let mut channels = Vec::with_capacity(load.sessions * load.per_session);
    for s in 0..load.sessions {
        let session = match tls {
            Some(link) => Session::connect_with(url, link)?,
            None => connect(url, None)?,
        };
        for c in 0..load.per_session {
            channels.push(session.open(&format!("mux-{s}-{c}"), load.options)?);
        }
        sessions.push(session);
    }
    for ch in &channels {
        ch.recv()?
            .ok_or_else(|| Error::Check("a receiver ended before it was ready".into()))?;
    }
    let barrier = Barrier::new(channels.len());
    let msg = vec![0x5au8; load.size];
    let sent = std::thread::scope(|scope| {
        let senders: Vec<_> = channels
            .iter()
            .map(|ch| {
                let (barrier, msg) = (&barrier, &msg[..]);
                scope.spawn(move || send(ch, barrier, msg, load.count, load.cap))
            })
            .collect();
        senders
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| Error::Check("a sending thread panicked".into()))?
            })
            .collect::<Result<Vec<Sent>>>()
    })?;
    Ok((sent, sessions))
}

/// Once every sender is at the barrier, sends `msg` on `ch` up to `count` times or until
/// `cap` has passed, then ends the stream.
fn send(ch: &Channel, barrier: &Barrier, msg: &[u8], count: u64, cap: Duration) -> Result<Sent> {
    barrier.wait();
    let cpu = thread_cpu_s();
    let start = Instant::now();
    let mut n = 0u64;
    while n < count {
        ch.send(msg)?;
        n += 1;
        if n.is_multiple_of(CLOCK_EVERY) && start.elapsed() >= cap {
            break;
        }
    }
    ch.close()?;
    Ok(Sent {
        messages: n,
        start,
        cpu_s: thread_cpu_s() - cpu,
    })
}
