//! Project automation: `cargo xtask ci | deps | bench | serve`.
fn main() -> anyhow::Result<()> {
    Ok(())
}
