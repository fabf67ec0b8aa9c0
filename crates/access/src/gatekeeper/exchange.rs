//! AUTH exchange work for the auth workers: a SCRAM client-first whose user's credential is
//! kept by a backend (Redis), and a round of a method a backend drives (HTTP). The state
//! between rounds stays with the shard; a worker only asks and computes one step.

use crate::backend::{BackendError, ExchangeAnswer, ExchangeRound, Grant};
use crate::scram::{Mechanism, ScramError, ScramServer};

use super::chain::Chain;

/// What a worker is asked to do for an exchange.
#[derive(Debug)]
pub enum ExchangeWork {
    /// Start a SCRAM exchange from client-first, the credential fetched from the backends.
    ScramFirst {
        mechanism: Mechanism,
        client_first: Vec<u8>,
        client_id: String,
    },
    /// One round of a method that link `link` drives.
    Round { link: usize, round: ExchangeRound },
}

/// What came of it.
#[derive(Debug)]
pub enum ExchangeOutcome {
    /// The SCRAM exchange started (server-first to send), or was refused; with the grant the
    /// backend that keeps the user's credential hands them (its ACL), and that backend's link.
    ScramStarted {
        started: Result<(Box<ScramServer>, Vec<u8>), ScramError>,
        grant: Option<(Grant, usize)>,
    },
    /// The driving backend's answer.
    Answered(ExchangeAnswer),
    /// A backend could not answer (down, timed out, bad answer).
    Unavailable(String),
}

/// Does `work` (may block on a backend).
pub fn run(chain: &Chain, work: ExchangeWork) -> ExchangeOutcome {
    match work {
        ExchangeWork::ScramFirst {
            mechanism,
            client_first,
            client_id,
        } => match scram_first(chain, mechanism, &client_first, &client_id) {
            Ok(outcome) => outcome,
            Err(error) => {
                tracing::warn!(%error, "authentication backend failed a SCRAM credential lookup");
                ExchangeOutcome::Unavailable(error.to_string())
            }
        },
        ExchangeWork::Round { link, round } => match chain.exchange_round(link, &round) {
            Ok(answer) => ExchangeOutcome::Answered(answer),
            Err(error) => {
                tracing::warn!(%error, "authentication backend failed an AUTH round");
                ExchangeOutcome::Unavailable(error.to_string())
            }
        },
    }
}

fn scram_first(
    chain: &Chain,
    mechanism: Mechanism,
    client_first: &[u8],
    client_id: &str,
) -> Result<ExchangeOutcome, BackendError> {
    let mut failure = None;
    let mut keeper = None;
    let lookup = |user: &str| match chain.scram_credential(user, mechanism) {
        Ok(found) => found.map(|(link, credential)| {
            keeper = Some(link);
            credential
        }),
        Err(error) => {
            failure = Some(error);
            None
        }
    };
    let started = ScramServer::start(mechanism, client_first, lookup);
    if let Some(error) = failure {
        return Err(error);
    }
    let grant = match (&started, keeper) {
        (Ok((server, _)), Some(link)) => chain
            .grant_of(link, client_id, server.username())?
            .map(|grant| (grant, link)),
        _ => None,
    };
    let started = started.map(|(server, first)| (Box::new(server), first));
    Ok(ExchangeOutcome::ScramStarted { started, grant })
}
