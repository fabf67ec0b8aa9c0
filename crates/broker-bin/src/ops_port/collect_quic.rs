//! The `[[listeners.quic]]` families of `/metrics` (`ringmq_quic_*`): what the QUIC drivers
//! count (docs/transports.md, "MQTT over QUIC"); nothing without a QUIC listener.

use transport::quic::QuicCounters;

use super::state::OpsState;
use ops::exposition::{Exposition, Kind};

/// The QUIC drivers' counters, when the broker has a QUIC listener.
pub(super) fn quic(doc: &mut Exposition, state: &OpsState, has_listener: bool) {
    if !has_listener {
        return;
    }
    let c: &QuicCounters = state.shared.door.quic.counters();
    let families = [
        (
            "ringmq_quic_connections",
            Kind::Gauge,
            "QUIC connections held now, handshakes in progress included.",
            &c.connections,
        ),
        (
            "ringmq_quic_streams_opened_total",
            Kind::Counter,
            "QUIC connections whose MQTT stream opened (handed to the broker).",
            &c.streams_opened,
        ),
        (
            "ringmq_quic_zero_rtt_accepted_total",
            Kind::Counter,
            "QUIC connections whose MQTT stream opened in 0-RTT (a resumed client's early data).",
            &c.zero_rtt_accepted,
        ),
        (
            "ringmq_quic_early_data_waited_total",
            Kind::Counter,
            "0-RTT connections whose early data held a packet that is not replay-safe until the handshake completed.",
            &c.early_data_waited,
        ),
        (
            "ringmq_quic_refused_total",
            Kind::Counter,
            "QUIC connection attempts refused at listeners.quic.max_connections_per_shard.",
            &c.refused,
        ),
        (
            "ringmq_quic_handshake_failures_total",
            Kind::Counter,
            "QUIC connection attempts the endpoint could not accept (a bad Initial packet, a stale handshake).",
            &c.handshake_failures,
        ),
        (
            "ringmq_quic_migrations_total",
            Kind::Counter,
            "Address changes of open QUIC connections (migrations, NAT rebindings).",
            &c.migrations,
        ),
        (
            "ringmq_quic_lost_packets_total",
            Kind::Counter,
            "QUIC packets declared lost, counted as each connection ends.",
            &c.lost_packets,
        ),
        (
            "ringmq_quic_sent_packets_total",
            Kind::Counter,
            "QUIC packets sent, counted as each connection ends.",
            &c.sent_packets,
        ),
    ];
    for (name, kind, help, counter) in families {
        doc.family(name, kind, help);
        doc.sample(name, &[], QuicCounters::get(counter));
    }
}
