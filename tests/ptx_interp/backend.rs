//! A `cuda` backend whose device is the interpreter: the engine plans,
//! selects and falls back exactly as it does for the GPU, the PTX comes
//! from the library's writer and runs through the library's host protocol
//! (`run_plan_to_host`, as the CUDA backend runs a query whose result goes
//! to the host). Optionally every distinct module is also assembled by
//! `ptxas` for each target, and (with the `cuda` feature) the CUDA
//! backend's fault layer sits between the protocol and the interpreter.

use super::ptxas;
use super::InterpDevice;
use computeq::plumbing::backends::ptx::{
    compile, run_plan_to_host, PtxDevice, PtxPlan, RunInput, RunLimits,
};
use computeq::plumbing::codegen::ptx::PtxOptions;
use computeq::plumbing::codegen::{lower_plan, Caps};
use computeq::plumbing::Decline;
use computeq::plumbing::{Availability, Backend, BackendError, BackendKind, Job, Phase, RunStats};
use computeq::plumbing::{PhysicalPlan, PlanOutput};
use parking_lot::Mutex;
use std::collections::HashSet;
use std::path::PathBuf;

/// Rewrites the PTX text of a stage before it is loaded (a deliberately
/// wrong kernel); `None` leaves it alone.
pub type Mutation = fn(&str) -> Option<String>;

/// The interpreter as the engine's `cuda` backend.
pub struct InterpBackend {
    /// Launch shape and capabilities the kernels are lowered for.
    pub caps: Caps,
    /// Most positions per chunk.
    pub chunk: usize,
    /// Assemble every new module with this `ptxas` for every target.
    pub ptxas: Option<PathBuf>,
    /// Applied to every module's text before loading.
    pub mutation: Option<Mutation>,
    /// Hashes of the modules `ptxas` accepted already.
    assembled: Mutex<HashSet<u64>>,
    /// Lane-instructions executed by every run so far.
    pub lane_instructions: Mutex<u64>,
    /// Faults injected by the CUDA backend's fault layer.
    #[cfg(feature = "cuda")]
    pub faults: Mutex<computeq::plumbing::backends::cuda::FaultPlan>,
}

impl InterpBackend {
    pub fn new(caps: Caps, chunk: usize) -> InterpBackend {
        InterpBackend {
            caps,
            chunk,
            ptxas: None,
            mutation: None,
            assembled: Mutex::new(HashSet::new()),
            lane_instructions: Mutex::new(0),
            #[cfg(feature = "cuda")]
            faults: Mutex::new(computeq::plumbing::backends::cuda::FaultPlan::NONE),
        }
    }

    /// Also validates every distinct module with `ptxas` (when found).
    pub fn with_ptxas(mut self, ptxas: Option<PathBuf>) -> InterpBackend {
        self.ptxas = ptxas;
        self
    }

    /// Loads every module through `m` (a deliberately wrong kernel).
    pub fn with_mutation(mut self, m: Mutation) -> InterpBackend {
        self.mutation = Some(m);
        self
    }

    /// Distinct modules `ptxas` accepted so far.
    pub fn modules_assembled(&self) -> usize {
        self.assembled.lock().len()
    }

    fn compile(&self, plan: &PhysicalPlan) -> Result<PtxPlan, BackendError> {
        let mut ptx = compile(plan, &self.caps, &PtxOptions::default())
            .map_err(|e| BackendError::new(BackendKind::Cuda, Phase::Compile, e.to_string()))?;
        if let Some(pt) = &self.ptxas {
            for s in &ptx.stages {
                let key = {
                    use std::hash::{Hash, Hasher};
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    s.module.text.hash(&mut h);
                    h.finish()
                };
                if self.assembled.lock().contains(&key) {
                    continue;
                }
                ptxas::check(pt, "case", &s.module.text)
                    .unwrap_or_else(|e| panic!("ptxas rejected a generated module: {e}"));
                self.assembled.lock().insert(key);
            }
        }
        if let Some(m) = self.mutation {
            for s in &mut ptx.stages {
                if let Some(t) = m(&s.module.text) {
                    s.module.text = t;
                }
            }
        }
        Ok(ptx)
    }

    fn run<D: PtxDevice>(
        &self,
        dev: &mut D,
        job: &Job<'_>,
        ptx: &PtxPlan,
        stats: &mut RunStats,
    ) -> Result<PlanOutput, BackendError> {
        let modules = ptx
            .stages
            .iter()
            .map(|s| dev.load(&s.module))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<_> = modules.iter().collect();
        let hosts = job
            .inputs
            .iter()
            .map(|i| i.host(stats))
            .collect::<Result<Vec<_>, _>>()?;
        let ins: Vec<RunInput<'_, D::Buffer>> =
            hosts.iter().map(|h| RunInput::Host(h.as_ref())).collect();
        let limits = RunLimits::uniform(self.chunk);
        run_plan_to_host(
            dev,
            &job.plan.plan,
            ptx,
            &refs,
            &ins,
            job.params,
            &limits,
            stats,
        )
    }
}

impl Backend for InterpBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn availability(&self) -> Availability {
        Availability::Available
    }

    /// What the real backend declines, this declines.
    fn supports(&self, plan: &PhysicalPlan) -> Result<(), Decline> {
        lower_plan(plan, &self.caps).map(|_| ()).map_err(|e| e.0)
    }

    fn execute(&self, job: &Job<'_>, stats: &mut RunStats) -> Result<PlanOutput, BackendError> {
        let ptx = self.compile(&job.plan.plan)?;
        let mut dev = InterpDevice::new();
        #[cfg(feature = "cuda")]
        let out = {
            let faults = *self.faults.lock();
            let mut faulty = computeq::plumbing::backends::cuda::FaultyDevice {
                inner: &mut dev,
                faults,
            };
            self.run(&mut faulty, job, &ptx, stats)
        };
        #[cfg(not(feature = "cuda"))]
        let out = self.run(&mut dev, job, &ptx, stats);
        *self.lane_instructions.lock() += dev.lane_instructions();
        out
    }
}
