//! Helpers shared by the CLI's integration tests.

use std::ops::{Deref, DerefMut};
use std::process::Child;

/// A child process that is killed and reaped when the guard drops, however the test ends: a
/// failed assertion must not leave a server running (holding the descriptors it inherited).
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Deref for Reaped {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}
