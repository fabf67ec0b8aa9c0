//! The cluster's JetStream key-value buckets: names, layout, opening.

use std::time::Duration;

use async_nats::jetstream::{self, kv};

/// The first part of the cluster's bucket names: the subject prefix with characters other than
/// letters, digits, `-` and `_` written as `_` (`<base>_retained`, `<base>_sessions`, ...).
pub(super) fn bucket_base(prefix: &str) -> String {
    prefix
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                true => c,
                false => '_',
            },
        )
        .collect()
}

/// The stream behind a key-value bucket as NATS's key-value layout defines it (`KV_<bucket>`
/// on `$KV.<bucket>.>`, one record per key, file storage, `replicas` copies; `max_age`:
/// records expire after it), read through its leader only ([`LEADER_READS`]).
pub(super) fn kv_stream(
    bucket: &str,
    replicas: usize,
    max_age: Option<Duration>,
) -> jetstream::stream::Config {
    jetstream::stream::Config {
        name: format!("KV_{bucket}"),
        description: Some(format!("RingMQ cluster: {bucket}")),
        subjects: vec![format!("$KV.{bucket}.>")],
        max_messages_per_subject: 1,
        max_age: max_age.unwrap_or_default(),
        storage: jetstream::stream::StorageType::File,
        allow_rollup: true,
        deny_delete: true,
        allow_direct: !LEADER_READS,
        num_replicas: replicas,
        discard: jetstream::stream::DiscardPolicy::New,
        ..jetstream::stream::Config::default()
    }
}

/// Whether the buckets' records are read from the stream's leader (`$JS.API.STREAM.MSG.GET`)
/// rather than from any replica (direct get, NATS's default for key-value buckets). Why: a
/// replica that is behind answers a direct get with an old record. NATS documents that direct
/// gets do not read a client's own writes (ADR-56), and its 2.9 servers (Debian's) answer them
/// from a replica still catching up after a restart (nats-server issue 4162). A claim then read
/// an owner record older than the one its compare-and-set is checked against, failed, read it
/// back as old again, and dropped the session it had rebuilt: the 300-fault run of seed 5050
/// dropped two subscribers' recovered sessions about 25 times in two seconds after a NATS
/// server's restart, each rebuilt anew by the client's next try. Leader reads cost one JetStream
/// API request per read, which every server sees: claims, heartbeat sums and recoveries read a
/// few records a second, the retained messages come through a watch.
pub(super) const LEADER_READS: bool = true;

/// Opens `bucket`, creating its stream from `config` if missing. Not `create_key_value`: that
/// first reads the account's JetStream info in a form NATS 2.9 servers (Debian's) do not send.
/// Creating an existing bucket with the same settings (another node did it first) succeeds.
pub(super) async fn open_kv(
    js: &jetstream::Context,
    bucket: &str,
    config: jetstream::stream::Config,
) -> Result<kv::Store, async_nats::Error> {
    if let Ok(store) = js.get_key_value(bucket).await {
        let existing = &store.stream.cached_info().config;
        if existing.allow_direct == config.allow_direct {
            return Ok(store);
        }
        // A bucket an earlier version made: its reads go to the leader from now on.
        let mut updated = existing.clone();
        updated.allow_direct = config.allow_direct;
        js.update_stream(updated).await?;
        tracing::info!(
            bucket,
            "cluster: bucket now read through its stream's leader"
        );
        return Ok(js.get_key_value(bucket).await?);
    }
    js.get_or_create_stream(config).await?;
    Ok(js.get_key_value(bucket).await?)
}

/// Opens (creating if missing) the stream `config` describes, trying again every `retry` until
/// JetStream answers; the first failure is logged as a warning naming `unavailable` (what is
/// not done meanwhile), the others at debug level.
pub(super) async fn open_stream_retrying(
    js: &jetstream::Context,
    config: jetstream::stream::Config,
    (unavailable, retry): (&str, Duration),
) -> jetstream::stream::Stream {
    let mut warned = false;
    loop {
        match js.get_or_create_stream(config.clone()).await {
            Ok(stream) => return stream,
            Err(e) if !warned => {
                warned = true;
                tracing::warn!(stream = %config.name, error = %e, "cluster: {unavailable}");
            }
            Err(e) => {
                tracing::debug!(stream = %config.name, error = %e, "cluster: stream still not available")
            }
        }
        tokio::time::sleep(retry).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_names_follow_the_prefix() {
        assert_eq!(bucket_base("ringmq"), "ringmq");
        assert_eq!(bucket_base("site.a"), "site_a");
    }
}
