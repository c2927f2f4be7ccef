//! A Ballista executor that runs computeq pipelines: Ballista's executor
//! with computeq's codecs ([`computeq::ballista::executor_config`]); the
//! pipelines come inside the plans, nothing is registered here.
//!
//! ```text
//! cargo run --release --features ballista --example ballista_executor -- \
//!     [scheduler host:port, default localhost:50050] [port, default 50051]
//! ```

use ballista_executor::executor_process::{start_executor_process, ExecutorProcessConfig};
use std::error::Error;
use std::sync::Arc;

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let scheduler = args.next().unwrap_or_else(|| "localhost:50050".into());
    let (host, port) = scheduler
        .rsplit_once(':')
        .ok_or_else(|| format!("a scheduler host:port, not {scheduler:?}"))?;
    let scheduler_port = port.parse::<u16>()?;
    let port = match args.next() {
        Some(p) => p.parse::<u16>()?,
        None => 50051,
    };
    let config = computeq::ballista::executor_config(ExecutorProcessConfig {
        scheduler_host: host.into(),
        scheduler_port,
        port,
        // The Flight and gRPC ports side by side.
        grpc_port: port + 1,
        ..ExecutorProcessConfig::default()
    });
    println!("computeq Ballista executor on port {port}, scheduler {scheduler}");
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(start_executor_process(Arc::new(config)))?;
    Ok(())
}
