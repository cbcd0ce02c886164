//! A real Ray cluster on this machine (a head and worker nodes), for tests and benchmarks.
//!
//! Every node is one `ray start --block` in its own session (setsid): Ray puts its worker
//! processes into process groups of their own but leaves them in the node's session, so the
//! session is what identifies "everything of that node" when it is killed. Nodes get distinct
//! ports (Ray's defaults collide for two nodes on one host) and their own temp dirs, and the
//! GCS's health checks are fast so a killed node is declared dead within about 2 s.

use std::fs::File;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// How long a node may take to print that its runtime started.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// The line `ray start` prints once its node has registered with the GCS.
const STARTED: &str = "Ray runtime started";

/// Health checks the GCS runs on raylets (milliseconds and misses); Ray's defaults take ~30 s.
const HEALTH_ENV: [(&str, &str); 5] = [
    ("RAY_health_check_initial_delay_ms", "0"),
    ("RAY_health_check_period_ms", "500"),
    ("RAY_health_check_timeout_ms", "500"),
    ("RAY_health_check_failure_threshold", "3"),
    ("RAY_USAGE_STATS_ENABLED", "0"),
];

/// What can go wrong while starting or stopping a local cluster.
#[derive(Debug, thiserror::Error)]
pub enum LocalClusterError {
    /// A directory or log file under the cluster's root could not be made.
    #[error("local Ray cluster: cannot create {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `ray start` could not be run.
    #[error("local Ray cluster: cannot run {ray} for the {node}: {source}")]
    Spawn {
        /// The `ray` executable.
        ray: PathBuf,
        /// Which node ("head", "worker 1").
        node: String,
        /// Why.
        source: std::io::Error,
    },
    /// No free port could be reserved.
    #[error("local Ray cluster: cannot reserve a free port: {0}")]
    Port(std::io::Error),
    /// A node did not come up.
    #[error("local Ray cluster: the {node} did not start within {secs} s ({why}); its log {log} ends with:\n{tail}")]
    NotStarted {
        /// Which node.
        node: String,
        /// The timeout.
        secs: u64,
        /// "timed out" or how its process ended.
        why: String,
        /// Its log file.
        log: PathBuf,
        /// The log's last lines.
        tail: String,
    },
    /// `kill_worker` named a worker that does not exist.
    #[error("local Ray cluster: there is no worker {index} (it has {count})")]
    NoSuchWorker {
        /// The index asked for.
        index: usize,
        /// How many workers there are.
        count: usize,
    },
    /// Processes of a node outlived SIGKILL.
    #[error("local Ray cluster: processes {pids:?} of the {node} are still running after SIGKILL")]
    Survivors {
        /// Which node.
        node: String,
        /// The survivors.
        pids: Vec<i32>,
    },
}

/// One `ray start --block` process and its session.
#[derive(Debug)]
struct Node {
    name: String,
    child: Child,
    log: PathBuf,
    killed: bool,
}

impl Node {
    fn sid(&self) -> i32 {
        // The child called setsid: its pid is its session id.
        self.child.id() as i32
    }

    /// SIGKILLs every process of the node's session (Ray workers have their own process
    /// groups, so a process-group kill would miss them) until none is left; reaps the child.
    fn kill(&mut self) -> Result<(), LocalClusterError> {
        if self.killed {
            return Ok(());
        }
        let sid = self.sid();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let pids = session_members(sid);
            for &pid in &pids {
                // ESRCH only means it is already gone.
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            let _ = self.child.try_wait();
            if pids.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                return Err(LocalClusterError::Survivors {
                    node: self.name.clone(),
                    pids,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.wait();
        self.killed = true;
        Ok(())
    }
}

/// Live (non-zombie) processes whose session is `sid`, read from /proc.
pub fn session_members(sid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the command's ")" come: state ppid pgrp session ...
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.len() > 3 && fields[0] != "Z" && fields[3].parse::<i32>() == Ok(sid) {
            out.push(pid);
        }
    }
    out
}

/// A Ray cluster on this machine: a head (GCS, no device slots) and worker nodes with one
/// `ksmith_cpu` slot each. For tests and benchmarks. Everything is killed on `stop` or drop.
#[derive(Debug)]
pub struct LocalCluster {
    head: Node,
    workers: Vec<Node>,
    gcs_port: u16,
    ray_bin: PathBuf,
    root: PathBuf,
    ports: PortPool,
}

impl LocalCluster {
    /// Starts a head and `workers` worker nodes with the `ray` executable `ray_bin`, their
    /// temp dirs and logs under `root`, and waits until every node has registered.
    ///
    /// The head offers no `ksmith_cpu`: it runs the GCS and the driver's raylet, so timings on
    /// it would be disturbed, and a cluster whose workers are all killed must have no device.
    pub fn start(
        ray_bin: &Path,
        workers: usize,
        root: &Path,
    ) -> Result<LocalCluster, LocalClusterError> {
        std::fs::create_dir_all(root).map_err(|source| LocalClusterError::Io {
            path: root.to_path_buf(),
            source,
        })?;
        let mut ports = PortPool::default();
        let gcs_port = ports.take()?;
        let mut head_args = vec![
            "--head".to_string(),
            format!("--port={gcs_port}"),
            "--include-dashboard=false".to_string(),
            format!("--dashboard-port={}", ports.take()?),
        ];
        head_args.extend(node_ports(&mut ports)?);
        let head = spawn_node(ray_bin, root, "head", &head_args, "{}")?;
        // Workers can only join once the GCS listens.
        let mut cluster = LocalCluster {
            head,
            workers: Vec::new(),
            gcs_port,
            ray_bin: ray_bin.to_path_buf(),
            root: root.to_path_buf(),
            ports,
        };
        wait_started(&mut cluster.head)?;
        for _ in 0..workers {
            cluster.spawn_worker()?;
        }
        // Started together, waited for together: nodes start in parallel.
        for w in &mut cluster.workers {
            wait_started(w)?;
        }
        Ok(cluster)
    }

    /// Starts one more worker node (one `ksmith_cpu` slot) and waits until it has registered;
    /// returns its index.
    pub fn add_worker(&mut self) -> Result<usize, LocalClusterError> {
        self.spawn_worker()?;
        let i = self.workers.len() - 1;
        wait_started(&mut self.workers[i])?;
        Ok(i)
    }

    fn spawn_worker(&mut self) -> Result<(), LocalClusterError> {
        let mut args = vec![format!("--address={}", self.address())];
        args.extend(node_ports(&mut self.ports)?);
        let name = format!("worker {}", self.workers.len());
        let node = spawn_node(
            &self.ray_bin,
            &self.root,
            &name,
            &args,
            r#"{"ksmith_cpu": 1}"#,
        )?;
        self.workers.push(node);
        Ok(())
    }

    /// The GCS address as the driver's `hello` takes it (`host:port`).
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.gcs_port)
    }

    /// How many worker nodes were started (killed ones included).
    pub fn workers(&self) -> usize {
        self.workers.len()
    }

    /// Session ids of the head and the workers (every process of a node is in its session).
    pub fn sessions(&self) -> Vec<i32> {
        std::iter::once(&self.head)
            .chain(&self.workers)
            .map(Node::sid)
            .collect()
    }

    /// SIGKILLs everything of worker `index` (its raylet, agents and Ray workers) and checks
    /// that nothing of it is left.
    pub fn kill_worker(&mut self, index: usize) -> Result<(), LocalClusterError> {
        let count = self.workers.len();
        self.workers
            .get_mut(index)
            .ok_or(LocalClusterError::NoSuchWorker { index, count })?
            .kill()
    }

    /// SIGKILLs everything of the head node (the GCS with it: the cluster is gone).
    pub fn kill_head(&mut self) -> Result<(), LocalClusterError> {
        self.head.kill()
    }

    /// Kills every node and checks that nothing of the cluster is left running.
    pub fn stop(mut self) -> Result<(), LocalClusterError> {
        self.kill_all()
    }

    fn kill_all(&mut self) -> Result<(), LocalClusterError> {
        let mut first_err = None;
        for w in &mut self.workers {
            if let Err(e) = w.kill() {
                first_err.get_or_insert(e);
            }
        }
        if let Err(e) = self.head.kill() {
            first_err.get_or_insert(e);
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        // Best effort: `stop` reports survivors, a drop cannot.
        let _ = self.kill_all();
    }
}

/// Ports reserved by binding to port 0; remembered so one cluster never gets the same twice.
#[derive(Debug, Default)]
struct PortPool {
    given: Vec<u16>,
}

impl PortPool {
    fn take(&mut self) -> Result<u16, LocalClusterError> {
        for _ in 0..100 {
            let l = TcpListener::bind(("127.0.0.1", 0)).map_err(LocalClusterError::Port)?;
            let port = l.local_addr().map_err(LocalClusterError::Port)?.port();
            if !self.given.contains(&port) {
                self.given.push(port);
                return Ok(port);
            }
        }
        Err(LocalClusterError::Port(std::io::Error::other(
            "the system keeps handing out ports already taken",
        )))
    }
}

/// The per-node ports Ray would otherwise take from fixed defaults (two nodes on one host
/// collide on the dashboard agent's 52365, the worker range 10002-19999 is shared).
fn node_ports(ports: &mut PortPool) -> Result<Vec<String>, LocalClusterError> {
    let mut args = Vec::new();
    for flag in [
        "node-manager-port",
        "object-manager-port",
        "metrics-export-port",
        "dashboard-agent-listen-port",
        "dashboard-agent-grpc-port",
        "runtime-env-agent-port",
    ] {
        args.push(format!("--{flag}={}", ports.take()?));
    }
    let workers: Vec<String> = (0..12)
        .map(|_| ports.take().map(|p| p.to_string()))
        .collect::<Result<_, _>>()?;
    args.push(format!("--worker-port-list={}", workers.join(",")));
    Ok(args)
}

fn spawn_node(
    ray_bin: &Path,
    root: &Path,
    name: &str,
    args: &[String],
    resources: &str,
) -> Result<Node, LocalClusterError> {
    let slug = name.replace(' ', "-");
    let temp = root.join(&slug);
    std::fs::create_dir_all(&temp).map_err(|source| LocalClusterError::Io {
        path: temp.clone(),
        source,
    })?;
    let log = root.join(format!("{slug}.log"));
    let out = File::create(&log).map_err(|source| LocalClusterError::Io {
        path: log.clone(),
        source,
    })?;
    let err = out.try_clone().map_err(|source| LocalClusterError::Io {
        path: log.clone(),
        source,
    })?;
    let mut cmd = Command::new(ray_bin);
    cmd.arg("start")
        .arg("--block")
        .arg("--node-ip-address=127.0.0.1")
        .arg("--num-cpus=1")
        .arg("--object-store-memory=100000000")
        .arg("--disable-usage-stats")
        .arg(format!("--resources={resources}"))
        .arg(format!("--temp-dir={}", temp.display()))
        .args(args)
        .envs(HEALTH_ENV)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            nix::unistd::setsid()
                .map(|_| ())
                .map_err(std::io::Error::from)
        });
    }
    let child = cmd.spawn().map_err(|source| LocalClusterError::Spawn {
        ray: ray_bin.to_path_buf(),
        node: name.to_string(),
        source,
    })?;
    Ok(Node {
        name: name.to_string(),
        child,
        log,
        killed: false,
    })
}

/// Waits until the node's log says its runtime started, or its process ends, or time runs out.
fn wait_started(node: &mut Node) -> Result<(), LocalClusterError> {
    let deadline = Instant::now() + START_TIMEOUT;
    loop {
        let text = std::fs::read_to_string(&node.log).unwrap_or_default();
        if text.contains(STARTED) {
            return Ok(());
        }
        let ended = node.child.try_wait().ok().flatten();
        if ended.is_some() || Instant::now() > deadline {
            let why = ended.map_or("timed out".to_string(), |s| {
                format!("`ray start` ended: {s}")
            });
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(20)..].join("\n");
            return Err(LocalClusterError::NotStarted {
                node: node.name.clone(),
                secs: START_TIMEOUT.as_secs(),
                why,
                log: node.log.clone(),
                tail,
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
