//! `--cluster`, `ksmith cluster status|python` and the hidden `ksmith worker identify|judge`
//! that a cluster's devices run (docs/cluster.md).

use crate::{env_err, input, Ctx, Exit};
use anyhow::anyhow;
use ksmith_cluster::client::{
    check_address, Cluster, ClusterRemote, ConnectOptions, DeviceState, RAY_REQUIREMENTS,
};
use ksmith_cluster::worker::{self, Judges};
use ksmith_harness::PythonEnv;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Where candidates are judged, as the user asked (flag, environment or config file).
#[derive(Clone, Debug)]
pub(crate) struct ClusterSpec {
    /// The Ray address.
    pub address: String,
    /// Where it came from (for the note).
    pub source: &'static str,
    /// Devices of this fingerprint only.
    pub fingerprint: Option<String>,
}

/// `--cluster` (or `KSMITH_CLUSTER`), else `RAY_ADDRESS`, else `[cluster]` in the config file;
/// `local` (or nothing) judges on this machine.
pub(crate) fn spec(
    flag: Option<String>,
    fingerprint: Option<String>,
) -> Result<Option<ClusterSpec>, Exit> {
    // The config file is read only when it decides (a broken one then says so).
    let config = || ksmith_llm::Config::discover().map_err(input);
    let (address, source) = match flag {
        Some(a) => (Some(a), "--cluster"),
        None => match std::env::var("RAY_ADDRESS").ok().filter(|a| !a.is_empty()) {
            Some(a) => (Some(a), "RAY_ADDRESS"),
            None => (config()?.cluster.address, "the config file"),
        },
    };
    let Some(address) = address.filter(|a| a != "local") else {
        return Ok(None);
    };
    check_address(&address).map_err(|e| input(anyhow!("{e} (from {source})")))?;
    let fingerprint = match fingerprint {
        Some(f) => Some(f),
        None => config()?.cluster.fingerprint,
    };
    Ok(Some(ClusterSpec {
        address,
        source,
        fingerprint,
    }))
}

/// The connection, made once per process on first use and shared by every judge.
pub(crate) type Connection = Arc<OnceLock<Result<ClusterRemote, String>>>;

impl Ctx {
    /// The cluster's devices for this run, connecting on first use; None without a cluster.
    pub(crate) fn remote(&self) -> Result<Option<ClusterRemote>, Exit> {
        let Some(spec) = &self.cluster else {
            return Ok(None);
        };
        let got = self.connection.get_or_init(|| connect(self, spec));
        match got {
            Ok(r) => Ok(Some(r.clone())),
            Err(e) => Err(env_err(anyhow!("{e}"))),
        }
    }
}

fn connect(ctx: &Ctx, spec: &ClusterSpec) -> Result<ClusterRemote, String> {
    note!(
        "ksmith: judging on the Ray cluster at {} (from {}; --cluster local judges here)",
        spec.address,
        spec.source
    );
    let cluster = open(ctx, &spec.address, false)?;
    // Devices lost (and their candidates rescheduled) or added, said as they happen.
    let watched = cluster.clone();
    std::thread::spawn(move || loop {
        say_events(&watched);
        std::thread::sleep(Duration::from_millis(500));
    });
    let remote = cluster
        .remote(spec.fingerprint.as_deref())
        .map_err(|e| e.to_string())?;
    let id = remote.identity();
    let others = cluster
        .devices()
        .iter()
        .filter(|d| d.fingerprint() != Some(id.environment.fingerprint.as_str()))
        .count();
    note!(
        "ksmith: {} device(s) of machine {} ({}, {} cores){}",
        remote.devices(),
        id.environment.fingerprint,
        id.environment.cpu,
        id.environment.cores,
        if others > 0 {
            format!("; {others} other device(s) left out (another machine, or not usable: `ksmith cluster status`)")
        } else {
            String::new()
        }
    );
    Ok(remote)
}

fn say_events(cluster: &Cluster) {
    for e in cluster.take_events() {
        note!(
            "ksmith: cluster: {} {}: {}",
            e.kind.replace('_', " "),
            crate::term::one(&e.device),
            crate::term::one(&e.message)
        );
    }
}

/// Says the cluster's events not said yet (at the command's end).
pub(crate) fn say_last_events(ctx: &Ctx) {
    if let Some(Ok(remote)) = ctx.connection.get() {
        say_events(remote.cluster());
    }
}

/// Starts the driver and says hello (`observe`: only to look, see `ConnectOptions`).
fn open(ctx: &Ctx, address: &str, observe: bool) -> Result<Cluster, String> {
    let env = PythonEnv::resolve(ctx.python.as_deref(), &|m| note!("ksmith: {m}"))
        .map_err(|e| e.to_string())?;
    let ksmith_bin = match std::env::var_os("KSMITH_WORKER_BIN") {
        Some(p) => PathBuf::from(p),
        None => std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?,
    };
    let log = ctx
        .store_dir
        .join("cluster")
        .join(format!("driver-{}.log", std::process::id()));
    let wait = std::env::var("KSMITH_CLUSTER_HELLO_S")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(900);
    Cluster::connect(
        ConnectOptions {
            address: address.to_string(),
            env: &env,
            ksmith_bin,
            log,
            hello_timeout: Duration::from_secs(wait),
            observe,
        },
        &|m| note!("ksmith: {m}"),
    )
    .map_err(|e| e.to_string())
}

/// `ksmith cluster ...`.
#[derive(clap::Subcommand)]
pub(crate) enum ClusterCmd {
    /// The cluster's devices: node, kind, state, machine fingerprint and what each is judging.
    Status {
        /// One JSON document on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Start a Ray cluster on this machine (a head and N worker nodes with one `ksmith_cpu`
    /// slot each) and keep it until Ctrl-C or SIGTERM: prints its address for --cluster. For
    /// trying scale-out and for benchmarks; the nodes share this machine's cores.
    Local {
        /// Worker nodes.
        #[arg(long, default_value_t = 2, value_parser = crate::whole::<u32>(1..=16))]
        workers: u32,
        /// Where the nodes keep their temp dirs and logs (default: a new temporary directory).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Print the managed Python interpreter with the pinned Ray (installed on first use): run
    /// `$(dirname $(ksmith cluster python))/ray start ...` to start nodes with the same Ray.
    Python,
}

/// `ksmith worker ...`: what a cluster's device runs; not for people.
#[derive(clap::Subcommand)]
pub(crate) enum WorkerCmd {
    /// Print this machine's identity (protocol, version, environment, roofline) as JSON.
    Identify,
    /// Judge requests, one JSON line each on stdin, one response line each on stdout.
    Judge,
}

/// Set by SIGINT/SIGTERM while `cluster local` holds its cluster.
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop(_: nix::libc::c_int) {
    // An atomic store is async-signal-safe.
    STOP.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The managed Python with the pinned Ray.
fn ray_python(ctx: &Ctx) -> Result<PathBuf, Exit> {
    let env =
        PythonEnv::resolve(ctx.python.as_deref(), &|m| note!("ksmith: {m}")).map_err(env_err)?;
    env.ensure_module("ray", RAY_REQUIREMENTS, &|m| note!("ksmith: {m}"))
        .map_err(env_err)?;
    Ok(env.python)
}

fn run_local(ctx: &Ctx, workers: u32, dir: Option<&std::path::Path>) -> Result<u8, Exit> {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    let python = ray_python(ctx)?;
    let ray = python.with_file_name("ray");
    let tmp;
    let root = match dir {
        Some(d) => d.to_path_buf(),
        None => {
            tmp = tempfile::Builder::new()
                .prefix("ksmith-ray-")
                .tempdir()
                .map_err(env_err)?;
            tmp.path().to_path_buf()
        }
    };
    let handler = SigAction::new(
        SigHandler::Handler(on_stop),
        SaFlags::empty(),
        SigSet::empty(),
    );
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        // SAFETY: the handler only stores to an atomic.
        unsafe { sigaction(sig, &handler) }.map_err(env_err)?;
    }
    note!(
        "ksmith: starting a head and {workers} worker node(s) under {}...",
        root.display()
    );
    let cluster = ksmith_cluster::local::LocalCluster::start(&ray, workers as usize, &root)
        .map_err(env_err)?;
    say!("{}", cluster.address());
    note!(
        "ksmith: running; judge on it with `ksmith --cluster {} ...`; Ctrl-C stops it",
        cluster.address()
    );
    while !STOP.load(std::sync::atomic::Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(200));
    }
    cluster.stop().map_err(env_err)?;
    note!("ksmith: the local cluster is stopped");
    Ok(0)
}

pub(crate) fn run(ctx: &Ctx, cmd: &ClusterCmd) -> Result<u8, Exit> {
    match cmd {
        ClusterCmd::Local { workers, dir } => run_local(ctx, *workers, dir.as_deref()),
        ClusterCmd::Python => {
            say!("{}", ray_python(ctx)?.display());
            Ok(0)
        }
        ClusterCmd::Status { json } => {
            let Some(spec) = &ctx.cluster else {
                return Err(input(anyhow!(
                    "no cluster: pass --cluster ray://HOST:PORT (or set RAY_ADDRESS, or [cluster] address in the config file)"
                )));
            };
            let cluster = open(ctx, &spec.address, true).map_err(|e| env_err(anyhow!("{e}")))?;
            let devices = cluster.status().map_err(env_err)?;
            if *json {
                crate::term::json(&serde_json::json!({
                    "address": cluster.address(),
                    "ray_version": cluster.ray_version(),
                    "devices": devices,
                }));
                return Ok(0);
            }
            say!(
                "Ray cluster {} (Ray {}): {} device(s)",
                cluster.address(),
                cluster.ray_version(),
                devices.len()
            );
            let mut table = crate::report::table(&[
                "device", "node", "kind", "state", "machine", "cpu", "judged", "doing",
            ]);
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0);
            for d in &devices {
                let (machine, cpu) = match &d.identity {
                    Some(i) => (
                        i.environment.fingerprint.clone(),
                        format!("{} ({} cores)", i.environment.cpu, i.environment.cores),
                    ),
                    None => ("-".into(), "-".into()),
                };
                let state = match (d.state, &d.problem) {
                    (DeviceState::Elsewhere, _) => "in use by another ksmith".to_string(),
                    (DeviceState::Incompatible | DeviceState::Dead, Some(p)) => {
                        format!("{:?}: {}", d.state, crate::term::one(p)).to_lowercase()
                    }
                    (s, _) => format!("{s:?}").to_lowercase(),
                };
                let doing = d
                    .doing
                    .as_ref()
                    .map(|x| {
                        format!(
                            "{} ({:.0} s)",
                            crate::term::one(&x.label),
                            (now - x.since).max(0.0)
                        )
                    })
                    .unwrap_or_else(|| "-".into());
                table.add_row(vec![
                    d.id.clone(),
                    d.node_ip.clone(),
                    d.kind.clone(),
                    state,
                    machine,
                    cpu,
                    d.judged.to_string(),
                    doing,
                ]);
            }
            say!("{table}");
            Ok(0)
        }
    }
}

pub(crate) fn run_worker(ctx: &Ctx, cmd: &WorkerCmd) -> Result<u8, Exit> {
    match cmd {
        WorkerCmd::Identify => {
            let config = ksmith_judge::JudgeConfig::new(ctx.store_dir.join("cache"), ctx.threads);
            let mut judge = ctx.judge_from(config)?;
            let id = worker::identity(&mut judge).map_err(crate::judge_err)?;
            crate::term::json(&serde_json::to_value(&id).map_err(env_err)?);
            Ok(0)
        }
        WorkerCmd::Judge => {
            let make =
                Box::new(|config| ctx.judge_from(config).map_err(|Exit(_, e)| e.to_string()));
            let mut judges = Judges::new(ctx.store_dir.join("cache"), make);
            let stdin = std::io::stdin();
            let mut out = std::io::stdout().lock();
            for line in stdin.lock().lines() {
                let line = line.map_err(env_err)?;
                if line.trim().is_empty() {
                    continue;
                }
                let response = worker::serve(&line, &mut judges);
                let text = serde_json::to_string(&response).map_err(env_err)?;
                writeln!(out, "{text}")
                    .and_then(|_| out.flush())
                    .map_err(env_err)?;
            }
            Ok(0)
        }
    }
}
