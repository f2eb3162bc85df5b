//! Transports (shm, tcp, unix, mem) and the Session/Channel host API of offhost.
#![forbid(unsafe_code)]
