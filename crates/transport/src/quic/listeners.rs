//! [`QuicListeners`]: a broker's QUIC listeners, loaded once, reloaded on SIGHUP, and the
//! counters their drivers share.

use std::sync::Arc;

use ring_runtime::DatagramListen;

use super::{QuicCounters, QuicDriver, QuicListenerConfig};
use crate::config::QuicListener;
use crate::error::TransportError;

/// Every QUIC listener of a broker: their configs (reloadable) and the counters their drivers
/// share. Empty without `[[listeners.quic]]`.
#[derive(Debug, Default)]
pub struct QuicListeners {
    listeners: Vec<(std::net::SocketAddr, QuicListenerConfig)>,
    counters: Arc<QuicCounters>,
}

impl QuicListeners {
    /// Reads every listener's certificate and key; an error names the file or the problem.
    pub fn load(listeners: &[QuicListener]) -> Result<Self, TransportError> {
        let counters = Arc::new(QuicCounters::default());
        let listeners = listeners
            .iter()
            .map(|l| {
                Ok((
                    l.bind,
                    QuicListenerConfig::load(&l.settings, Arc::clone(&counters))?,
                ))
            })
            .collect::<Result<_, TransportError>>()?;
        Ok(Self {
            listeners,
            counters,
        })
    }

    /// The runtime's datagram endpoints: one per listener, a [`QuicDriver`] per shard.
    pub fn endpoints(&self) -> Vec<DatagramListen> {
        (self.listeners.iter())
            .map(|(bind, config)| {
                let config = config.clone();
                DatagramListen {
                    addr: *bind,
                    driver: Arc::new(move |setup| Box::new(QuicDriver::new(config.clone(), setup))),
                }
            })
            .collect()
    }

    /// Reads every listener's certificate files again (SIGHUP); the errors of those that
    /// keep their old ones.
    pub fn reload(&self) -> Vec<TransportError> {
        (self.listeners.iter())
            .filter_map(|(_, config)| config.reload().err())
            .collect()
    }

    /// What the drivers count.
    pub fn counters(&self) -> &QuicCounters {
        &self.counters
    }
}
