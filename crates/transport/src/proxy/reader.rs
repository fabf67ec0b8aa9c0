//! [`ProxyReader`]: one connection's PROXY protocol header while it arrives, fed each read.
//! A header split over reads is kept (at most [`super::header::MAX_HEADER_LEN`] bytes: [`super::parse::parse`]
//! refuses a longer one), charged to the broker's hold budget while kept.

use bytes::{Bytes, BytesMut};

use super::error::ProxyError;
use super::header::{Parsed, ProxyHeader};
use super::parse::parse;
use crate::hold::{Hold, HoldLimit};

/// What a read brought.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadStep {
    /// Still a prefix of a header.
    NeedMore,
    /// The header is complete; `rest` is what followed it in the same read (TLS, WebSocket
    /// or MQTT bytes).
    Done { header: ProxyHeader, rest: Bytes },
}

/// A connection's header so far.
pub struct ProxyReader {
    pending: BytesMut,
    hold: Option<Hold>,
}

impl ProxyReader {
    /// A reader whose kept bytes are charged to `hold` (unbounded by a budget when `None`;
    /// the header's own bound applies).
    pub fn new(hold: Option<&HoldLimit>) -> Self {
        Self {
            pending: BytesMut::new(),
            hold: hold.map(|limit| Hold::new(limit.clone())),
        }
    }

    /// Bytes kept from earlier reads.
    pub fn held(&self) -> usize {
        self.pending.len()
    }

    /// Feeds one read's bytes.
    pub fn feed(&mut self, data: Bytes) -> Result<ReadStep, ProxyError> {
        let parsed = match self.pending.is_empty() {
            true => parse(&data),
            false => {
                self.pending.extend_from_slice(&data);
                parse(&self.pending)
            }
        };
        match parsed? {
            Parsed::NeedMore => {
                if self.pending.is_empty() {
                    self.pending.extend_from_slice(&data);
                }
                self.charge()?;
                Ok(ReadStep::NeedMore)
            }
            Parsed::Done { header, len } => {
                let rest = match self.pending.is_empty() {
                    true => data.slice(len..),
                    false => self.pending.split().freeze().slice(len..),
                };
                self.hold = None;
                Ok(ReadStep::Done { header, rest })
            }
        }
    }

    /// Charges what is kept to the hold budget.
    fn charge(&mut self) -> Result<(), ProxyError> {
        let held = self.pending.len();
        match self.hold.as_mut().map(|hold| hold.account(held)) {
            Some(Err(_)) => Err(ProxyError::OverBudget(held)),
            _ => Ok(()),
        }
    }
}
