//! Properties of the connection-level packets: CONNECT, the will, CONNACK, DISCONNECT, AUTH.

use std::num::{NonZeroU16, NonZeroU32};

use bytes::Bytes;

use super::{
    PayloadFormat, PropertyId, PropertyId as I, PropertySet, PropertySink, UserProperty, value,
};
use crate::read::Reader;
use crate::string::MqttStr;
use crate::{DecodeError, QoS};

fn check_auth(
    method: &Option<MqttStr>,
    data: &Option<Bytes>,
    context: &'static str,
) -> Result<(), DecodeError> {
    if data.is_some() && method.is_none() {
        return Err(DecodeError::AuthDataWithoutMethod { context });
    }
    Ok(())
}

/// Properties of CONNECT (MQTT 5.0 section 3.1.2.11).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnectProperties {
    /// Session Expiry Interval in seconds (absent: 0).
    pub session_expiry_interval: Option<u32>,
    /// Receive Maximum (absent: 65,535).
    pub receive_maximum: Option<NonZeroU16>,
    /// Maximum Packet Size the client accepts (absent: no limit beyond the protocol's).
    pub maximum_packet_size: Option<NonZeroU32>,
    /// Topic Alias Maximum the client accepts (absent: 0).
    pub topic_alias_maximum: Option<u16>,
    /// Request Response Information (absent: false).
    pub request_response_information: Option<bool>,
    /// Request Problem Information (absent: true).
    pub request_problem_information: Option<bool>,
    /// User Properties, in order.
    pub user_properties: Vec<UserProperty>,
    /// Authentication Method for enhanced authentication.
    pub authentication_method: Option<MqttStr>,
    /// Authentication Data.
    pub authentication_data: Option<Bytes>,
}

impl PropertySet for ConnectProperties {
    fn read(&mut self, id: PropertyId, r: &mut Reader) -> Result<bool, DecodeError> {
        match id {
            I::SessionExpiryInterval => self.session_expiry_interval = Some(value::four(r)?),
            I::ReceiveMaximum => self.receive_maximum = Some(value::receive_maximum(r)?),
            I::MaximumPacketSize => self.maximum_packet_size = Some(value::maximum_packet_size(r)?),
            I::TopicAliasMaximum => self.topic_alias_maximum = Some(value::two(r)?),
            I::RequestResponseInformation => {
                self.request_response_information = Some(value::flag(r, id)?);
            }
            I::RequestProblemInformation => {
                self.request_problem_information = Some(value::flag(r, id)?)
            }
            I::UserProperty => value::push_user_property(&mut self.user_properties, r)?,
            I::AuthenticationMethod => {
                self.authentication_method = Some(value::string(r, "authentication method")?)
            }
            I::AuthenticationData => {
                self.authentication_data = Some(value::binary(r, "authentication data")?)
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn write_to<S: PropertySink>(&self, s: &mut S) {
        s.opt_four(I::SessionExpiryInterval, self.session_expiry_interval);
        s.opt_two(I::ReceiveMaximum, self.receive_maximum.map(NonZeroU16::get));
        s.opt_four(
            I::MaximumPacketSize,
            self.maximum_packet_size.map(NonZeroU32::get),
        );
        s.opt_two(I::TopicAliasMaximum, self.topic_alias_maximum);
        s.opt_bool(
            I::RequestResponseInformation,
            self.request_response_information,
        );
        s.opt_bool(
            I::RequestProblemInformation,
            self.request_problem_information,
        );
        s.user_properties(&self.user_properties);
        let method = self.authentication_method.as_ref();
        s.authentication(method, self.authentication_data.as_ref());
    }

    fn check(&self, context: &'static str) -> Result<(), DecodeError> {
        check_auth(
            &self.authentication_method,
            &self.authentication_data,
            context,
        )
    }
}

/// Properties of the will in CONNECT (MQTT 5.0 section 3.1.3.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WillProperties {
    /// Will Delay Interval in seconds (absent: 0).
    pub will_delay_interval: Option<u32>,
    /// Payload Format Indicator of the will payload.
    pub payload_format: Option<PayloadFormat>,
    /// Message Expiry Interval of the will message in seconds.
    pub message_expiry_interval: Option<u32>,
    /// Content Type of the will payload.
    pub content_type: Option<MqttStr>,
    /// Response Topic of the will message.
    pub response_topic: Option<MqttStr>,
    /// Correlation Data of the will message.
    pub correlation_data: Option<Bytes>,
    /// User Properties, in order.
    pub user_properties: Vec<UserProperty>,
}

impl WillProperties {
    /// A copy whose strings and data are in allocations of their own.
    pub fn detached(&self) -> Self {
        Self {
            content_type: detached_text(&self.content_type),
            response_topic: detached_text(&self.response_topic),
            correlation_data: detached_bytes(&self.correlation_data),
            user_properties: detached_pairs(&self.user_properties),
            ..*self
        }
    }
}

impl ConnectProperties {
    /// A copy whose strings and data are in allocations of their own.
    pub fn detached(&self) -> Self {
        Self {
            user_properties: detached_pairs(&self.user_properties),
            authentication_method: detached_text(&self.authentication_method),
            authentication_data: detached_bytes(&self.authentication_data),
            ..*self
        }
    }
}

fn detached_text(text: &Option<MqttStr>) -> Option<MqttStr> {
    text.as_ref().map(MqttStr::detached)
}

fn detached_bytes(data: &Option<Bytes>) -> Option<Bytes> {
    data.as_deref().map(Bytes::copy_from_slice)
}

fn detached_pairs(pairs: &[UserProperty]) -> Vec<UserProperty> {
    pairs
        .iter()
        .map(|(name, value)| (name.detached(), value.detached()))
        .collect()
}

impl PropertySet for WillProperties {
    fn read(&mut self, id: PropertyId, r: &mut Reader) -> Result<bool, DecodeError> {
        match id {
            I::WillDelayInterval => self.will_delay_interval = Some(value::four(r)?),
            I::PayloadFormatIndicator => self.payload_format = Some(value::payload_format(r)?),
            I::MessageExpiryInterval => self.message_expiry_interval = Some(value::four(r)?),
            I::ContentType => self.content_type = Some(value::string(r, "content type")?),
            I::ResponseTopic => self.response_topic = Some(value::response_topic(r)?),
            I::CorrelationData => {
                self.correlation_data = Some(value::binary(r, "correlation data")?)
            }
            I::UserProperty => value::push_user_property(&mut self.user_properties, r)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn write_to<S: PropertySink>(&self, s: &mut S) {
        s.opt_four(I::WillDelayInterval, self.will_delay_interval);
        s.opt_byte(
            I::PayloadFormatIndicator,
            self.payload_format.map(|f| f as u8),
        );
        s.opt_four(I::MessageExpiryInterval, self.message_expiry_interval);
        s.opt_string(I::ContentType, self.content_type.as_ref());
        s.opt_string(I::ResponseTopic, self.response_topic.as_ref());
        let data = self.correlation_data.as_ref();
        s.opt_binary(I::CorrelationData, "correlation data", data);
        s.user_properties(&self.user_properties);
    }
}

/// Properties of CONNACK (MQTT 5.0 section 3.2.2.3).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConnAckProperties {
    /// Session Expiry Interval the server uses, if it differs from the client's.
    pub session_expiry_interval: Option<u32>,
    /// Receive Maximum of the server (absent: 65,535).
    pub receive_maximum: Option<NonZeroU16>,
    /// Maximum QoS the server supports (0 or 1; absent: 2).
    pub maximum_qos: Option<QoS>,
    /// Whether the server supports retained messages (absent: true).
    pub retain_available: Option<bool>,
    /// Maximum Packet Size the server accepts.
    pub maximum_packet_size: Option<NonZeroU32>,
    /// Client identifier the server assigned.
    pub assigned_client_identifier: Option<MqttStr>,
    /// Topic Alias Maximum the server accepts (absent: 0).
    pub topic_alias_maximum: Option<u16>,
    /// Reason String.
    pub reason_string: Option<MqttStr>,
    /// User Properties, in order.
    pub user_properties: Vec<UserProperty>,
    /// Wildcard Subscription Available (absent: true).
    pub wildcard_subscription_available: Option<bool>,
    /// Subscription Identifiers Available (absent: true).
    pub subscription_identifiers_available: Option<bool>,
    /// Shared Subscription Available (absent: true).
    pub shared_subscription_available: Option<bool>,
    /// Keep alive the server imposes, in seconds.
    pub server_keep_alive: Option<u16>,
    /// Response Information.
    pub response_information: Option<MqttStr>,
    /// Server Reference.
    pub server_reference: Option<MqttStr>,
    /// Authentication Method.
    pub authentication_method: Option<MqttStr>,
    /// Authentication Data.
    pub authentication_data: Option<Bytes>,
}

impl PropertySet for ConnAckProperties {
    fn read(&mut self, id: PropertyId, r: &mut Reader) -> Result<bool, DecodeError> {
        match id {
            I::SessionExpiryInterval => self.session_expiry_interval = Some(value::four(r)?),
            I::ReceiveMaximum => self.receive_maximum = Some(value::receive_maximum(r)?),
            I::MaximumQoS => self.maximum_qos = Some(value::maximum_qos(r)?),
            I::RetainAvailable => self.retain_available = Some(value::flag(r, id)?),
            I::MaximumPacketSize => self.maximum_packet_size = Some(value::maximum_packet_size(r)?),
            I::AssignedClientIdentifier => {
                self.assigned_client_identifier =
                    Some(value::string(r, "assigned client identifier")?)
            }
            I::TopicAliasMaximum => self.topic_alias_maximum = Some(value::two(r)?),
            I::ReasonString => self.reason_string = Some(value::string(r, "reason string")?),
            I::UserProperty => value::push_user_property(&mut self.user_properties, r)?,
            I::WildcardSubscriptionAvailable => {
                self.wildcard_subscription_available = Some(value::flag(r, id)?);
            }
            I::SubscriptionIdentifierAvailable => {
                self.subscription_identifiers_available = Some(value::flag(r, id)?);
            }
            I::SharedSubscriptionAvailable => {
                self.shared_subscription_available = Some(value::flag(r, id)?);
            }
            I::ServerKeepAlive => self.server_keep_alive = Some(value::two(r)?),
            I::ResponseInformation => {
                self.response_information = Some(value::string(r, "response information")?)
            }
            I::ServerReference => {
                self.server_reference = Some(value::string(r, "server reference")?)
            }
            I::AuthenticationMethod => {
                self.authentication_method = Some(value::string(r, "authentication method")?)
            }
            I::AuthenticationData => {
                self.authentication_data = Some(value::binary(r, "authentication data")?)
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn write_to<S: PropertySink>(&self, s: &mut S) {
        s.opt_four(I::SessionExpiryInterval, self.session_expiry_interval);
        s.opt_two(I::ReceiveMaximum, self.receive_maximum.map(NonZeroU16::get));
        s.opt_byte(I::MaximumQoS, self.maximum_qos.map(QoS::as_u8));
        s.opt_bool(I::RetainAvailable, self.retain_available);
        s.opt_four(
            I::MaximumPacketSize,
            self.maximum_packet_size.map(NonZeroU32::get),
        );
        let assigned = self.assigned_client_identifier.as_ref();
        s.opt_string(I::AssignedClientIdentifier, assigned);
        s.opt_two(I::TopicAliasMaximum, self.topic_alias_maximum);
        s.opt_string(I::ReasonString, self.reason_string.as_ref());
        s.user_properties(&self.user_properties);
        let wildcard = self.wildcard_subscription_available;
        s.opt_bool(I::WildcardSubscriptionAvailable, wildcard);
        let ids = self.subscription_identifiers_available;
        s.opt_bool(I::SubscriptionIdentifierAvailable, ids);
        s.opt_bool(
            I::SharedSubscriptionAvailable,
            self.shared_subscription_available,
        );
        s.opt_two(I::ServerKeepAlive, self.server_keep_alive);
        s.opt_string(I::ResponseInformation, self.response_information.as_ref());
        s.opt_string(I::ServerReference, self.server_reference.as_ref());
        let method = self.authentication_method.as_ref();
        s.authentication(method, self.authentication_data.as_ref());
    }

    fn check(&self, context: &'static str) -> Result<(), DecodeError> {
        check_auth(
            &self.authentication_method,
            &self.authentication_data,
            context,
        )
    }
}

/// Properties of DISCONNECT (MQTT 5.0 section 3.14.2.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DisconnectProperties {
    /// New Session Expiry Interval (client to server only).
    pub session_expiry_interval: Option<u32>,
    /// Reason String.
    pub reason_string: Option<MqttStr>,
    /// User Properties, in order.
    pub user_properties: Vec<UserProperty>,
    /// Server Reference (with Use another server / Server moved).
    pub server_reference: Option<MqttStr>,
}

impl PropertySet for DisconnectProperties {
    fn read(&mut self, id: PropertyId, r: &mut Reader) -> Result<bool, DecodeError> {
        match id {
            I::SessionExpiryInterval => self.session_expiry_interval = Some(value::four(r)?),
            I::ReasonString => self.reason_string = Some(value::string(r, "reason string")?),
            I::UserProperty => value::push_user_property(&mut self.user_properties, r)?,
            I::ServerReference => {
                self.server_reference = Some(value::string(r, "server reference")?)
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn write_to<S: PropertySink>(&self, s: &mut S) {
        s.opt_four(I::SessionExpiryInterval, self.session_expiry_interval);
        s.opt_string(I::ReasonString, self.reason_string.as_ref());
        s.user_properties(&self.user_properties);
        s.opt_string(I::ServerReference, self.server_reference.as_ref());
    }
}

/// Properties of AUTH (MQTT 5.0 section 3.15.2.2).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AuthProperties {
    /// Authentication Method.
    pub authentication_method: Option<MqttStr>,
    /// Authentication Data.
    pub authentication_data: Option<Bytes>,
    /// Reason String.
    pub reason_string: Option<MqttStr>,
    /// User Properties, in order.
    pub user_properties: Vec<UserProperty>,
}

impl PropertySet for AuthProperties {
    fn read(&mut self, id: PropertyId, r: &mut Reader) -> Result<bool, DecodeError> {
        match id {
            I::AuthenticationMethod => {
                self.authentication_method = Some(value::string(r, "authentication method")?)
            }
            I::AuthenticationData => {
                self.authentication_data = Some(value::binary(r, "authentication data")?)
            }
            I::ReasonString => self.reason_string = Some(value::string(r, "reason string")?),
            I::UserProperty => value::push_user_property(&mut self.user_properties, r)?,
            _ => return Ok(false),
        }
        Ok(true)
    }

    fn write_to<S: PropertySink>(&self, s: &mut S) {
        let method = self.authentication_method.as_ref();
        s.authentication(method, self.authentication_data.as_ref());
        s.opt_string(I::ReasonString, self.reason_string.as_ref());
        s.user_properties(&self.user_properties);
    }

    fn check(&self, context: &'static str) -> Result<(), DecodeError> {
        check_auth(
            &self.authentication_method,
            &self.authentication_data,
            context,
        )
    }
}
