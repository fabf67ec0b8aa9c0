//! `[[auto_subscribe]]`: the filters every session is subscribed to when its client connects
//! (`%c` the client id, `%u` the username). Each goes through what a SUBSCRIBE's filter goes
//! through (`subscribe.rs`: the ACL, the limits, rewrite rules, `$exclusive/`), no SUBACK is
//! sent, and the retained messages it is owed follow once every shard has applied it, like a
//! SUBSCRIBE's; the connection is parked until then, so what its client sends next finds the
//! subscriptions in place.

use std::sync::Arc;

use codec::MqttStr;
use ring_runtime::ConnId;
use tracing::debug;

use super::{BrokerShard, Ctx};

impl BrokerShard {
    /// Subscribes the session of `conn` (`client_id`, logged in as `username`) to every
    /// `[[auto_subscribe]]` entry; a refused one is logged at debug.
    pub(super) fn auto_subscribe(
        &mut self,
        ctx: &mut Ctx,
        conn: ConnId,
        client_id: &MqttStr,
        username: Option<&MqttStr>,
    ) {
        let shared = Arc::clone(&self.shared);
        let entries = &shared.config.routing.auto_subscribe;
        if entries.is_empty() {
            return;
        }
        let username = username.map(MqttStr::as_str);
        let (mut retained_for, mut last_change) = (Vec::new(), None);
        for entry in entries {
            let Some(text) = entry.filter_for(client_id.as_str(), username) else {
                continue;
            };
            let Ok(text) = MqttStr::try_from(text) else {
                continue;
            };
            let filter = (&text, entry.options, None);
            match self.subscribe_filter(ctx, conn, client_id, filter, &mut retained_for) {
                Ok((reason, change)) => {
                    if reason.is_error() {
                        debug!(
                            client = client_id.as_str(),
                            filter = text.as_str(),
                            ?reason,
                            "auto subscribe refused"
                        );
                    }
                    last_change = change.or(last_change);
                }
                Err(fault) => {
                    debug!(
                        client = client_id.as_str(),
                        filter = text.as_str(),
                        ?fault,
                        "auto subscribe refused"
                    );
                }
            }
        }
        if last_change.is_some() || !retained_for.is_empty() {
            let client_id = client_id.clone();
            self.subscriptions_changed(ctx, conn, client_id, last_change, (None, retained_for));
        }
    }
}
