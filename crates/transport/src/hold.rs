//! What a server connection's transport holds for its peer between two reads (a partial TLS
//! record or handshake message, the WebSocket upgrade request, a partial frame header): bounded
//! per connection and charged to a budget the broker shares over all connections. Checked once
//! per received chunk, after the layers ran; a plain TCP connection has no layer and pays
//! nothing.

use std::fmt;
use std::sync::Arc;

use ring_runtime::LayerError;

/// The least per-connection bound: a TLS handshake message may take 64 KiB (rustls' largest)
/// and arrive in several records, all kept until it is complete.
pub const MIN_HOLD_PER_CONNECTION: usize = 128 * 1024;

/// A byte budget shared by every connection (the broker's partial-packet budget).
pub trait SharedBudget: Send + Sync {
    /// Charges `bytes` when they fit; otherwise charges nothing and returns false.
    fn try_charge(&self, bytes: u64) -> bool;

    /// Gives back `bytes` charged before.
    fn release(&self, bytes: u64);
}

/// The bounds on what a connection's transport holds.
#[derive(Clone)]
pub struct HoldLimit {
    per_connection: usize,
    shared: Arc<dyn SharedBudget>,
}

impl HoldLimit {
    /// At most `per_connection` bytes per connection (raised to [`MIN_HOLD_PER_CONNECTION`]),
    /// all connections' together charged to `shared`.
    pub fn new(per_connection: usize, shared: Arc<dyn SharedBudget>) -> Self {
        Self {
            per_connection: per_connection.max(MIN_HOLD_PER_CONNECTION),
            shared,
        }
    }

    /// The per-connection bound in force.
    pub fn per_connection(&self) -> usize {
        self.per_connection
    }
}

impl fmt::Debug for HoldLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HoldLimit")
            .field("per_connection", &self.per_connection)
            .finish_non_exhaustive()
    }
}

/// Which bound a connection's transport went over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldOver {
    /// It would hold `held` bytes, over the per-connection bound `limit`.
    Connection { held: usize, limit: usize },
    /// The shared budget had no room for its `held` bytes.
    Shared { held: usize },
}

impl fmt::Display for HeldOver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Connection { held, limit } => write!(
                f,
                "transport holds {held} bytes, over the per-connection bound ({limit})"
            ),
            Self::Shared { held } => write!(
                f,
                "transport holds {held} bytes: no room left in the shared partial-packet budget"
            ),
        }
    }
}

/// One connection's charge: what is charged to the shared budget now, given back on drop.
pub(crate) struct Hold {
    limit: HoldLimit,
    charged: usize,
    over: Option<HeldOver>,
}

impl Hold {
    pub(crate) fn new(limit: HoldLimit) -> Self {
        Self {
            limit,
            charged: 0,
            over: None,
        }
    }

    /// Charges or gives back the difference to `held`; an error (remembered) when `held` is
    /// over a bound.
    pub(crate) fn account(&mut self, held: usize) -> Result<(), LayerError> {
        if held > self.limit.per_connection {
            return Err(self.refuse(HeldOver::Connection {
                held,
                limit: self.limit.per_connection,
            }));
        }
        if held > self.charged {
            if !self.limit.shared.try_charge((held - self.charged) as u64) {
                return Err(self.refuse(HeldOver::Shared { held }));
            }
        } else if held < self.charged {
            self.limit.shared.release((self.charged - held) as u64);
        }
        self.charged = held;
        Ok(())
    }

    /// The bound a failed [`Self::account`] found exceeded.
    pub(crate) fn over(&self) -> Option<HeldOver> {
        self.over
    }

    fn refuse(&mut self, over: HeldOver) -> LayerError {
        self.over = Some(over);
        LayerError::new(over.to_string())
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        if self.charged > 0 {
            self.limit.shared.release(self.charged as u64);
        }
    }
}
