//! proptest strategies for every 5.0 property struct.

use std::num::NonZeroU32;

use codec::{
    AckProperties, AppProperties, AuthProperties, ConnAckProperties, ConnectProperties,
    DisconnectProperties, PayloadFormat, PublishProperties, QoS, SubscribeProperties,
    SubscriptionId, UnsubscribeProperties, UserProperty, WillProperties,
};
use proptest::collection::vec;
use proptest::option::of;
use proptest::prelude::*;

use super::{binary, nonzero_u16, text, topic};

fn users() -> impl Strategy<Value = Vec<UserProperty>> {
    vec((text(), text()), 0..3)
}

fn format() -> impl Strategy<Value = PayloadFormat> {
    prop_oneof![Just(PayloadFormat::Unspecified), Just(PayloadFormat::Utf8)]
}

fn subscription_id() -> impl Strategy<Value = SubscriptionId> {
    (1..=SubscriptionId::MAX).prop_map(|v| SubscriptionId::new(v).expect("in range"))
}

fn nonzero_u32() -> impl Strategy<Value = NonZeroU32> {
    (1..=u32::MAX).prop_map(|v| NonZeroU32::new(v).expect("non-zero"))
}

/// Authentication method and data: data only with a method.
fn auth() -> impl Strategy<Value = (Option<codec::MqttStr>, Option<bytes::Bytes>)> {
    (of(text()), of(binary())).prop_map(|(method, data)| {
        let data = if method.is_some() { data } else { None };
        (method, data)
    })
}

pub fn connect_properties() -> impl Strategy<Value = ConnectProperties> {
    let limits = (
        of(any::<u32>()),
        of(nonzero_u16()),
        of(nonzero_u32()),
        of(any::<u16>()),
    );
    let flags = (of(any::<bool>()), of(any::<bool>()));
    (limits, flags, users(), auth()).prop_map(|(limits, flags, user_properties, auth)| {
        ConnectProperties {
            session_expiry_interval: limits.0,
            receive_maximum: limits.1,
            maximum_packet_size: limits.2,
            topic_alias_maximum: limits.3,
            request_response_information: flags.0,
            request_problem_information: flags.1,
            user_properties,
            authentication_method: auth.0,
            authentication_data: auth.1,
        }
    })
}

pub fn will_properties() -> impl Strategy<Value = WillProperties> {
    let times = (of(any::<u32>()), of(any::<u32>()));
    let content = (of(format()), of(text()), of(topic()), of(binary()));
    (times, content, users()).prop_map(|(times, content, user_properties)| WillProperties {
        will_delay_interval: times.0,
        payload_format: content.0,
        message_expiry_interval: times.1,
        content_type: content.1,
        response_topic: content.2,
        correlation_data: content.3,
        user_properties,
    })
}

pub fn connack_properties() -> impl Strategy<Value = ConnAckProperties> {
    let limits = (
        of(any::<u32>()),
        of(nonzero_u16()),
        of(prop_oneof![Just(QoS::AtMostOnce), Just(QoS::AtLeastOnce)]),
        of(nonzero_u32()),
        of(any::<u16>()),
        of(any::<u16>()),
    );
    let flags = (
        of(any::<bool>()),
        of(any::<bool>()),
        of(any::<bool>()),
        of(any::<bool>()),
    );
    let strings = (of(text()), of(text()), of(text()), of(text()));
    (limits, flags, strings, users(), auth()).prop_map(
        |(limits, flags, strings, user_properties, auth)| ConnAckProperties {
            session_expiry_interval: limits.0,
            receive_maximum: limits.1,
            maximum_qos: limits.2,
            retain_available: flags.0,
            maximum_packet_size: limits.3,
            assigned_client_identifier: strings.0,
            topic_alias_maximum: limits.4,
            reason_string: strings.1,
            user_properties,
            wildcard_subscription_available: flags.1,
            subscription_identifiers_available: flags.2,
            shared_subscription_available: flags.3,
            server_keep_alive: limits.5,
            response_information: strings.2,
            server_reference: strings.3,
            authentication_method: auth.0,
            authentication_data: auth.1,
        },
    )
}

pub fn publish_properties() -> impl Strategy<Value = PublishProperties> {
    let routing = (
        of(any::<u32>()),
        of(nonzero_u16()),
        vec(subscription_id(), 0..3),
    );
    let content = (of(format()), of(topic()), of(binary()), of(text()));
    (routing, content, users()).prop_map(|(routing, content, user_properties)| PublishProperties {
        payload_format: content.0,
        message_expiry_interval: routing.0,
        topic_alias: routing.1,
        subscription_identifiers: routing.2,
        application: AppProperties::builder()
            .response_topic(content.1)
            .correlation_data(content.2)
            .user_properties(user_properties)
            .content_type(content.3)
            .build()
            .expect("binary() fits its length prefix"),
    })
}

pub fn ack_properties() -> impl Strategy<Value = AckProperties> {
    (of(text()), users()).prop_map(|(reason_string, user_properties)| AckProperties {
        reason_string,
        user_properties,
    })
}

pub fn subscribe_properties() -> impl Strategy<Value = SubscribeProperties> {
    (of(subscription_id()), users()).prop_map(|(subscription_identifier, user_properties)| {
        SubscribeProperties {
            subscription_identifier,
            user_properties,
        }
    })
}

pub fn unsubscribe_properties() -> impl Strategy<Value = UnsubscribeProperties> {
    users().prop_map(|user_properties| UnsubscribeProperties { user_properties })
}

pub fn disconnect_properties() -> impl Strategy<Value = DisconnectProperties> {
    (of(any::<u32>()), of(text()), users(), of(text())).prop_map(
        |(session_expiry_interval, reason_string, user_properties, server_reference)| {
            DisconnectProperties {
                session_expiry_interval,
                reason_string,
                user_properties,
                server_reference,
            }
        },
    )
}

pub fn auth_properties() -> impl Strategy<Value = AuthProperties> {
    (auth(), of(text()), users()).prop_map(|(auth, reason_string, user_properties)| {
        AuthProperties {
            authentication_method: auth.0,
            authentication_data: auth.1,
            reason_string,
            user_properties,
        }
    })
}
