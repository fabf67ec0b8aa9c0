//! CONNECT credentials: anonymous access and the password file (`[auth]`).

use codec::{Connect, ReasonCode};
use tracing::debug;

use super::BrokerShard;

impl BrokerShard {
    /// Whether `connect`'s username and password let it in; `certified`: the username came
    /// from a verified client certificate, which stands for the password.
    pub(super) fn check_credentials(
        &self,
        connect: &Connect,
        certified: bool,
    ) -> Result<(), ReasonCode> {
        let Some(username) = &connect.username else {
            if self.shared.config.auth.anonymous_allowed() {
                return Ok(());
            }
            debug!("CONNECT without a username refused: anonymous access is off");
            return Err(ReasonCode::NotAuthorized);
        };
        if certified {
            return Ok(());
        }
        let Some(passwords) = self.shared.passwords() else {
            return Ok(());
        };
        let password = connect.password.as_deref().unwrap_or_default();
        if passwords.verify(username.as_str(), password) {
            Ok(())
        } else {
            debug!(
                user = username.as_str(),
                "CONNECT refused: bad user name or password"
            );
            Err(ReasonCode::BadUserNameOrPassword)
        }
    }
}
