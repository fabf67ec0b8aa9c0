//! Reads of JetStream tried again after a failure (a NATS server restarting, JetStream
//! electing new leaders): the catch-up's and the follow-up's reads of the replay stream, and a
//! follow-up's reads of the delivery journals.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use tracing::debug;

/// How a read is tried again.
#[derive(Debug, Clone, Copy)]
pub(super) struct Retries {
    /// Tries in all, the first included.
    pub(super) tries: u32,
    /// The wait after a failed try.
    pub(super) apart: Duration,
    /// What failed, for the debug line of each failed try but the last.
    pub(super) what: &'static str,
}

/// `attempt` run until it succeeds or was tried `retries.tries` times; its last result.
pub(super) async fn retried<T, E, F>(
    retries: Retries,
    mut attempt: impl FnMut() -> F,
) -> Result<T, E>
where
    E: Display,
    F: Future<Output = Result<T, E>>,
{
    let mut tries = 1;
    loop {
        match attempt().await {
            Err(e) if tries < retries.tries => {
                debug!(error = %e, tries, "cluster: {} failed; trying again", retries.what);
                tries += 1;
                tokio::time::sleep(retries.apart).await;
            }
            result => return result,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWICE: Retries = Retries {
        tries: 2,
        apart: Duration::from_millis(1),
        what: "a test read",
    };

    #[tokio::test]
    async fn a_failed_try_is_made_again_up_to_the_bound() {
        let mut made = 0;
        let result: Result<u32, String> = retried(TWICE, || {
            made += 1;
            let outcome = if made == 2 {
                Ok(7)
            } else {
                Err(format!("try {made}"))
            };
            async move { outcome }
        })
        .await;
        assert_eq!((result, made), (Ok(7), 2));
        made = 0;
        let result: Result<u32, String> = retried(TWICE, || {
            made += 1;
            let outcome = Err(format!("try {made}"));
            async move { outcome }
        })
        .await;
        assert_eq!(
            result,
            Err("try 2".to_owned()),
            "the last failure given back"
        );
        assert_eq!(made, 2);
    }
}
