//! Zero-copy loans over shared memory, and their absence elsewhere.

mod common;

use std::time::Duration;

use offhost_link::{ChannelOptions, LinkError, Message, SendMode, Session};

const T: Duration = Duration::from_secs(20);

fn big() -> ChannelOptions {
    ChannelOptions {
        packet_size: 64 * 1024,
        recv_buffer: 4 << 20,
        max_message: 1 << 20,
        send_mode: SendMode::Async,
    }
}

#[test]
fn loans_round_trip_through_the_echo_in_place() {
    let (url, _dir) = common::echo_server("shm");
    let s = Session::connect(&url).unwrap();
    let ch = s.open("loans", big()).unwrap();
    // More round trips than the pool has buffers: each must return to the pool on drop.
    for i in 0..40u8 {
        let mut loan = ch.loan(Some(T)).unwrap();
        assert_eq!(loan.capacity(), 1 << 20);
        let len = 1000 + usize::from(i) * 20_000;
        loan.set_len(len).unwrap();
        loan.iter_mut()
            .enumerate()
            .for_each(|(j, b)| *b = (j as u8) ^ i);
        ch.send_loan(loan).unwrap();
        match ch.recv_message(T).unwrap().unwrap() {
            Message::Loan(back) => {
                assert_eq!(back.len(), len);
                assert!(
                    back.iter().enumerate().all(|(j, b)| *b == (j as u8) ^ i),
                    "loan {i} corrupted"
                );
            }
            Message::Bytes(_) => panic!("the echo should forward the loan by descriptor"),
        }
    }
    // Loans and copies mix on one channel, in order.
    let mut loan = ch.loan(Some(T)).unwrap();
    loan.set_len(3).unwrap();
    loan.copy_from_slice(b"abc");
    ch.send(b"first").unwrap();
    ch.send_loan(loan).unwrap();
    ch.send(b"third").unwrap();
    assert_eq!(ch.recv_wait(T).unwrap().unwrap(), b"first");
    assert_eq!(ch.recv_wait(T).unwrap().unwrap(), b"abc");
    assert_eq!(ch.recv_wait(T).unwrap().unwrap(), b"third");
}

#[test]
fn loan_larger_than_the_channel_maximum_is_an_error_at_the_call() {
    let (url, _dir) = common::echo_server("shm");
    let s = Session::connect(&url).unwrap();
    let ch = s
        .open(
            "small",
            ChannelOptions {
                max_message: 100,
                recv_buffer: 100,
                ..big()
            },
        )
        .unwrap();
    let mut loan = ch.loan(Some(T)).unwrap();
    loan.set_len(101).unwrap();
    assert!(matches!(
        ch.send_loan(loan),
        Err(LinkError::TooLarge { len: 101, max: 100 })
    ));
    let mut loan = ch.loan(Some(T)).unwrap();
    assert!(matches!(
        loan.set_len((1 << 20) + 1),
        Err(LinkError::TooLarge { .. })
    ));
}

#[test]
fn loans_need_shared_memory() {
    for transport in ["tcp", "unix", "mem"] {
        let (url, _dir) = common::echo_server(transport);
        let s = Session::connect(&url).unwrap();
        let ch = s.open("x", big()).unwrap();
        assert!(
            matches!(ch.loan(Some(T)), Err(LinkError::NoLoans)),
            "{transport}"
        );
    }
}
