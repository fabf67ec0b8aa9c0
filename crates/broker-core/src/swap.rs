//! [`Swap`]: a value replaced whole on reload (password file, ACL, `[ip]`) while
//! readers keep the version they took.

use std::sync::{Arc, RwLock};

/// A value readers clone an `Arc` of, and a reload replaces.
pub struct Swap<T>(RwLock<Arc<T>>);

impl<T> Swap<T> {
    pub fn new(value: T) -> Self {
        Self(RwLock::new(Arc::new(value)))
    }

    /// The current version (a poisoned lock still holds a whole value: only `replace` writes,
    /// and it cannot panic while holding it).
    pub fn get(&self) -> Arc<T> {
        Arc::clone(&self.0.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Puts `value` in force; readers holding the old version keep it.
    pub fn replace(&self, value: T) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(value);
    }
}
