//! Sans-IO wire protocol of offhost: frames, virtual channels, packets and credits.
//! No sockets, no clock, no threads.
#![forbid(unsafe_code)]
