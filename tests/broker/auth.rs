//! The authentication and authorization hook: refusals reach the client with the right reason
//! code, in 5.0 and 3.1.1, and refused messages go nowhere.

use codec::{Connect, QoS, ReasonCode};
use ringmq::auth::Authenticator;

use crate::client::{QUIET, RawClient, V5, V311, connect_packet, qos_options, s, subscribe_packet};
use crate::harness::TestBroker;

/// Refuses user "intruder", client ids starting with "banned", filters under `secret/` and
/// publishes under `readonly/`.
struct Gatekeeper;

impl Authenticator for Gatekeeper {
    fn authenticate(&self, connect: &Connect) -> Result<(), ReasonCode> {
        if connect
            .username
            .as_ref()
            .is_some_and(|u| u.as_str() == "intruder")
        {
            return Err(ReasonCode::BadUserNameOrPassword);
        }
        if connect.client_id.as_str().starts_with("banned") {
            return Err(ReasonCode::NotAuthorized);
        }
        Ok(())
    }

    fn authorize_subscribe(&self, _client_id: &str, filter: &str) -> bool {
        !filter.starts_with("secret/")
    }

    fn authorize_publish(&self, _client_id: &str, topic: &str) -> bool {
        !topic.starts_with("readonly/")
    }
}

fn broker() -> TestBroker {
    TestBroker::with_auth("", Box::new(Gatekeeper))
}

#[test]
fn refused_connects_get_their_reason_code() {
    let broker = broker();
    for protocol in [V5, V311] {
        let mut bad_password = connect_packet(protocol, "someone", true);
        bad_password.username = Some(s("intruder"));
        bad_password.password = Some(bytes::Bytes::from_static(b"guess"));
        let (mut client, connack) = RawClient::connect(broker.addr(), bad_password);
        assert_eq!(
            connack.reason_code,
            ReasonCode::BadUserNameOrPassword,
            "{protocol:?}"
        );
        client.expect_closed();

        let banned = connect_packet(protocol, "banned-device", true);
        let (mut client, connack) = RawClient::connect(broker.addr(), banned);
        assert_eq!(
            connack.reason_code,
            ReasonCode::NotAuthorized,
            "{protocol:?}"
        );
        client.expect_closed();
    }
}

#[test]
fn refused_filters_get_0x87_in_5_0_and_0x80_in_3_1_1() {
    let broker = broker();
    for (protocol, refused) in [
        (V5, ReasonCode::NotAuthorized),
        (V311, ReasonCode::UnspecifiedError),
    ] {
        let mut client = RawClient::connected_clean(broker.addr(), protocol, "curious");
        let id = client.next_packet_id();
        let mut subscribe = subscribe_packet(id, "secret/plans", qos_options(QoS::AtLeastOnce));
        subscribe
            .filters
            .push((s("open/news"), qos_options(QoS::AtLeastOnce)));
        let ack = client.subscribe_with(subscribe);
        assert_eq!(
            ack.reason_codes,
            vec![refused, ReasonCode::GrantedQoS1],
            "{protocol:?}"
        );
        client.disconnect();
    }
}

#[test]
fn refused_publishes_are_acknowledged_with_0x87_and_never_delivered() {
    let broker = broker();
    let mut reader = RawClient::connected_clean(broker.addr(), V5, "reader");
    reader.subscribe("readonly/#", QoS::AtLeastOnce);
    reader.subscribe("open/#", QoS::AtLeastOnce);
    let mut writer = RawClient::connected_clean(broker.addr(), V5, "writer");
    let refused = writer.publish_simple("readonly/config", b"overwrite", QoS::AtLeastOnce);
    assert_eq!(refused, ReasonCode::NotAuthorized);
    let allowed = writer.publish_simple("open/chat", b"hello", QoS::AtLeastOnce);
    assert_eq!(allowed, ReasonCode::Success);
    // Only the allowed message arrives; the refused one never does.
    assert_eq!(reader.expect_publish_acked().topic(), "open/chat");
    reader.expect_silence(QUIET);
}
