use super::*;
use crate::properties::PublishProperties;
use crate::properties::wire::decode_properties;
use crate::read::Reader;

fn text(s: &'static str) -> MqttStr {
    MqttStr::from_static(s).unwrap()
}

fn full() -> AppProperties {
    AppProperties::builder()
        .response_topic(Some(text("reply/here")))
        .correlation_data(Some(Bytes::from_static(&[0, 1, 2])))
        .user_property(text("a"), text("1"))
        .user_property(text("b"), text("2"))
        .content_type(Some(text("text/plain")))
        .build()
        .unwrap()
}

/// Decodes a PUBLISH property block (length prefix included).
fn decode(block: &'static [u8]) -> PublishProperties {
    let mut reader = Reader::new(Bytes::from_static(block));
    decode_properties::<PublishProperties>(&mut reader, "PUBLISH").unwrap()
}

#[test]
fn built_properties_read_back_in_order() {
    let set = full();
    assert_eq!(set.response_topic().unwrap().as_str(), "reply/here");
    assert_eq!(set.correlation_data().unwrap().as_ref(), &[0, 1, 2]);
    let users: Vec<(String, String)> = set
        .user_properties()
        .map(|(k, v)| (k.as_str().to_owned(), v.as_str().to_owned()))
        .collect();
    assert_eq!(users, [("a".into(), "1".into()), ("b".into(), "2".into())]);
    assert_eq!(set.content_type().unwrap().as_str(), "text/plain");
    // 1 + 2 + 10, 1 + 2 + 3, twice 1 + 2 + 1 + 2 + 1, 1 + 2 + 10.
    assert_eq!(set.encoded_len(), 13 + 6 + 2 * 7 + 13);
}

#[test]
fn an_empty_builder_gives_the_empty_set() {
    let set = AppProperties::builder().build().unwrap();
    assert!(set.is_empty());
    assert_eq!(set, AppProperties::EMPTY);
    assert_eq!(set.user_properties().count(), 0);
    assert!(set.content_type().is_none());
}

#[test]
fn a_decoded_block_skips_the_other_properties_and_keeps_the_publishers_order() {
    // Content Type, Message Expiry 7, User Property k=v, Topic Alias 3, Payload Format 1.
    let props = decode(&[
        21, 0x03, 0, 1, b'c', 0x02, 0, 0, 0, 7, 0x26, 0, 1, b'k', 0, 1, b'v', 0x23, 0, 3, 0x01, 1,
    ]);
    assert_eq!(props.message_expiry_interval, Some(7));
    assert_eq!(props.topic_alias.map(|a| a.get()), Some(3));
    let app = &props.application;
    assert_eq!(app.content_type().unwrap().as_str(), "c");
    let users: Vec<_> = app.user_properties().collect();
    assert_eq!(users, [(text("k"), text("v"))]);
    assert!(app.response_topic().is_none() && app.correlation_data().is_none());
    let mut out = BytesMut::new();
    app.put(&mut out);
    assert_eq!(&out[..], &[0x03, 0, 1, b'c', 0x26, 0, 1, b'k', 0, 1, b'v']);
    assert_eq!(app.encoded_len(), out.len());
    // Equal to the same properties built apart in that order, and to its detached copy.
    let built = AppProperties::builder()
        .user_property(text("k"), text("v"))
        .build()
        .unwrap();
    assert_ne!(*app, built, "the content type is missing");
    let detached = app.detached();
    assert_eq!(detached, *app);
    assert_eq!(&detached.block[..], &out[..]);
}

#[test]
fn a_block_of_routing_properties_only_holds_no_application_properties() {
    let props = decode(&[5, 0x02, 0, 0, 0, 9]);
    assert!(props.application.is_empty());
    assert!(props.application.block.is_empty(), "no handle was taken");
}

#[test]
fn invalid_application_properties_are_refused() {
    use crate::DecodeError;
    let refuse = |block: &'static [u8]| {
        let mut reader = Reader::new(Bytes::from_static(block));
        decode_properties::<PublishProperties>(&mut reader, "PUBLISH").unwrap_err()
    };
    // An empty Response Topic, a wildcard in it, bad UTF-8, a truncated user property value.
    assert!(matches!(
        refuse(&[3, 0x08, 0, 0]),
        DecodeError::EmptyTopicName { .. }
    ));
    assert!(matches!(
        refuse(&[4, 0x08, 0, 1, b'#']),
        DecodeError::WildcardInTopicName { .. }
    ));
    assert!(matches!(
        refuse(&[4, 0x03, 0, 1, 0xFF]),
        DecodeError::InvalidUtf8 { .. }
    ));
    assert!(matches!(
        refuse(&[7, 0x26, 0, 1, b'k', 0, 2, b'v']),
        DecodeError::UnexpectedEnd { .. }
    ));
    // A second Content Type is a duplicate; user properties repeat.
    assert!(matches!(
        refuse(&[8, 0x03, 0, 1, b'a', 0x03, 0, 1, b'b']),
        DecodeError::DuplicateProperty { .. }
    ));
}

#[test]
fn too_long_correlation_data_is_an_encode_error() {
    let data = Bytes::from(vec![0; usize::from(u16::MAX) + 1]);
    let built = AppProperties::builder()
        .correlation_data(Some(data))
        .build();
    assert!(built.is_err());
}
