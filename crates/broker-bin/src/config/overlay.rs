//! The raw layer's building blocks: `raw_section!` (a section whose keys are all optional,
//! with its `overlay`) and the overlay of an optional value or table. A leaf.

/// Declares a raw section struct whose fields are all optional, plus `overlay` (later wins).
macro_rules! raw_section {
    ($(#[$meta:meta])* $name:ident { $($field:ident : $ty:ty),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, ::serde::Deserialize, ::serde::Serialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            $(#[serde(skip_serializing_if = "Option::is_none")] pub $field: Option<$ty>,)*
        }

        impl $name {
            /// Takes every field that `over` sets.
            pub fn overlay(&mut self, over: Self) {
                $(if over.$field.is_some() { self.$field = over.$field; })*
            }
        }
    };
}
pub(super) use raw_section;

/// Takes `over` when it is set.
pub(super) fn set_if_some<T>(mine: &mut Option<T>, over: Option<T>) {
    if over.is_some() {
        *mine = over;
    }
}

/// Overlays an optional table: key by key when both have it.
pub(super) fn overlay_table<T>(mine: &mut Option<T>, over: Option<T>, overlay: fn(&mut T, T)) {
    match (mine.as_mut(), over) {
        (Some(table), Some(over)) => overlay(table, over),
        (None, Some(over)) => *mine = Some(over),
        (_, None) => {}
    }
}
