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
