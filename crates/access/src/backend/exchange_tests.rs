//! The HTTP AUTH exchange's JSON: the round POSTed, and every kind of answer read back.

use super::*;

#[test]
fn a_round_goes_as_json_with_base64_data() {
    let round = ExchangeRound {
        method: "OTP".into(),
        client_id: "c".into(),
        username: None,
        data: Some(b"\x00hi".to_vec()),
        round: 2,
        state: Some("s".into()),
        reauthenticating: true,
        peer: "127.0.0.1:5".parse().unwrap(),
    };
    let body = round_body(&round);
    assert_eq!(
        body,
        json!({"method": "OTP", "clientid": "c", "username": "", "peer": "127.0.0.1:5",
               "round": 2, "reauth": true, "data": "AGhp", "state": "s"})
    );
}

#[test]
fn answers_are_read_and_bad_ones_named() {
    assert_eq!(
        read_answer(br#"{"result":"continue","data":"aGk=","state":"x"}"#),
        Ok(ExchangeAnswer::Continue {
            data: b"hi".to_vec(),
            state: Some("x".into())
        })
    );
    assert_eq!(
        read_answer(br#"{"result":"success","username":"u"}"#),
        Ok(ExchangeAnswer::Success {
            data: None,
            username: Some("u".into())
        })
    );
    assert_eq!(
        read_answer(br#"{"result":"deny"}"#),
        Ok(ExchangeAnswer::Deny)
    );
    for bad in [
        &br#"{"result":"maybe"}"#[..],
        b"not json",
        br#"{"result":"continue","data":"!"}"#,
    ] {
        assert!(
            read_answer(bad)
                .unwrap_err()
                .starts_with("AUTH round answer")
        );
    }
}
