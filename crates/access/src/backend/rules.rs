//! [`TopicRule`]s built from filters that come from outside the broker (Redis sets, JWT claims)
//! and judged against topic checks.

use super::{AclRequest, RuleAccess, TopicAccess, TopicRule};
use crate::filter::{self, RuleFilter, Substitution};
use crate::{ClientIdentity, LineProblem};

/// A rule for `filter`; an error when it is not a topic filter MQTT allows.
pub(crate) fn rule(filter: &str, access: RuleAccess) -> Result<TopicRule, LineProblem> {
    filter::validate(filter)?;
    Ok(TopicRule {
        filter: filter.to_owned(),
        access,
    })
}

/// `text` with `%c` and `%u` replaced, left to right, by the client id and username (any other
/// `%` stays). Refused when the filter needs a username the client has not, or when a value
/// holds `+`, `#` or NUL: substituted, it would widen the filter instead of naming one client.
pub(crate) fn substitute(text: &str, client: &ClientIdentity<'_>) -> Result<String, &'static str> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let marked = &rest[at..];
        if let Some(after) = marked.strip_prefix("%c") {
            out.push_str(literal(client.client_id)?);
            rest = after;
        } else if let Some(after) = marked.strip_prefix("%u") {
            let username = client.username.ok_or("%u and the client has no username")?;
            out.push_str(literal(username)?);
            rest = after;
        } else {
            out.push('%');
            rest = &marked[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn literal(value: &str) -> Result<&str, &'static str> {
    if value.contains(['+', '#', '\0']) {
        return Err("the client id or username holds `+`, `#` or NUL");
    }
    Ok(value)
}

/// Whether one of `rules` allows `request`: a read rule covers subscribing (every topic of the
/// requested filter matches the rule) and receiving, a write rule publishing.
pub(crate) fn allows(rules: &[TopicRule], request: &AclRequest) -> bool {
    let client = ClientIdentity {
        client_id: &request.client_id,
        username: request.username.as_deref(),
    };
    rules
        .iter()
        .filter(|rule| grants(rule.access, request.access))
        .any(|rule| filter_allows(&rule.filter, &client, request))
}

fn grants(access: RuleAccess, wanted: TopicAccess) -> bool {
    match wanted {
        TopicAccess::Subscribe | TopicAccess::Receive => {
            matches!(access, RuleAccess::Read | RuleAccess::ReadWrite)
        }
        TopicAccess::Publish => matches!(access, RuleAccess::Write | RuleAccess::ReadWrite),
    }
}

fn filter_allows(filter: &str, client: &ClientIdentity<'_>, request: &AclRequest) -> bool {
    let Ok(parsed) = RuleFilter::parse(filter, Substitution::Literal) else {
        return false;
    };
    match request.access {
        TopicAccess::Subscribe => parsed.levels_for(client).is_some_and(|levels| {
            filter::covers(&levels, &filter::subscription_levels(&request.topic))
        }),
        TopicAccess::Receive | TopicAccess::Publish => parsed.matches(client, &request.topic),
    }
}
