//! Shared-memory layer of offhost: segments, single-producer single-consumer rings,
//! doorbells and peer liveness. This is the only crate of the workspace that uses `unsafe`.
