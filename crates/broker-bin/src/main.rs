//! `ringmq`: the broker binary.
#![forbid(unsafe_code)]

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    anyhow::bail!("the ringmq broker is not assembled yet (issue 5)")
}
