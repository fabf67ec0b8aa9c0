//! The shard's short type names: the context every handler method receives, and its hash maps.

use std::collections::{HashMap, HashSet};

use ring_runtime::ShardCtx;

use crate::message::ShardMsg;

/// The context type every handler method receives.
pub(crate) type Ctx = ShardCtx<ShardMsg>;

/// The shard's maps: keyed by ids and client identifiers on every delivery, so hashed with
/// aHash (keyed per process) instead of SipHash.
pub(crate) type FastMap<K, V> = HashMap<K, V, ahash::RandomState>;
/// See [`FastMap`].
pub(crate) type FastSet<K> = HashSet<K, ahash::RandomState>;
