//! The load generator's protocol handler: one per runtime thread, owning its share of the
//! clients. Connect pacing, publishing and progress reports run on a periodic tick.

use std::collections::HashMap;
use std::fmt::Display;
use std::io;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use codec::{Connect, Limits, Packet, PingReq, Publish, QoS, Subscribe, SubscriptionOptions};
use hdrhistogram::Histogram;
use ring_runtime::{CloseReason, ConnId, Handler, LayerError, ShardCtx, ShardId};

use crate::client::{Client, Phase};
use crate::payload::{self, Stamp};
use crate::phase::{self, PhaseMode};
use crate::plan::{ClientPlan, Role, RunPlan};
use crate::stats::{Counters, Seen, Stats, latency_histogram};

mod link;

use link::Link;
pub use link::Route;

/// How often a thread paces connects and publishes.
const TICK: Duration = Duration::from_millis(2);
/// How often a thread reports its latency histogram.
const REPORT_EVERY: Duration = Duration::from_secs(1);
/// Most bytes a flood publisher keeps queued on its socket.
const FLOOD_QUEUE_BYTES: usize = 64 * 1024;
/// Most messages a rate-limited publisher sends per turn when it is behind (fairness between
/// publishers); a flood publisher is bounded by [`FLOOD_QUEUE_BYTES`] instead.
const BURST: u64 = 64;

/// What the main thread sends to a load thread.
#[derive(Debug)]
pub enum Control {
    /// Begin connecting.
    Start,
    /// Publish no more (the run is draining).
    StopPublishing,
}

/// A latency histogram from one thread for one interval; the last report of a thread also
/// carries how many messages each of its subscribers received.
#[derive(Debug)]
pub struct Report {
    pub histogram: Histogram<u64>,
    pub subscriber_received: Vec<u64>,
}

/// One load thread.
pub struct BenchShard {
    index: usize,
    plan: Arc<RunPlan>,
    stats: Arc<Stats>,
    reports: Sender<Report>,
    clients: Vec<Client>,
    by_conn: HashMap<ConnId, usize>,
    pace: ConnectPace,
    clock: RunClock,
    histogram: Histogram<u64>,
    scratch: BytesMut,
    stopped: bool,
    link: Link,
}

/// Which client connects next, and how many connect per second on this thread.
struct ConnectPace {
    next_to_connect: usize,
    connects_per_sec: f64,
}

/// When this thread started connecting, and when it last reported.
#[derive(Default)]
struct RunClock {
    started: Option<Instant>,
    last_report: Option<Instant>,
}

impl BenchShard {
    /// Thread `id` of `threads`, taking every `threads`-th client of the plan.
    pub fn new(
        id: ShardId,
        threads: usize,
        plan: Arc<RunPlan>,
        stats: Arc<Stats>,
        reports: Sender<Report>,
        route: Route,
    ) -> Self {
        let now = Instant::now();
        let clients: Vec<Client> = plan
            .clients
            .iter()
            .skip(id.index())
            .step_by(threads.max(1))
            .map(|c: &ClientPlan| Client::new(c.clone(), now))
            .collect();
        let connects_per_sec = plan.common.connect_rate as f64 / threads.max(1) as f64;
        Self {
            index: id.index(),
            plan,
            stats,
            reports,
            clients,
            by_conn: HashMap::new(),
            pace: ConnectPace {
                next_to_connect: 0,
                connects_per_sec,
            },
            clock: RunClock::default(),
            histogram: latency_histogram(),
            scratch: BytesMut::new(),
            stopped: false,
            link: Link::new(route),
        }
    }

    fn counters(&self) -> &Counters {
        self.stats.thread(self.index)
    }

    /// Opens the connections that are due under the connect rate.
    fn connect_due(&mut self, ctx: &mut ShardCtx<Control>) {
        let Some(started) = self.clock.started else {
            return;
        };
        let due = if self.pace.connects_per_sec <= 0.0 {
            self.clients.len()
        } else {
            let elapsed = ctx.now().duration_since(started).as_secs_f64();
            ((elapsed * self.pace.connects_per_sec) as usize + 1).min(self.clients.len())
        };
        while self.pace.next_to_connect < due {
            let i = self.pace.next_to_connect;
            self.pace.next_to_connect += 1;
            let (host, bind) = (self.clients[i].plan.host, self.clients[i].plan.bind);
            match self.link.connect(ctx, host, bind) {
                Ok(conn) => {
                    self.clients[i].conn = Some(conn);
                    self.clients[i].phase = Phase::Connecting;
                    self.by_conn.insert(conn, i);
                }
                Err(_) => {
                    self.clients[i].phase = Phase::Closed;
                    Counters::bump(&self.counters().connect_failures, 1);
                }
            }
        }
    }

    fn send(&mut self, ctx: &mut ShardCtx<Control>, i: usize, packet: &Packet) {
        let Some(conn) = self.clients[i].conn else {
            return;
        };
        if codec::encode(packet, self.plan.protocol, &mut self.scratch).is_ok() {
            let frame = self.scratch.split().freeze();
            if ctx.send(conn, frame).is_ok() {
                self.clients[i].last_send = ctx.now();
            }
        }
    }

    /// Sets the connection's TLS / WebSocket layer, if the run has one; `false` when it could
    /// not be built (the client failed).
    fn start_transport(&mut self, ctx: &mut ShardCtx<Control>, conn: ConnId, i: usize) -> bool {
        match self.link.set_layer(ctx, conn, self.clients[i].plan.host) {
            Ok(()) => true,
            Err(error) => {
                self.transport_failed(ctx, i, &error);
                false
            }
        }
    }

    /// A transport error: before the CONNACK it counts as a failed connect, after it as a
    /// disconnect (when the connection closes). The first one of a thread is printed.
    fn transport_failed(&mut self, ctx: &mut ShardCtx<Control>, i: usize, error: &dyn Display) {
        self.link.show_error(&self.clients[i].plan.client_id, error);
        if matches!(
            self.clients[i].phase,
            Phase::Connecting | Phase::AwaitConnAck
        ) {
            self.clients[i].phase = Phase::Closed;
            Counters::bump(&self.counters().connect_failures, 1);
        }
        if let Some(conn) = self.clients[i].conn {
            ctx.close(conn);
        }
    }

    /// A connect failed (over QUIC, the first failure of a thread is printed: it is the
    /// handshake's).
    fn connect_failed(&mut self, i: usize, error: &io::Error) {
        if self.link.connects_carry_handshakes() {
            self.link.show_error(&self.clients[i].plan.client_id, error);
        }
        self.clients[i].phase = Phase::Closed;
        Counters::bump(&self.counters().connect_failures, 1);
    }

    fn send_connect(&mut self, ctx: &mut ShardCtx<Control>, i: usize) {
        let common = &self.plan.common;
        let mut connect = Connect {
            protocol: self.plan.protocol,
            clean_start: !common.persistent,
            keep_alive: common.keep_alive,
            client_id: self.clients[i].plan.client_id.clone(),
            will: None,
            username: self.plan.username.clone(),
            password: common
                .password
                .as_ref()
                .map(|p| bytes::Bytes::copy_from_slice(p.as_bytes())),
            properties: Default::default(),
        };
        if common.persistent && self.plan.protocol.is_v5() {
            connect.properties.session_expiry_interval = Some(u32::MAX);
        }
        self.clients[i].phase = Phase::AwaitConnAck;
        self.send(ctx, i, &Packet::from(connect));
    }

    fn on_connack(&mut self, ctx: &mut ShardCtx<Control>, i: usize, ack: &codec::ConnAck) {
        if ack.reason_code.is_error() {
            Counters::bump(&self.counters().connect_failures, 1);
            self.clients[i].phase = Phase::Closed;
            if let Some(conn) = self.clients[i].conn {
                ctx.close(conn);
            }
            return;
        }
        Counters::bump(&self.counters().connected, 1);
        if ack.session_present {
            Counters::bump(&self.counters().sessions_present, 1);
        }
        match self.clients[i].plan.role.clone() {
            Role::Subscriber { filter } | Role::Probe { topic: filter } => {
                self.subscribe(ctx, i, filter)
            }
            Role::Publisher { .. } => {
                self.start_publishing_later(ctx, i);
                self.mark_ready(i);
            }
            Role::Idle | Role::Resume => self.mark_ready(i),
        }
    }

    fn subscribe(&mut self, ctx: &mut ShardCtx<Control>, i: usize, filter: codec::MqttStr) {
        let options = SubscriptionOptions {
            qos: self.plan.sub_qos,
            ..Default::default()
        };
        let subscribe = Subscribe {
            packet_id: self.clients[i].packet_id(),
            filters: vec![(filter, options)],
            properties: Default::default(),
        };
        self.clients[i].phase = Phase::AwaitSubAck;
        self.send(ctx, i, &Packet::Subscribe(subscribe));
    }

    fn on_suback(&mut self, ctx: &mut ShardCtx<Control>, i: usize) {
        if self.clients[i].phase != Phase::AwaitSubAck {
            return;
        }
        if matches!(self.clients[i].plan.role, Role::Probe { .. }) {
            self.start_publishing_later(ctx, i);
        }
        self.mark_ready(i);
    }

    /// Publishing starts after the warm-up, at the publisher's place in the period under
    /// `--phase spread` (`phase.rs`).
    fn start_publishing_later(&mut self, ctx: &mut ShardCtx<Control>, i: usize) {
        let Some(plan) = self.plan.publish else {
            return;
        };
        let earliest = ctx.now() + Duration::from_secs(plan.warmup_secs);
        let from = match (&self.clients[i].plan.role, self.clock.started) {
            (Role::Publisher { index, .. }, Some(origin))
                if plan.phase == PhaseMode::Spread && plan.rate > 0.0 =>
            {
                phase::first_send(origin, earliest, plan.rate, *index)
            }
            _ => earliest,
        };
        self.clients[i].publish_from = Some(from);
    }

    fn mark_ready(&mut self, i: usize) {
        self.clients[i].phase = Phase::Ready;
        Counters::bump(&self.counters().ready, 1);
    }

    /// Publishes what is due for client `i` (rate mode) or what fits (flood mode).
    fn publish_due(&mut self, ctx: &mut ShardCtx<Control>, i: usize) {
        let Some(plan) = self.plan.publish else {
            return;
        };
        let client = &self.clients[i];
        let (Role::Publisher { .. } | Role::Probe { .. }, Phase::Ready, Some(from), Some(conn)) = (
            &client.plan.role,
            client.phase,
            client.publish_from,
            client.conn,
        ) else {
            return;
        };
        let now = ctx.now();
        if now < from || client.done || self.stopped {
            return;
        }
        if !self.stats.all_ready() {
            // A client of the run is still connecting (a subscriber whose handshake lost
            // packets, say): publishing starts a warm-up after every client is ready, so
            // nothing is published before the subscription it is meant for exists.
            return self.start_publishing_later(ctx, i);
        }
        // Flood: as much as the socket queue bound takes; rate: what is due, at most BURST.
        let mut budget = if plan.rate <= 0.0 {
            u64::MAX
        } else {
            let due = (now.duration_since(from).as_secs_f64() * plan.rate) as u64 + 1;
            due.saturating_sub(client.sent).min(BURST)
        };
        while budget > 0 {
            let client = &self.clients[i];
            let window_full = plan.qos != QoS::AtMostOnce && client.inflight >= plan.inflight;
            let limit_reached = plan.limit > 0 && client.sent >= plan.limit;
            if window_full || limit_reached || ctx.queued_bytes(conn) > FLOOD_QUEUE_BYTES {
                break;
            }
            self.publish_one(ctx, i, plan.qos, plan.size);
            budget -= 1;
        }
        let client = &self.clients[i];
        let finished = plan.limit > 0 && client.sent >= plan.limit && client.inflight == 0;
        if finished && !client.done {
            self.clients[i].done = true;
            Counters::bump(&self.counters().publishers_done, 1);
        }
    }

    fn publish_one(&mut self, ctx: &mut ShardCtx<Control>, i: usize, qos: QoS, size: usize) {
        let (topic, index) = match &self.clients[i].plan.role {
            Role::Publisher { topic, index } => (topic.clone(), *index),
            Role::Probe { topic } => (topic.clone(), 0),
            Role::Idle | Role::Subscriber { .. } | Role::Resume => return,
        };
        let seq = self.clients[i].sent as u32;
        let stamp = Stamp {
            sent_ns: payload::now_ns(),
            publisher: index,
            seq,
        };
        let payload = payload::build(stamp, size, &mut self.scratch);
        let packet_id = (qos != QoS::AtMostOnce).then(|| self.clients[i].packet_id());
        let publish = Publish {
            dup: false,
            qos,
            retain: false,
            content: codec::TopicPayload::new(topic, payload),
            packet_id,
            properties: Default::default(),
        };
        self.send(ctx, i, &Packet::Publish(publish));
        self.clients[i].sent += 1;
        if qos != QoS::AtMostOnce {
            self.clients[i].inflight += 1;
        }
        Counters::bump(&self.counters().sent, 1);
    }

    /// A message arrived at subscriber `i`.
    fn on_publish(&mut self, ctx: &mut ShardCtx<Control>, i: usize, publish: Publish) {
        match (publish.qos, publish.packet_id) {
            (QoS::AtLeastOnce, Some(id)) => {
                self.send(ctx, i, &Packet::PubAck(codec::PubAck::new(id)))
            }
            (QoS::ExactlyOnce, Some(id)) => {
                let fresh = self.clients[i].inbound.awaiting_rel.insert(id.get());
                self.send(ctx, i, &Packet::PubRec(codec::PubRec::new(id)));
                if !fresh {
                    return;
                }
            }
            _ => {}
        }
        Counters::bump(&self.counters().received, 1);
        self.clients[i].received += 1;
        let Some(stamp) = payload::parse(publish.payload()) else {
            return;
        };
        let latency_us = payload::now_ns().saturating_sub(stamp.sent_ns) / 1000;
        let _ = self.histogram.record(latency_us.max(1));
        let seen = self.clients[i]
            .inbound
            .order
            .entry(stamp.publisher)
            .or_default()
            .observe(stamp.seq);
        match seen {
            Seen::InOrder => {}
            Seen::Late => Counters::bump(&self.counters().out_of_order, 1),
            Seen::Duplicate => Counters::bump(&self.counters().duplicates, 1),
        }
    }

    fn on_completed(&mut self, i: usize) {
        let client = &mut self.clients[i];
        client.inflight = client.inflight.saturating_sub(1);
        Counters::bump(&self.counters().acked, 1);
    }

    fn handle(&mut self, ctx: &mut ShardCtx<Control>, i: usize, packet: Packet) {
        match packet {
            Packet::ConnAck(ack) => self.on_connack(ctx, i, &ack),
            Packet::SubAck(_) => self.on_suback(ctx, i),
            Packet::Publish(publish) => self.on_publish(ctx, i, publish),
            Packet::PubAck(_) | Packet::PubComp(_) => self.on_completed(i),
            Packet::PubRec(rec) => {
                self.send(ctx, i, &Packet::PubRel(codec::PubRel::new(rec.packet_id)))
            }
            Packet::PubRel(rel) => {
                self.clients[i]
                    .inbound
                    .awaiting_rel
                    .remove(&rel.packet_id.get());
                self.send(ctx, i, &Packet::PubComp(codec::PubComp::new(rel.packet_id)));
            }
            _ => {}
        }
    }

    /// Sends PINGREQ for clients idle for half their keep-alive.
    fn keep_alive(&mut self, ctx: &mut ShardCtx<Control>) {
        let half = Duration::from_secs(u64::from(self.plan.common.keep_alive)) / 2;
        if half.is_zero() {
            return;
        }
        let now = ctx.now();
        for i in 0..self.clients.len() {
            if self.clients[i].phase == Phase::Ready
                && now.duration_since(self.clients[i].last_send) >= half
            {
                self.send(ctx, i, &Packet::PingReq(PingReq));
            }
        }
    }

    fn report(&mut self, subscriber_received: Vec<u64>) {
        let histogram = std::mem::replace(&mut self.histogram, latency_histogram());
        let _ = self.reports.send(Report {
            histogram,
            subscriber_received,
        });
    }

    fn tick(&mut self, ctx: &mut ShardCtx<Control>) {
        self.connect_due(ctx);
        for i in 0..self.clients.len() {
            self.publish_due(ctx, i);
        }
        let now = ctx.now();
        if self
            .clock
            .last_report
            .is_none_or(|t| now.duration_since(t) >= REPORT_EVERY)
        {
            self.clock.last_report = Some(now);
            self.keep_alive(ctx);
            self.report(Vec::new());
        }
        ctx.arm_timer(TICK, 0);
    }
}

impl Handler for BenchShard {
    type Message = Control;

    fn on_accept(
        &mut self,
        ctx: &mut ShardCtx<Control>,
        conn: ConnId,
        _peer: std::net::SocketAddr,
    ) {
        ctx.abort(conn);
    }

    fn on_connected(&mut self, ctx: &mut ShardCtx<Control>, conn: ConnId, result: io::Result<()>) {
        let Some(&i) = self.by_conn.get(&conn) else {
            return;
        };
        match result {
            Ok(()) => {
                if self.start_transport(ctx, conn, i) {
                    self.send_connect(ctx, i);
                }
            }
            Err(error) => {
                self.by_conn.remove(&conn);
                self.connect_failed(i, &error);
            }
        }
    }

    fn on_layer_error(&mut self, ctx: &mut ShardCtx<Control>, conn: ConnId, error: LayerError) {
        if let Some(&i) = self.by_conn.get(&conn) {
            self.transport_failed(ctx, i, &error);
        }
    }

    fn on_data(&mut self, ctx: &mut ShardCtx<Control>, conn: ConnId, data: Bytes) {
        let Some(&i) = self.by_conn.get(&conn) else {
            return;
        };
        let mut buf = std::mem::take(&mut self.clients[i].carry);
        buf.extend_from_slice(&data);
        let limits = Limits::new(self.plan.protocol);
        loop {
            match codec::decode(&mut buf, &limits) {
                Ok(Some(packet)) => self.handle(ctx, i, packet),
                Ok(None) => break,
                Err(_) => {
                    ctx.close(conn);
                    break;
                }
            }
        }
        self.clients[i].carry = buf;
        self.publish_due(ctx, i);
    }

    fn on_closed(&mut self, _ctx: &mut ShardCtx<Control>, conn: ConnId, _reason: CloseReason) {
        if let Some(i) = self.by_conn.remove(&conn) {
            if self.clients[i].phase != Phase::Closed {
                Counters::bump(&self.counters().disconnects, 1);
            }
            self.clients[i].phase = Phase::Closed;
            self.clients[i].conn = None;
        }
    }

    fn on_timer(&mut self, ctx: &mut ShardCtx<Control>, _timer: ring_runtime::TimerId, _key: u64) {
        self.tick(ctx);
    }

    fn on_messages(&mut self, ctx: &mut ShardCtx<Control>, messages: Vec<Control>) {
        for message in messages {
            match message {
                Control::Start if self.clock.started.is_none() => {
                    self.clock.started = Some(ctx.now());
                    self.tick(ctx);
                }
                Control::Start => {}
                Control::StopPublishing => self.stopped = true,
            }
        }
    }

    fn on_shutdown(&mut self, ctx: &mut ShardCtx<Control>) {
        for i in 0..self.clients.len() {
            if self.clients[i].phase == Phase::Ready {
                self.clients[i].phase = Phase::Closed;
                self.send(
                    ctx,
                    i,
                    &Packet::Disconnect(codec::Disconnect {
                        reason_code: codec::ReasonCode::Success,
                        properties: Default::default(),
                    }),
                );
            }
        }
        let counts = self
            .clients
            .iter()
            .filter(|c| matches!(c.plan.role, Role::Subscriber { .. }))
            .map(|c| c.received)
            .collect();
        self.report(counts);
    }
}
