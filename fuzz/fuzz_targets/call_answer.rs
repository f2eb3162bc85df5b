//! Fuzz the joining of a `call` task's answers (`offhost_node::calls::Joiner`): the
//! messages a serving engine sends, each cut from the input after a one-byte length, under a
//! limit from the input's first two bytes. No message may panic; a joined answer is never
//! larger than the limit and holds exactly the parts pushed since the last one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use offhost_node::calls::{Joiner, WireError};

fuzz_target!(|data: &[u8]| {
    let Some((head, mut rest)) = data.split_first_chunk::<2>() else {
        return;
    };
    let limit = usize::from(u16::from_le_bytes(*head));
    let mut j = Joiner::answer(limit);
    let mut fed = 0usize;
    while let Some((&n, tail)) = rest.split_first() {
        let (msg, tail) = tail.split_at(usize::from(n).min(tail.len()));
        rest = tail;
        match j.push(msg) {
            Ok(Some(b)) => {
                assert!(b.len() <= limit);
                assert_eq!(b.len(), fed + msg.len() - 1);
                fed = 0;
                j = Joiner::answer(limit);
            }
            Ok(None) => {
                fed += msg.len() - 1;
                assert!(fed <= limit && j.started());
            }
            Err(e) => {
                // An empty message, one that is no part, or one past the limit.
                assert!(match e {
                    WireError::Empty => msg.is_empty(),
                    WireError::NotAPart { flag, .. } => flag > 1,
                    WireError::TooLarge { len, .. } => len > limit,
                    _ => false,
                });
                fed = 0;
                j = Joiner::answer(limit);
            }
        }
    }
});
