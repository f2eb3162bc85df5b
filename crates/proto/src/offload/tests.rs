use proptest::prelude::*;

use super::*;

fn enc_sub(s: &Submission<'_>) -> Vec<u8> {
    let mut v = vec![0u8; s.encoded_len()];
    s.encode(&mut v);
    v
}

fn enc_comp(c: &Completion<'_>) -> Vec<u8> {
    let mut v = vec![0u8; c.encoded_len()];
    c.encode(&mut v);
    v
}

#[test]
fn every_submission_round_trips() {
    for s in [
        Submission::Hello { version: VERSION },
        Submission::Open {
            handle: 7,
            id: 1,
            urgent: true,
            rate: 1_500_000,
            burst: 10_240,
            address: "recon/pet",
        },
        Submission::Open {
            handle: 8,
            id: 2,
            urgent: false,
            rate: 0,
            burst: 0,
            address: "x",
        },
        Submission::Send {
            handle: 7,
            id: 3,
            data: b"hello",
        },
        Submission::Send {
            handle: 7,
            id: 4,
            data: b"",
        },
        Submission::Recv {
            handle: 7,
            id: 5,
            max: 0,
        },
        Submission::Close { handle: 7, id: 6 },
    ] {
        let v = enc_sub(&s);
        assert_eq!(Submission::decode(&v).unwrap(), s);
    }
}

#[test]
fn send_header_in_place_matches_encode() {
    let s = Submission::Send {
        handle: 3,
        id: 99,
        data: b"abc",
    };
    let mut v = vec![0u8; HEADER + 3];
    Submission::encode_send_header(3, 99, 3, &mut v);
    v[HEADER..].copy_from_slice(b"abc");
    assert_eq!(v, enc_sub(&s));
}

#[test]
fn hostile_submissions_are_refused_with_a_reason() {
    let open = enc_sub(&Submission::Open {
        handle: 1,
        id: 1,
        urgent: false,
        rate: 10,
        burst: 5,
        address: "a/b",
    });
    let hello = enc_sub(&Submission::Hello { version: 1 });
    let send = enc_sub(&Submission::Send {
        handle: 1,
        id: 1,
        data: b"xy",
    });
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (vec![], "shorter"),
        (open[..31].to_vec(), "shorter"),
        (
            {
                let mut v = open.clone();
                v[0] = 6;
                v
            },
            "unknown op",
        ),
        (
            {
                let mut v = open.clone();
                v[0] = 0;
                v
            },
            "unknown op",
        ),
        (
            {
                let mut v = open.clone();
                v[1] = 2;
                v
            },
            "flags",
        ),
        (
            {
                let mut v = send.clone();
                v[1] = 1;
                v
            },
            "flags",
        ),
        (
            {
                let mut v = open.clone();
                v[3] = 1;
                v
            },
            "reserved",
        ),
        (
            {
                let mut v = send.clone();
                v[16] = 3;
                v
            },
            "says 3 body bytes",
        ),
        (
            {
                let mut v = send.clone();
                v[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
                v
            },
            "body bytes",
        ),
        (
            {
                let mut v = open.clone();
                v[24..32].copy_from_slice(&0u64.to_le_bytes());
                v
            },
            "burst",
        ),
        (
            {
                let mut v = open.clone();
                let n = v.len();
                v[n - 1] = 0xff;
                v
            },
            "UTF-8",
        ),
        (
            {
                let mut v = open.clone();
                v.truncate(HEADER + 8);
                v[16..20].copy_from_slice(&8u32.to_le_bytes());
                v
            },
            "len",
        ),
        (
            {
                let mut v = hello.clone();
                v[HEADER] = b'X';
                v
            },
            "magic",
        ),
        (
            {
                let mut v = hello.clone();
                v[4] = 1;
                v
            },
            "hello carries",
        ),
        (
            {
                let mut v = send.clone();
                v[20] = 1;
                v
            },
            "arg",
        ),
        (
            {
                let mut v = send.clone();
                v[24] = 1;
                v
            },
            "value",
        ),
    ];
    for (rec, why) in cases {
        let e = Submission::decode(&rec).unwrap_err().to_string();
        assert!(e.contains(why), "{e:?} should say {why:?}");
    }
}

#[test]
fn completions_round_trip_and_check_their_fields() {
    let limits = QueueLimits {
        max_outstanding: 4096,
        max_channels: 64,
        max_bytes: 1 << 26,
        max_message: 1 << 20,
        inline_max: 65536,
    };
    let lb = limits.encode();
    for c in [
        Completion {
            op: Op::Hello,
            status: Status::Ok,
            handle: 0,
            id: 0,
            value: 0,
            body: &lb,
        },
        Completion {
            op: Op::Send,
            status: Status::Ok,
            handle: 1,
            id: 2,
            value: 5,
            body: b"",
        },
        Completion {
            op: Op::Recv,
            status: Status::Ok,
            handle: 1,
            id: 3,
            value: 3,
            body: b"abc",
        },
        Completion {
            op: Op::Recv,
            status: Status::End,
            handle: 1,
            id: 4,
            value: 0,
            body: b"",
        },
        Completion::error(
            Op::Send,
            ErrorCode::LinkFailed,
            1,
            5,
            "link to recon failed",
        ),
        Completion::error(Op::Refused, ErrorCode::BadRecord, 0, 0, "bad"),
    ] {
        let v = enc_comp(&c);
        assert_eq!(Completion::decode(&v).unwrap(), c);
    }
    assert_eq!(QueueLimits::decode(&lb).unwrap(), limits);
    let long = "é".repeat(MAX_REASON);
    let c = Completion::error(Op::Open, ErrorCode::Budget, 1, 1, &long);
    assert!(c.body.len() <= MAX_REASON);
    assert!(Completion::decode(&enc_comp(&c)).is_ok());

    let ok = enc_comp(&Completion {
        op: Op::Recv,
        status: Status::Ok,
        handle: 1,
        id: 3,
        value: 3,
        body: b"abc",
    });
    let bad = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut v = ok.clone();
        f(&mut v);
        Completion::decode(&v).is_err()
    };
    assert!(bad(&|v| v[0] = 9));
    assert!(bad(&|v| v[1] = 3));
    assert!(bad(&|v| v[2] = 1)); // a code without an error
    assert!(bad(&|v| v[1] = 1)); // an error without a code
    assert!(bad(&|v| v[20] = 1));
    assert!(bad(&|v| v[24] = 4)); // value is not the length
    assert!(bad(&|v| v[16] = 4));
    assert!(bad(&|v| {
        v[0] = Op::Send.to_wire();
        v[1] = 2; // only a receive ends
        v.truncate(HEADER);
        v[16..20].fill(0);
        v[24..32].fill(0);
    }));
    assert!(bad(&|v| {
        v[0] = Op::Refused.to_wire(); // a refusal is an error
        v.truncate(HEADER);
        v[16..20].fill(0);
        v[24..32].fill(0);
    }));
    assert!(QueueLimits::decode(&[0u8; LIMITS_BODY]).is_err());
}

fn any_address() -> impl Strategy<Value = String> {
    "[a-z0-9./_-]{1,60}"
}

proptest! {
    #[test]
    fn submissions_round_trip(
        handle in any::<u32>(), id in any::<u64>(), urgent in any::<bool>(),
        rate in any::<u64>(), burst in 1u64.., address in any_address(),
        data in proptest::collection::vec(any::<u8>(), 0..300), max in any::<u32>(), which in 0..5u8,
    ) {
        let (rate, burst) = if rate == 0 { (0, 0) } else { (rate, burst) };
        let s = match which {
            0 => Submission::Open { handle, id, urgent, rate, burst, address: &address },
            1 => Submission::Send { handle, id, data: &data },
            2 => Submission::Recv { handle, id, max },
            3 => Submission::Close { handle, id },
            _ => Submission::Hello { version: max },
        };
        let v = enc_sub(&s);
        prop_assert_eq!(Submission::decode(&v).unwrap(), s);
    }

    #[test]
    fn completions_round_trip(
        handle in any::<u32>(), id in any::<u64>(), value in any::<u64>(),
        data in proptest::collection::vec(any::<u8>(), 0..300), code in 1u16.., reason in "\\PC{0,80}",
        which in 0..4u8,
    ) {
        let c = match which {
            0 => Completion { op: Op::Send, status: Status::Ok, handle, id, value, body: &[] },
            1 => Completion { op: Op::Recv, status: Status::Ok, handle, id, value: data.len() as u64, body: &data },
            2 => Completion { op: Op::Recv, status: Status::End, handle, id, value: 0, body: &[] },
            _ => Completion::error(Op::Send, ErrorCode::from_wire(code), handle, id, &reason),
        };
        let v = enc_comp(&c);
        prop_assert_eq!(Completion::decode(&v).unwrap(), c);
    }

    #[test]
    fn garbage_never_panics(rec in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Submission::decode(&rec);
        let _ = Completion::decode(&rec);
        let _ = crate::peer::PeerMessage::decode(&rec);
    }
}
