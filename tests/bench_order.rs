//! The bench and selector_eval sampling order (`benches/common/order.rs`),
//! run here because `cargo test` does not run tests inside examples.
#[path = "../benches/common/order.rs"]
mod order;
