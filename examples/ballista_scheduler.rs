//! A Ballista scheduler that plans computeq pipelines: Ballista's
//! scheduler with computeq's codecs and planner
//! ([`computeq::ballista::scheduler_config`]).
//!
//! ```text
//! cargo run --release --features ballista --example ballista_scheduler -- [port]
//! ```
//!
//! Start executors with `examples/ballista_executor.rs`, then connect a
//! client (`examples/ballista_cluster.rs -- --scheduler df://localhost:50050`).

use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::SchedulerConfig;
use ballista_scheduler::scheduler_process::start_server;
use std::error::Error;
use std::sync::Arc;

fn main() -> Result<(), Box<dyn Error>> {
    let port = match std::env::args().nth(1) {
        Some(p) => p
            .parse::<u16>()
            .map_err(|e| format!("a port, not {p:?}: {e}"))?,
        None => 50050,
    };
    let config = computeq::ballista::scheduler_config(SchedulerConfig {
        bind_port: port,
        ..SchedulerConfig::default()
    });
    let address = format!("{}:{}", config.bind_host, config.bind_port).parse()?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let cluster = BallistaCluster::new_from_config(&config).await?;
            println!("computeq Ballista scheduler on {address}");
            start_server(cluster, address, Arc::new(config)).await
        })?;
    Ok(())
}
