//! Network Block Device front end of offhost.
#![forbid(unsafe_code)]
