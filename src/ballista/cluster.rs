//! A Ballista cluster inside this process: a scheduler and executors on
//! localhost, for tests and examples.

use super::{session_config, session_state, LogicalCodec, PhysicalCodec};
use crate::runtime::Engine;
use ::ballista_core::extension::SessionConfigExt;
use ::ballista_core::registry::BallistaFunctionRegistry;
use ::ballista_core::serde::protobuf::scheduler_grpc_client::SchedulerGrpcClient;
use ::ballista_core::serde::BallistaCodec;
use ::datafusion::common::{DataFusionError, Result as DfResult};
use ::datafusion::execution::runtime_env::RuntimeEnvBuilder;
use ::datafusion::execution::session_state::SessionState;
use ::datafusion::prelude::SessionContext;
use std::sync::Arc;
use std::time::Duration;

/// A scheduler and executors on localhost, in this process, each on
/// ports of the system's choosing; they run on the tokio runtime that
/// started them and stop with it.
///
/// Every part has computeq's codecs; each executor decodes the computeq
/// functions of its tasks onto an engine of its own
/// ([`LocalCluster::executor_engines`]), whose run log shows what that
/// executor computed.
#[derive(Debug)]
pub struct LocalCluster {
    scheduler: String,
    engines: Vec<Arc<Engine>>,
}

fn configuration(e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Configuration(format!("computeq: a local Ballista cluster: {e}"))
}

impl LocalCluster {
    /// Starts a scheduler and `executors` executors of `vcores` task
    /// slots each. Call it on a multi-threaded tokio runtime.
    pub async fn start(executors: usize, vcores: usize) -> DfResult<LocalCluster> {
        let config = session_config();
        let producer = config.clone();
        let codec = BallistaCodec::new(
            Arc::new(LogicalCodec::new()),
            Arc::new(PhysicalCodec::new()),
        );
        let address = ::ballista_scheduler::standalone::new_standalone_scheduler_with_builder(
            Arc::new(session_state),
            Arc::new(move || producer.clone()),
            codec,
        )
        .await
        .map_err(configuration)?;
        let scheduler = format!("http://localhost:{}", address.port());
        let client = connect(&scheduler).await?;
        let mut engines = Vec::with_capacity(executors);
        for _ in 0..executors {
            let engine = Arc::new(Engine::default());
            let codec = BallistaCodec::new(
                Arc::new(LogicalCodec::new().engine(engine.clone())),
                Arc::new(PhysicalCodec::new().engine(engine.clone())),
            );
            let config = config.clone().upgrade_for_ballista();
            let runtime = Arc::new(RuntimeEnvBuilder::new().build()?);
            ::ballista_executor::new_standalone_executor_from_builder(
                client.clone(),
                vcores.max(1),
                Arc::new(move || config.clone()),
                Arc::new(move |_| Ok(runtime.clone())),
                codec,
                BallistaFunctionRegistry::default(),
            )
            .await
            .map_err(configuration)?;
            engines.push(engine);
        }
        Ok(LocalCluster { scheduler, engines })
    }

    /// The scheduler's address, `http://localhost:<port>`.
    pub fn scheduler_url(&self) -> &str {
        &self.scheduler
    }

    /// The engines the executors run computeq's functions on, one per
    /// executor, in the order they started.
    pub fn executor_engines(&self) -> &[Arc<Engine>] {
        &self.engines
    }

    /// A client session on this cluster ([`super::connect`]).
    pub fn connect(&self, state: SessionState) -> DfResult<SessionContext> {
        super::connect_to(&self.scheduler, state)
    }
}

/// The scheduler's client, once its server answers (within 10 s).
async fn connect(url: &str) -> DfResult<SchedulerGrpcClient<tonic::transport::Channel>> {
    let mut last = None;
    for _ in 0..100 {
        match SchedulerGrpcClient::connect(url.to_string()).await {
            Ok(c) => return Ok(c),
            Err(e) => last = Some(e),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(configuration(format!(
        "the scheduler at {url} did not answer: {}",
        last.map_or_else(String::new, |e| e.to_string())
    )))
}
