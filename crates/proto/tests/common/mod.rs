//! A client/server pair over a simulated lossless link.
#![allow(dead_code)] // each test binary uses a different part

use offhost_proto::{Config, Connection, Received, Side};

pub struct Pair {
    pub a: Connection,
    pub b: Connection,
    pub a_to_b: Vec<u8>,
    pub b_to_a: Vec<u8>,
}

impl Pair {
    pub fn new() -> Self {
        Pair {
            a: Connection::new(Config::new(Side::Client)),
            b: Connection::new(Config::new(Side::Server)),
            a_to_b: Vec::new(),
            b_to_a: Vec::new(),
        }
    }

    /// Collects what both sides want to transmit.
    pub fn collect(&mut self) {
        self.a.poll_transmit(&mut self.a_to_b);
        self.b.poll_transmit(&mut self.b_to_a);
    }

    /// Delivers up to `n` bytes in each direction.
    pub fn deliver(&mut self, n: usize) {
        self.collect();
        let k = n.min(self.a_to_b.len());
        let chunk: Vec<u8> = self.a_to_b.drain(..k).collect();
        self.b.handle_input(&chunk).expect("b accepts a's bytes");
        let k = n.min(self.b_to_a.len());
        let chunk: Vec<u8> = self.b_to_a.drain(..k).collect();
        self.a.handle_input(&chunk).expect("a accepts b's bytes");
        self.collect();
    }

    /// Like [`deliver`](Self::deliver), the side `to_a` names (a when true, b otherwise)
    /// handing the next message of its `channel` to `take` as it is parsed, when it can; returns
    /// whether it did.
    pub fn deliver_taking(
        &mut self,
        n: usize,
        to_a: bool,
        channel: u32,
        take: &mut dyn FnMut(&[u8]),
    ) -> bool {
        self.collect();
        let k = n.min(self.a_to_b.len());
        let chunk: Vec<u8> = self.a_to_b.drain(..k).collect();
        let mut took = false;
        if to_a {
            self.b.handle_input(&chunk).expect("b accepts a's bytes");
        } else {
            took = self
                .b
                .handle_input_taking(&chunk, channel, take)
                .expect("b accepts a's bytes");
        }
        let k = n.min(self.b_to_a.len());
        let chunk: Vec<u8> = self.b_to_a.drain(..k).collect();
        if to_a {
            took = self
                .a
                .handle_input_taking(&chunk, channel, take)
                .expect("a accepts b's bytes");
        } else {
            self.a.handle_input(&chunk).expect("a accepts b's bytes");
        }
        self.collect();
        took
    }

    /// Delivers the frame at the head of the wire to the side `to_a` names (a when true, b
    /// otherwise) as a transport that carries frames one per record (shared memory) does: the
    /// bytes as long as the head's header says (or what there is) are offered to
    /// `Connection::take_whole_message` for `channel`, and fed the usual way when it declines.
    /// Returns the message it took, if any. (When the receiver holds a partial frame, the head
    /// is not a frame start and the length is arbitrary: the offer must be declined then.)
    pub fn deliver_whole(&mut self, to_a: bool, channel: u32) -> Option<Vec<u8>> {
        self.collect();
        let (wire, conn) = if to_a {
            (&mut self.b_to_a, &mut self.a)
        } else {
            (&mut self.a_to_b, &mut self.b)
        };
        let want = match wire.get(8..12) {
            Some(len) => {
                offhost_proto::frame::frame_len(u32::from_le_bytes(len.try_into().unwrap()) as usize)
            }
            None => wire.len(),
        };
        let record: Vec<u8> = wire.drain(..want.min(wire.len())).collect();
        let took = conn
            .take_whole_message(&record, channel)
            .map(<[u8]>::to_vec);
        if took.is_none() {
            conn.handle_input(&record)
                .expect("the receiver accepts the bytes");
        }
        self.collect();
        took
    }

    /// Delivers everything until both directions are quiet.
    pub fn settle(&mut self) {
        for _ in 0..1000 {
            self.collect();
            if self.a_to_b.is_empty() && self.b_to_a.is_empty() {
                return;
            }
            self.deliver(usize::MAX);
        }
        panic!("link never settled");
    }
}

pub fn message(r: Received) -> Vec<u8> {
    match r {
        Received::Message(m) => m,
        other => panic!("expected a message, got {other:?}"),
    }
}
