//! Putting frames on a connection: control packets encoded into the shard's scratch buffer,
//! PUBLISH frames encoded straight into the connection's send buffer (small ones whole, large
//! ones as a header followed by the shared payload).

use codec::{Disconnect, DisconnectProperties, FrameOptions, Packet, PacketId, ReasonCode};
use ring_runtime::ConnId;
use tracing::debug;

use super::parts::Wire;
use super::{BrokerShard, Ctx, client_id_of};
use std::sync::Arc;

use super::frame_cache::{CachedFrame, FrameCache, FrameKey};
use crate::message::{CopyView, Expiry, Message};
use crate::metrics::{DropReason, ShardCounters};

/// Why a PUBLISH was not put on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NotSent {
    /// Its message expired.
    Expired,
    /// It is larger than the client's Maximum Packet Size (discarded, as the spec says).
    TooLarge,
    /// The ACL does not let the client read its topic (discarded).
    NotAuthorized,
    /// The connection is gone.
    Closed,
}

impl NotSent {
    /// The drop reason a copy not sent for this reason is counted under.
    pub(super) fn drop_reason(self) -> DropReason {
        match self {
            Self::Expired => DropReason::Expired,
            Self::TooLarge => DropReason::Oversize,
            Self::NotAuthorized => DropReason::NotAuthorized,
            Self::Closed => DropReason::Offline,
        }
    }
}

impl BrokerShard {
    /// Frames one PUBLISH for `conn` (its own header: QoS, packet id, DUP, expiry, alias,
    /// subscription identifiers) and queues it.
    pub(super) fn send_publish(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        copy: CopyView<'_>,
        packet_id: Option<PacketId>,
        dup: bool,
    ) -> Result<(), NotSent> {
        let allowed = self.auth.acl_allows_delivery(
            &self.shared.access,
            self.figures.counters(),
            conn,
            copy.message.publish.topic(),
            || client_id_of(&self.conns, &self.sessions, conn),
        );
        if !allowed {
            return Err(NotSent::NotAuthorized);
        }
        let message_expiry_interval = match copy.message.expiry(ctx.now()) {
            Expiry::Expired => return Err(NotSent::Expired),
            Expiry::Never => None,
            Expiry::Remaining(secs) => Some(secs),
        };
        let connection = self.conns.get_mut(&conn).ok_or(NotSent::Closed)?;
        let protocol = connection.protocol;
        let max_packet = connection.client_max_packet as usize;
        let mut options = FrameOptions::new(protocol);
        options.qos = copy.qos;
        options.packet_id = packet_id;
        options.dup = dup;
        options.retain = copy.retain;
        options.message_expiry_interval = message_expiry_interval;
        if protocol.is_v5() {
            options.subscription_identifiers = copy.sub_ids;
        }
        // Identical for every recipient of this message with the same key but for the packet
        // id: no DUP, no expiry countdown, no subscription identifiers, no topic alias.
        let cache_key = (!dup
            && message_expiry_interval.is_none()
            && options.subscription_identifiers.is_empty()
            && !connection.has_outbound_aliases())
        .then_some(FrameKey {
            protocol,
            retain: copy.retain,
            qos: copy.qos,
        });
        let cached =
            cache_key.and_then(|key| self.delivery.routes.frame_cache.get(copy.message, key));
        let len = match cached {
            Some(frame) => queue_cached(ctx, conn, frame, packet_id, max_packet)?,
            None => self.encode_publish(ctx, conn, copy.message, options, max_packet, cache_key)?,
        };
        let latency = self.figures.count_sent(ctx, copy, dup, len);
        if copy.qos == codec::QoS::ExactlyOnce
            && let Some(id) = packet_id
        {
            self.journal_sent(ctx, conn, id, copy.message.key);
        }
        self.trace_copy(ctx, conn, copy, packet_id.map(|id| id.get()), dup);
        if copy.qos == codec::QoS::AtMostOnce {
            self.note_qos0_latency(ctx, conn, latency);
        }
        Ok(())
    }

    /// Encodes a PUBLISH for `conn` (assigning an outbound topic alias if it uses them) and
    /// queues it; its length. A small frame is remembered under `cache_key` when given.
    fn encode_publish(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        message: &Arc<Message>,
        mut options: FrameOptions<'_>,
        max_packet: usize,
        cache_key: Option<FrameKey>,
    ) -> Result<usize, NotSent> {
        let publish = &message.publish;
        let plain_len = publish.frame_len(&options).map_err(|_| NotSent::TooLarge)?;
        if plain_len > max_packet {
            return Err(NotSent::TooLarge);
        }
        let connection = self.conns.get_mut(&conn).ok_or(NotSent::Closed)?;
        let alias = connection.outbound_aliases().and_then(|aliases| {
            aliases
                .assign(publish.topic().as_shared_bytes())
                .alias_use()
        });
        let len = match alias {
            None => plain_len,
            Some(alias) => {
                options.topic_alias = Some(alias);
                publish.frame_len(&options).map_err(|_| NotSent::TooLarge)?
            }
        };
        let cache = cache_key
            .filter(|_| len < ctx.coalesce_below())
            .map(|key| (&mut self.delivery.routes.frame_cache, key));
        queue_publish(ctx, conn, message, &options, len, cache)?;
        Ok(len)
    }
}

/// Queues a copy of a cached frame with `packet_id`; its length.
fn queue_cached(
    ctx: &mut Ctx,
    conn: ConnId,
    frame: CachedFrame<'_>,
    packet_id: Option<PacketId>,
    max_packet: usize,
) -> Result<usize, NotSent> {
    if frame.len() > max_packet {
        return Err(NotSent::TooLarge);
    }
    ctx.send_with(conn, |buf| frame.write(packet_id, buf))
        .map_err(|_| NotSent::Closed)?;
    Ok(frame.len())
}

/// Queues a PUBLISH frame of `len` bytes: copied whole into the connection's send buffer when
/// it is small (one iovec for many frames; remembered in `cache` when given), otherwise as its
/// header followed by the shared payload (never copied).
fn queue_publish(
    ctx: &mut Ctx,
    conn: ConnId,
    message: &Arc<Message>,
    options: &FrameOptions<'_>,
    len: usize,
    cache: Option<(&mut FrameCache, FrameKey)>,
) -> Result<(), NotSent> {
    let publish = &message.publish;
    let small = len < ctx.coalesce_below();
    let encoded = if small {
        ctx.send_with(conn, |buf| {
            publish.write_frame(options, buf)?;
            if let Some((cache, key)) = cache {
                cache.store(message, key, &buf[buf.len() - len..]);
            }
            Ok(())
        })
    } else {
        ctx.send_with(conn, |buf| publish.write_header(options, buf))
    };
    match encoded {
        Err(_) => Err(NotSent::Closed),
        Ok(Err::<(), codec::EncodeError>(_)) => Err(NotSent::TooLarge),
        Ok(Ok(())) if small => Ok(()),
        Ok(Ok(())) => ctx
            .send(conn, publish.payload().clone())
            .map_err(|_| NotSent::Closed),
    }
}

impl Wire<'_> {
    /// Encodes a control packet and queues it for `conn`.
    pub(super) fn send_packet(&mut self, ctx: &mut Ctx, conn: ConnId, packet: &Packet) {
        let Some(protocol) = self.conns.get(&conn).map(|c| c.protocol) else {
            return;
        };
        if let Err(error) = codec::encode(packet, protocol, self.scratch) {
            debug!(%error, ?conn, "cannot encode {} for this client", packet.packet_type());
            return;
        }
        let frame = self.scratch.split().freeze();
        let len = frame.len() as u64;
        self.figures
            .traces
            .packet(conn, crate::trace::Direction::Out, packet);
        if ctx.send(conn, frame).is_ok() {
            // The peer waits on control packets (acknowledgements, CONNACK, PINGRESP): never
            // paced.
            ctx.expedite(conn);
            ShardCounters::add(&self.figures.counters().bytes_sent, len);
        }
    }

    /// Sends a 5.0 DISCONNECT with `reason` (nothing on 3.x, which has no server DISCONNECT).
    pub(super) fn send_disconnect(&mut self, ctx: &mut Ctx, conn: ConnId, reason: ReasonCode) {
        let v5 = self.conns.get(&conn).is_some_and(|c| c.protocol.is_v5());
        if v5 {
            let packet = Packet::Disconnect(Disconnect {
                reason_code: reason,
                properties: DisconnectProperties::default(),
            });
            self.send_packet(ctx, conn, &packet);
        }
    }
}
