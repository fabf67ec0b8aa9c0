//! The cluster link (`[cluster]`, docs/cluster.md): RingMQ nodes exchange messages over NATS.

pub mod subject;
