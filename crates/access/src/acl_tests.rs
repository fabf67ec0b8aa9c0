//! ACL semantics: sections, patterns, deny rules, `$` topics, SUBSCRIBE scopes.

use proptest::prelude::*;

use super::{Access, AccessFileError, AclFile, ClientIdentity, LineProblem, SubscribeScope};

const ANONYMOUS: ClientIdentity<'static> = ClientIdentity {
    client_id: "anon-1",
    username: None,
};
const ALICE: ClientIdentity<'static> = ClientIdentity {
    client_id: "alice-phone",
    username: Some("alice"),
};
const DAVE: ClientIdentity<'static> = ClientIdentity {
    client_id: "dave-1",
    username: Some("dave"),
};

const EXAMPLE: &str = "\
# general section
topic read public/#
topic deny public/secret
topic write anon/in

user alice
topic readwrite alice/#
topic deny alice/private
topic read +/info
user bob
topic write bob/out

pattern readwrite client/%c/#
pattern read user/%u/feed
pattern deny client/%c/locked
";

fn example() -> AclFile {
    AclFile::parse(EXAMPLE).unwrap()
}

fn can_read(acl: &AclFile, client: &ClientIdentity<'_>, topic: &str) -> bool {
    acl.check(client, topic, Access::Read)
}

fn can_write(acl: &AclFile, client: &ClientIdentity<'_>, topic: &str) -> bool {
    acl.check(client, topic, Access::Write)
}

/// As in mosquitto 2.0: `topic` lines before any `user` line are the anonymous clients' rules.
#[test]
fn general_rules_apply_to_anonymous_clients_only() {
    let acl = example();
    assert!(can_read(&acl, &ANONYMOUS, "public/news"));
    assert!(!can_write(&acl, &ANONYMOUS, "public/news"));
    assert!(can_write(&acl, &ANONYMOUS, "anon/in"));
    assert!(!can_read(&acl, &ANONYMOUS, "anon/in"));
    for user in [ALICE, DAVE] {
        assert!(!can_read(&acl, &user, "public/news"));
        assert!(!can_write(&acl, &user, "anon/in"));
    }
}

#[test]
fn user_sections_apply_to_that_user_only() {
    let acl = example();
    assert!(can_write(&acl, &ALICE, "alice/x/y"));
    assert!(can_read(&acl, &ALICE, "alice"));
    assert!(can_read(&acl, &ALICE, "weather/info"));
    assert!(!can_write(&acl, &ALICE, "weather/info"));
    assert!(!can_read(&acl, &DAVE, "alice/x"));
    assert!(!can_read(&acl, &ANONYMOUS, "alice/x"));
    let bob = ClientIdentity {
        client_id: "b",
        username: Some("bob"),
    };
    assert!(can_write(&acl, &bob, "bob/out"));
    assert!(!can_write(&acl, &bob, "alice/x"));
}

#[test]
fn deny_rules_come_first_in_each_section() {
    let acl = example();
    assert!(!can_read(&acl, &ANONYMOUS, "public/secret"));
    assert!(!can_write(&acl, &ALICE, "alice/private"));
    assert!(can_write(&acl, &ALICE, "alice/private/below"));
    assert!(can_write(&acl, &ALICE, "client/alice-phone/x"));
    assert!(!can_write(&acl, &ALICE, "client/alice-phone/locked"));
}

/// As in mosquitto 2.0 (checked with its broker): the user's section is checked before the
/// patterns, so its grant wins over a deny pattern.
#[test]
fn a_grant_of_the_user_section_wins_over_a_deny_pattern() {
    let acl = AclFile::parse("user alice\ntopic client/#\npattern deny client/%c/locked").unwrap();
    assert!(can_write(&acl, &ALICE, "client/alice-phone/x"));
    assert!(can_write(&acl, &ALICE, "client/alice-phone/locked"));
    assert!(!can_write(&acl, &DAVE, "client/dave-1/locked"));
}

#[test]
fn patterns_substitute_client_id_and_username() {
    let acl = example();
    assert!(can_write(&acl, &DAVE, "client/dave-1/x"));
    assert!(can_read(&acl, &DAVE, "client/dave-1"));
    assert!(!can_write(&acl, &DAVE, "client/other/x"));
    assert!(can_read(&acl, &DAVE, "user/dave/feed"));
    assert!(!can_write(&acl, &DAVE, "user/dave/feed"));
    assert!(!can_read(&acl, &ANONYMOUS, "user//feed"));
    assert!(can_write(&acl, &ANONYMOUS, "client/anon-1/x"));
}

/// As in mosquitto 2.0 (checked with its broker): `%u` cannot be substituted, the rule is skipped.
#[test]
fn a_username_deny_pattern_does_not_apply_to_anonymous_clients() {
    let acl = AclFile::parse("topic read user/#\npattern deny user/%u/secret").unwrap();
    assert!(can_read(&acl, &ANONYMOUS, "user//secret"));
    assert!(!can_read(&acl, &DAVE, "user/dave/secret"));
    // The anonymous section grants a named user nothing.
    assert!(!can_read(&acl, &DAVE, "user/alice/secret"));
}

#[test]
fn patterns_grant_nothing_to_wildcard_identities() {
    let acl = AclFile::parse("pattern readwrite c/%c/#\npattern read all/#").unwrap();
    let wildcard_id = ClientIdentity {
        client_id: "x+",
        username: None,
    };
    assert!(!can_read(&acl, &wildcard_id, "c/x+/y"));
    assert!(!can_read(&acl, &wildcard_id, "all/y"));
    let wildcard_user = ClientIdentity {
        client_id: "x",
        username: Some("#"),
    };
    assert!(!can_read(&acl, &wildcard_user, "c/x/y"));
    assert!(can_read(&acl, &DAVE, "all/y"));
}

#[test]
fn dollar_topics_need_rules_that_start_with_dollar() {
    let acl = AclFile::parse("topic read #\ntopic read +/info\ntopic read $SYS/broker/#").unwrap();
    assert!(can_read(&acl, &ANONYMOUS, "a/b"));
    assert!(!can_read(&acl, &ANONYMOUS, "$foo/info"));
    assert!(!can_read(&acl, &ANONYMOUS, "$SYS/load"));
    assert!(can_read(&acl, &ANONYMOUS, "$SYS/broker/uptime"));
}

#[test]
fn an_empty_file_refuses_everything() {
    let acl = AclFile::parse("# nothing\n\n").unwrap();
    assert!(!can_read(&acl, &ANONYMOUS, "a"));
    assert!(!can_write(&acl, &ALICE, "a"));
    assert_eq!(acl.subscribe_scope(&ALICE, "#"), SubscribeScope::None);
}

#[test]
fn repeated_user_sections_add_up() {
    let acl =
        AclFile::parse("user alice\ntopic a\nuser bob\ntopic b\nuser alice\ntopic c").unwrap();
    assert!(can_read(&acl, &ALICE, "a"));
    assert!(can_read(&acl, &ALICE, "c"));
    assert!(!can_read(&acl, &ALICE, "b"));
}

#[test]
fn parse_errors_name_the_line() {
    let error = AclFile::parse("topic a\n\nuser\n").unwrap_err();
    assert!(matches!(
        error,
        AccessFileError::Line {
            line: 3,
            problem: LineProblem::MissingUsername,
            ..
        }
    ));
    let error = AclFile::parse("topic read a/#/b").unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("line 1: invalid topic filter `a/#/b`"),
        "{error}"
    );
}

#[test]
fn load_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("acl");
    std::fs::write(&path, "topic read a\nsubscribe a\n").unwrap();
    let message = AclFile::load(&path).unwrap_err().to_string();
    assert!(
        message.contains("acl: line 2: unknown keyword `subscribe`"),
        "{message}"
    );
    std::fs::write(&path, EXAMPLE).unwrap();
    assert!(can_read(&AclFile::load(&path).unwrap(), &ALICE, "alice/x"));
}

#[test]
fn subscribe_scopes() {
    let acl = example();
    assert_eq!(
        acl.subscribe_scope(&ALICE, "alice/x/#"),
        SubscribeScope::All
    );
    assert_eq!(acl.subscribe_scope(&ALICE, "alice/#"), SubscribeScope::Some);
    assert_eq!(
        acl.subscribe_scope(&ALICE, "alice/private"),
        SubscribeScope::None
    );
    assert_eq!(acl.subscribe_scope(&ALICE, "bob/out"), SubscribeScope::None);
    assert_eq!(acl.subscribe_scope(&ALICE, "#"), SubscribeScope::Some);
    assert_eq!(acl.subscribe_scope(&ALICE, "+/info"), SubscribeScope::All);
    assert_eq!(
        acl.subscribe_scope(&ANONYMOUS, "public/+"),
        SubscribeScope::Some
    );
    assert_eq!(
        acl.subscribe_scope(&ANONYMOUS, "public/news/#"),
        SubscribeScope::All
    );
    assert_eq!(
        acl.subscribe_scope(&ANONYMOUS, "anon/in"),
        SubscribeScope::None
    );
    assert_eq!(
        acl.subscribe_scope(&DAVE, "user/dave/feed"),
        SubscribeScope::All
    );
    assert_eq!(
        acl.subscribe_scope(&DAVE, "client/dave-1/#"),
        SubscribeScope::Some
    );
    assert_eq!(
        acl.subscribe_scope(&DAVE, "client/dave-1/a/#"),
        SubscribeScope::All
    );
    assert_eq!(
        acl.subscribe_scope(&ANONYMOUS, "user/+/feed"),
        SubscribeScope::None
    );
    assert_eq!(acl.subscribe_scope(&ALICE, "$SYS/#"), SubscribeScope::None);
}

/// ACL lines over a small vocabulary, for the property test.
fn acl_text_strategy() -> impl Strategy<Value = String> {
    let keyword = prop::sample::select(vec!["topic", "pattern", "user alice\ntopic"]);
    let access = prop::sample::select(vec!["", "read ", "write ", "readwrite ", "deny "]);
    let filter = prop::sample::select(vec![
        "#", "a/#", "a/+", "+/b", "a/b", "$x/#", "+", "a", "%c/#", "a/%u", "%c", "$x/+/b",
    ]);
    prop::collection::vec((keyword, access, filter), 1..6).prop_map(|lines| {
        lines
            .into_iter()
            .map(|(keyword, access, filter)| format!("{keyword} {access}{filter}\n"))
            .collect()
    })
}

fn subscription_strategy() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "#", "a/#", "a/+", "+/b", "a/b", "$x/#", "+/+", "a", "b/#", "$x/a/b", "c", "+/#", "a/c",
    ])
}

/// Topics of levels `a`, `b`, `c`, `$x`, up to three deep.
fn topics() -> Vec<String> {
    let levels = ["a", "b", "c", "$x"];
    let mut topics: Vec<String> = levels.iter().map(|level| level.to_string()).collect();
    for _ in 0..2 {
        let deeper: Vec<String> = topics
            .iter()
            .flat_map(|topic| levels.iter().map(move |level| format!("{topic}/{level}")))
            .collect();
        topics.extend(deeper);
    }
    topics.sort();
    topics.dedup();
    topics
}

fn reference_matches(filter: &str, topic: &str) -> bool {
    let filter: Vec<&str> = filter.split('/').collect();
    let topic: Vec<&str> = topic.split('/').collect();
    if topic[0].starts_with('$') && (filter[0] == "+" || filter[0] == "#") {
        return false;
    }
    for (index, level) in filter.iter().enumerate() {
        if *level == "#" {
            return true;
        }
        match topic.get(index) {
            Some(text) if *level == "+" || level == text => {}
            _ => return false,
        }
    }
    filter.len() == topic.len()
}

proptest! {
    #[test]
    fn subscribe_scope_is_sound(text in acl_text_strategy(), filter in subscription_strategy()) {
        let acl = AclFile::parse(&text).unwrap();
        for client in [ANONYMOUS, ALICE, ClientIdentity { client_id: "a", username: Some("b") }] {
            let scope = acl.subscribe_scope(&client, filter);
            for topic in topics().iter().filter(|topic| reference_matches(filter, topic)) {
                let readable = acl.check(&client, topic, Access::Read);
                match scope {
                    SubscribeScope::All => prop_assert!(readable, "{} {:?} {}", filter, client, topic),
                    SubscribeScope::None => prop_assert!(!readable, "{} {:?} {}", filter, client, topic),
                    SubscribeScope::Some => {}
                }
            }
        }
    }
}

/// Grants are filed by their first level; wildcard-first and substituted ones are always looked
/// at: the index changes no answer.
#[test]
fn the_first_level_index_finds_every_matching_grant() {
    let mut text = String::from("user alice\n");
    for i in 0..1000 {
        text.push_str(&format!("topic read other/{i}/#\n"));
    }
    text.push_str("topic write +/commands\ntopic read bench/#\npattern read %c/inbox\n");
    let acl = AclFile::parse(&text).unwrap();
    assert!(can_read(&acl, &ALICE, "other/999/x"));
    assert!(!can_read(&acl, &ALICE, "other/1000/x"));
    assert!(can_read(&acl, &ALICE, "bench/fanout"));
    assert!(can_write(&acl, &ALICE, "anything/commands"));
    assert!(!can_write(&acl, &ALICE, "bench/fanout"));
    assert!(can_read(&acl, &ALICE, "alice-phone/inbox"));
    assert!(!can_read(&acl, &ALICE, "nothing/here"));
}
