//! Building blocks of `offhost bench reproduce`: the transfer disciplines of seed 000
//! (unbuffered, buffered FIFO, interrupt-driven), its copies into shared memory, and the seed
//! papers' published figures to compare with.

pub mod copies;
pub mod fifo;
pub mod seeds;
