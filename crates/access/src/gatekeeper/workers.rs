//! The auth worker threads: they walk the backend chain for logins and topic checks that a
//! shard could not answer from its cache, and hand each verdict back to the shard that asked
//! (its inbox, then a wake-up). Jobs wait in a bounded queue: a full queue is answered at once
//! with "busy", never by blocking a reactor.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Instant, SystemTime};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use crossbeam_queue::SegQueue;
use ring_runtime::{ConnId, RuntimeControl, ShardId};

use super::cache::TtlCache;
use super::chain::{Chain, FilterAnswer, LoginVerdict, Recheck};
use super::exchange::{ExchangeOutcome, ExchangeWork};
use super::keys::{AclKey, LoginKey};
use crate::PasswordFile;
use crate::backend::{AclRequest, LoginRequest};

/// A question for the workers.
pub enum Job {
    /// Judge a CONNECT from chain link `start` on.
    Login {
        shard: ShardId,
        conn: ConnId,
        token: u64,
        request: LoginRequest,
        start: usize,
        passwords: Option<Arc<PasswordFile>>,
    },
    /// Ask link `link` about each topic access.
    Topics {
        shard: ShardId,
        conn: ConnId,
        token: u64,
        link: usize,
        requests: Vec<AclRequest>,
    },
    /// Work for an AUTH exchange (MQTT 5 enhanced authentication).
    Exchange {
        shard: ShardId,
        conn: ConnId,
        token: u64,
        work: ExchangeWork,
    },
    /// After a reload, ask link `link` again about a connected client's grant: its whole
    /// grant where the backend hands it over, else each subscribe check in `requests` (one
    /// per subscription filter).
    Recheck {
        shard: ShardId,
        conn: ConnId,
        token: u64,
        link: usize,
        client_id: String,
        username: Option<String>,
        requests: Vec<AclRequest>,
    },
}

/// An answer for a shard.
#[derive(Debug)]
pub enum Verdict {
    Login {
        conn: ConnId,
        token: u64,
        outcome: LoginVerdict,
    },
    /// One answer per request, in order (a backend failure reads as "not allowed").
    Topics {
        conn: ConnId,
        token: u64,
        answers: Vec<bool>,
    },
    /// The answer to a [`Job::Exchange`].
    Exchange {
        conn: ConnId,
        token: u64,
        outcome: ExchangeOutcome,
    },
    /// The answer to a [`Job::Recheck`].
    Rechecked {
        conn: ConnId,
        token: u64,
        outcome: Recheck,
    },
}

/// What the workers share with the shards.
pub struct Core {
    pub chain: Chain,
    pub logins: TtlCache<LoginKey, LoginVerdict>,
    pub topics: TtlCache<AclKey, bool>,
    /// Verdicts per shard.
    inboxes: Box<[SegQueue<Verdict>]>,
    control: OnceLock<RuntimeControl>,
    /// Jobs queued or running, against `max_pending`.
    pending: AtomicUsize,
    max_pending: usize,
    /// Backend failures so far (for `$SYS` and logs).
    pub failures: AtomicUsize,
}

/// The worker pool: dropping it ends the threads once their current job is done.
pub struct Workers {
    jobs: Sender<Job>,
    threads: Vec<JoinHandle<()>>,
    pub core: Arc<Core>,
}

/// Why a job was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

impl Core {
    pub fn new(
        chain: Chain,
        logins: TtlCache<LoginKey, LoginVerdict>,
        topics: TtlCache<AclKey, bool>,
        shards: usize,
        max_pending: usize,
    ) -> Self {
        Self {
            chain,
            logins,
            topics,
            inboxes: (0..shards).map(|_| SegQueue::new()).collect(),
            control: OnceLock::new(),
            pending: AtomicUsize::new(0),
            max_pending,
            failures: AtomicUsize::new(0),
        }
    }

    /// Takes the verdicts waiting for `shard`.
    pub fn take_verdicts(&self, shard: ShardId) -> Vec<Verdict> {
        let Some(inbox) = self.inboxes.get(shard.index()) else {
            return Vec::new();
        };
        let mut verdicts = Vec::new();
        while let Some(verdict) = inbox.pop() {
            verdicts.push(verdict);
        }
        verdicts
    }

    fn deliver(&self, shard: ShardId, verdict: Verdict) {
        self.pending.fetch_sub(1, Ordering::AcqRel);
        if let Some(inbox) = self.inboxes.get(shard.index()) {
            inbox.push(verdict);
        }
        if let Some(control) = self.control.get() {
            control.wake(shard);
        }
    }
}

impl Workers {
    /// Starts `threads` workers over `core`.
    pub fn start(core: Core, threads: usize) -> std::io::Result<Self> {
        let core = Arc::new(core);
        let (jobs, queue) = crossbeam_channel::bounded(core.max_pending.max(1));
        let threads = (0..threads.max(1))
            .map(|index| {
                let core = Arc::clone(&core);
                let queue: Receiver<Job> = queue.clone();
                std::thread::Builder::new()
                    .name(format!("ringmq-auth-{index}"))
                    .spawn(move || work(&core, &queue))
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(Self {
            jobs,
            threads,
            core,
        })
    }

    /// Lets the workers wake shards once the runtime runs.
    pub fn set_control(&self, control: RuntimeControl) {
        let _ = self.core.control.set(control);
    }

    /// Queues `job`, or says the workers are busy (`auth.max_pending` jobs wait already).
    pub fn submit(&self, job: Job) -> Result<(), Busy> {
        let core = &self.core;
        if core.pending.fetch_add(1, Ordering::AcqRel) >= core.max_pending {
            core.pending.fetch_sub(1, Ordering::AcqRel);
            return Err(Busy);
        }
        match self.jobs.try_send(job) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                core.pending.fetch_sub(1, Ordering::AcqRel);
                Err(Busy)
            }
        }
    }

    /// Jobs queued or running now.
    pub fn pending(&self) -> usize {
        self.core.pending.load(Ordering::Acquire)
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        // Closing the queue ends each worker after its current job.
        let (closed, _) = crossbeam_channel::bounded(1);
        drop(std::mem::replace(&mut self.jobs, closed));
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn work(core: &Core, queue: &Receiver<Job>) {
    while let Ok(job) = queue.recv() {
        match job {
            Job::Login {
                shard,
                conn,
                token,
                request,
                start,
                passwords,
            } => {
                let outcome = judge_login(core, &request, start, passwords.as_deref());
                core.deliver(
                    shard,
                    Verdict::Login {
                        conn,
                        token,
                        outcome,
                    },
                );
            }
            Job::Topics {
                shard,
                conn,
                token,
                link,
                requests,
            } => {
                let answers = requests
                    .iter()
                    .map(|request| judge_topic(core, link, request))
                    .collect();
                core.deliver(
                    shard,
                    Verdict::Topics {
                        conn,
                        token,
                        answers,
                    },
                );
            }
            Job::Exchange {
                shard,
                conn,
                token,
                work,
            } => {
                let outcome = super::exchange::run(&core.chain, work);
                if let ExchangeOutcome::Unavailable(_) = outcome {
                    core.failures.fetch_add(1, Ordering::Relaxed);
                }
                let verdict = Verdict::Exchange {
                    conn,
                    token,
                    outcome,
                };
                core.deliver(shard, verdict);
            }
            Job::Recheck {
                shard,
                conn,
                token,
                link,
                client_id,
                username,
                requests,
            } => {
                let client = (client_id.as_str(), username.as_deref());
                let outcome = recheck(core, link, client, &requests);
                core.deliver(
                    shard,
                    Verdict::Rechecked {
                        conn,
                        token,
                        outcome,
                    },
                );
            }
        }
    }
}

fn judge_login(
    core: &Core,
    request: &LoginRequest,
    start: usize,
    passwords: Option<&PasswordFile>,
) -> LoginVerdict {
    let outcome = core.chain.login_from(start, request, passwords);
    if let LoginVerdict::Unavailable(_) = &outcome {
        core.failures.fetch_add(1, Ordering::Relaxed);
        return outcome;
    }
    let until = match &outcome {
        LoginVerdict::Allowed { grant, .. } => grant.expires_at.map(instant_of),
        _ => None,
    };
    let now = Instant::now();
    core.logins
        .insert(LoginKey::of(request, start), outcome.clone(), now, until);
    outcome
}

fn judge_topic(core: &Core, link: usize, request: &AclRequest) -> bool {
    match core.chain.check_topic(link, request) {
        Ok(allowed) => {
            core.topics
                .insert(AclKey::of(request), allowed, Instant::now(), None);
            allowed
        }
        Err(error) => {
            core.failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%error, topic = request.topic, "topic check failed: refused");
            false
        }
    }
}

/// Asks link `link` about a connected client again; definite answers about filters are cached
/// as a SUBSCRIBE's would be, a failure is counted.
fn recheck(
    core: &Core,
    link: usize,
    client: (&str, Option<&str>),
    requests: &[AclRequest],
) -> Recheck {
    let outcome = core.chain.recheck(link, client, requests);
    match &outcome {
        Recheck::Failed(_) => {
            core.failures.fetch_add(1, Ordering::Relaxed);
        }
        Recheck::Filters(answers) => {
            let now = Instant::now();
            for (request, answer) in requests.iter().zip(answers) {
                let allowed = match answer {
                    FilterAnswer::Allowed => true,
                    FilterAnswer::Refused => false,
                    FilterAnswer::Unknown => continue,
                };
                core.topics.insert(AclKey::of(request), allowed, now, None);
            }
        }
        Recheck::Grant(_) => {}
    }
    outcome
}

/// `at` as an instant of this process's monotonic clock (now, if it has passed).
fn instant_of(at: SystemTime) -> Instant {
    let left = at.duration_since(SystemTime::now()).unwrap_or_default();
    Instant::now() + left
}

/// A peer for requests made without one (never sent: every connection has a peer).
pub const NO_PEER: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);
