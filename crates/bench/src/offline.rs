//! The persistent-session runner: sessions subscribe (QoS 1/2, Clean Start = 0) and go offline,
//! messages are published to each session's topic, the sessions reconnect, and the run counts
//! exactly-once delivery and the time the backlog took to drain.

use anyhow::bail;
use codec::QoS;
use serde::Serialize;

use crate::cli::{Common, OfflineArgs};
use crate::phase::PhaseMode;
use crate::plan::{self, Builder, PublishPlan, Role, RunPlan};
use crate::summary::Summary;

/// The three steps of an offline run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Sessions connect persistently, subscribe and disconnect.
    Subscribe,
    /// Publishers send `messages` to each session's topic.
    Publish,
    /// Sessions reconnect and receive their backlog.
    Resume,
}

/// What an offline run measured.
#[derive(Debug, Clone, Serialize)]
pub struct OfflineSummary {
    pub label: String,
    pub sessions: usize,
    pub messages_per_session: u64,
    pub expected: u64,
    pub delivered: u64,
    pub duplicates: u64,
    pub out_of_order: u64,
    /// Reconnecting sessions whose CONNACK had Session Present set.
    pub sessions_present: u64,
    /// Every session got each of its messages once, in order (see [`exactly_once`]).
    pub exactly_once: bool,
    /// Seconds from the first reconnect until the last expected message arrived (or the run's
    /// duration ended).
    pub drain_s: f64,
    pub subscribe: Summary,
    pub publish: Summary,
    pub resume: Summary,
}

/// Each session receives from one publisher only, whose sequence numbers are `0..messages`;
/// with no late and no duplicate arrival every session's sequence strictly increases, so it holds
/// each number at most once, and a total equal to the expected count means exactly once each.
pub fn exactly_once(expected: u64, delivered: u64, duplicates: u64, out_of_order: u64) -> bool {
    delivered == expected && duplicates == 0 && out_of_order == 0
}

/// Runs the three steps against the broker(s) in `common`.
pub fn run(common: &Common, args: &OfflineArgs) -> anyhow::Result<OfflineSummary> {
    if plan::qos(args.qos)? == QoS::AtMostOnce {
        bail!("offline sessions need QoS 1 or 2");
    }
    let subscribe = crate::run::run(step_plan(common, args, Step::Subscribe)?)?;
    let publish = crate::run::run(step_plan(common, args, Step::Publish)?)?;
    let resume = crate::run::run(step_plan(common, args, Step::Resume)?)?;
    let expected = args.sessions as u64 * args.messages;
    let t = resume.totals;
    Ok(OfflineSummary {
        label: common.label.clone(),
        sessions: args.sessions,
        messages_per_session: args.messages,
        expected,
        delivered: t.received,
        duplicates: t.duplicates,
        out_of_order: t.out_of_order,
        sessions_present: t.sessions_present,
        exactly_once: exactly_once(expected, t.received, t.duplicates, t.out_of_order),
        drain_s: resume.duration_s,
        subscribe,
        publish,
        resume,
    })
}

impl OfflineSummary {
    /// The human-readable form.
    pub fn text(&self) -> String {
        format!(
            "offline: {} sessions x {} messages: published {}, delivered {} of {}, duplicates {}, \
             out of order {}, sessions present {}, exactly once: {}, drain {:.2} s",
            self.sessions,
            self.messages_per_session,
            self.publish.totals.sent,
            self.delivered,
            self.expected,
            self.duplicates,
            self.out_of_order,
            self.sessions_present,
            if self.exactly_once { "yes" } else { "NO" },
            self.drain_s,
        )
    }
}

fn step_plan(common: &Common, args: &OfflineArgs, step: Step) -> anyhow::Result<RunPlan> {
    let qos = plan::qos(args.qos)?;
    let mut common = common.clone();
    common.persistent = step != Step::Publish;
    common.hold = (step == Step::Subscribe).then_some(0);
    common.label = format!("{}-{}", common.label, step.name());
    let mut b = Builder::new(&common);
    for i in 0..args.sessions {
        let topic = plan::expand(&format!("{}/{i}", args.prefix), i, "")?;
        match step {
            Step::Subscribe => b.add("sess", i, |_| Ok(Role::Subscriber { filter: topic }))?,
            Step::Publish => b.add("pub", i, |_| {
                Ok(Role::Publisher {
                    topic,
                    index: i as u32,
                })
            })?,
            Step::Resume => b.add("sess", i, |_| Ok(Role::Resume))?,
        }
    }
    let publish = (step == Step::Publish).then_some(PublishPlan {
        qos,
        size: args.size,
        rate: 0.0,
        limit: args.messages,
        inflight: args.inflight.max(1),
        warmup_secs: 0,
        // Flood: no period to place sends in.
        phase: PhaseMode::Connack,
    });
    let clients = b.clients;
    let (fan, expect_total) = match step {
        Step::Subscribe | Step::Publish => (Some(0), 0),
        Step::Resume => (None, args.sessions as u64 * args.messages),
    };
    Ok(RunPlan {
        label: common.label.clone(),
        clients,
        publish,
        sub_qos: qos,
        fan,
        expect_total,
        protocol: plan::protocol(common.mqtt_version)?,
        username: plan::username(&common)?,
        common,
    })
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::Subscribe => "subscribe",
            Step::Publish => "publish",
            Step::Resume => "resume",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exactly_once_needs_every_message_and_no_repeat() {
        assert!(exactly_once(100, 100, 0, 0));
        assert!(!exactly_once(100, 99, 0, 0));
        assert!(!exactly_once(100, 100, 1, 0));
        assert!(!exactly_once(100, 100, 0, 1));
    }
}
