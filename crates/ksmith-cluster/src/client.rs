//! The caller's side: spawns the Python driver (`ksmith_harness.cluster_driver`, in the managed
//! environment with Ray), speaks protocol `ksmith-cluster/2` with it over pipes, and offers the
//! cluster's devices to judges as a [`Remote`].

use crate::protocol::{
    wire_task, Identity, WireConfig, WireSolution, WorkerErrorKind, WorkerRequest, WorkerResponse,
    KSMITH_VERSION, PROTOCOL,
};
use ksmith_harness::PythonEnv;
use ksmith_judge::remote::{Remote, RemoteJob, RemoteKind, RemoteOutcome};
use ksmith_judge::{Environment, JudgeConfig, JudgeError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The pinned Ray requirements, installed into the managed environment on first use.
pub const RAY_REQUIREMENTS: &str = "requirements-ray.txt";

/// Why the cluster cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The address is not one this accepts.
    #[error("cluster address `{0}`: expected ray://HOST:PORT, HOST:PORT (a Ray GCS) or auto")]
    Address(String),
    /// Ray could not be installed or the driver not started.
    #[error("cluster driver: {0}")]
    Driver(String),
    /// The driver or the cluster went away.
    #[error("cluster lost: {0}")]
    Lost(String),
    /// The driver answered something this does not understand.
    #[error("cluster driver protocol: {0}")]
    Protocol(String),
    /// No device can judge for this run.
    #[error("no usable device on the cluster: {0}")]
    NoDevice(String),
}

/// What a device is doing, as the driver reports it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Doing {
    /// The caller's request id.
    pub id: u64,
    /// What is judged (`task/solution`).
    pub label: String,
    /// Since when (unix seconds).
    pub since: f64,
}

/// A device's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeviceState {
    /// Waiting for work.
    Idle,
    /// Judging.
    Busy,
    /// Gone (its node or worker died).
    Dead,
    /// Its `ksmith` could not identify itself or differs from the caller's.
    Incompatible,
    /// Held by another ksmith process's driver (its `doing` says what it judges).
    Elsewhere,
}

/// One device of the cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Device {
    /// Driver-given id (`node/cpu0`, `node/gpu1`).
    pub id: String,
    /// Ray node id.
    pub node_id: String,
    /// The node's address.
    pub node_ip: String,
    /// `cpu` (a timing slot of a CPU node) or `gpu`.
    pub kind: String,
    /// State.
    pub state: DeviceState,
    /// What its `ksmith worker identify` said.
    pub identity: Option<Identity>,
    /// Why it is incompatible or dead.
    #[serde(default)]
    pub problem: Option<String>,
    /// The job in progress.
    #[serde(default)]
    pub doing: Option<Doing>,
    /// Jobs judged so far.
    #[serde(default)]
    pub judged: u64,
}

impl Device {
    /// The machine fingerprint it judges with (by default threads), if identified.
    pub fn fingerprint(&self) -> Option<&str> {
        self.identity
            .as_ref()
            .map(|i| i.environment.fingerprint.as_str())
    }
}

/// Something the driver reported outside a reply (a device lost or added).
#[derive(Debug, Clone)]
pub struct ClusterEvent {
    /// `device_lost` or `device_added`.
    pub kind: String,
    /// The device.
    pub device: String,
    /// Detail.
    pub message: String,
}

/// A request's final answer from the driver.
enum Reply {
    Result {
        device: String,
        response: Box<WorkerResponse>,
        attempts: Vec<Value>,
    },
    Failed {
        error: String,
        message: String,
    },
}

/// Where to connect and with what.
pub struct ConnectOptions<'a> {
    /// `ray://HOST:PORT`, `HOST:PORT` or `auto`.
    pub address: String,
    /// The managed Python environment (Ray is installed into it when missing).
    pub env: &'a PythonEnv,
    /// The `ksmith` the devices run (same version; the caller's own path by default).
    pub ksmith_bin: PathBuf,
    /// The driver's stderr (Ray's logs) goes here.
    pub log: PathBuf,
    /// How long `hello` may take (Ray start-up, every device identifying itself).
    pub hello_timeout: Duration,
    /// Only looking (`cluster status`): slots held by another process are shown as such at
    /// once instead of waited for.
    pub observe: bool,
}

/// What the reader thread shares with callers.
struct Shared {
    pending: Mutex<HashMap<u64, Sender<Reply>>>,
    control: Mutex<Option<Sender<Value>>>,
    lost: Mutex<Option<String>>,
    events: Mutex<Vec<ClusterEvent>>,
    log: PathBuf,
}

/// The driver process; dropping the last handle closes its stdin (it releases its actors and
/// exits) and reaps it.
struct Inner {
    stdin: Mutex<Option<ChildStdin>>,
    child: Mutex<Child>,
    /// One control request (hello, status) at a time.
    control_turn: Mutex<()>,
    next_id: AtomicU64,
    shared: Arc<Shared>,
}

/// A connection to a Ray cluster through the driver; cheap to clone, one per process.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
    address: String,
    devices: Vec<Device>,
    ray_version: String,
}

/// Checks the address form before anything is installed or started.
pub fn check_address(address: &str) -> Result<(), ClusterError> {
    let bad = || ClusterError::Address(address.to_string());
    if address == "auto" {
        return Ok(());
    }
    let rest = address.strip_prefix("ray://").unwrap_or(address);
    let (host, port) = rest.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || host.contains('/') || port.parse::<u16>().map_or(true, |p| p == 0) {
        return Err(bad());
    }
    Ok(())
}

impl Cluster {
    /// Installs Ray when missing, starts the driver and says hello: the cluster's devices.
    pub fn connect(
        opts: ConnectOptions<'_>,
        progress: &dyn Fn(&str),
    ) -> Result<Cluster, ClusterError> {
        check_address(&opts.address)?;
        opts.env
            .ensure_module("ray", RAY_REQUIREMENTS, progress)
            .map_err(|e| ClusterError::Driver(e.to_string()))?;
        if let Some(parent) = opts.log.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| ClusterError::Driver(format!("{}: {e}", parent.display())))?;
        }
        let log = std::fs::File::create(&opts.log)
            .map_err(|e| ClusterError::Driver(format!("{}: {e}", opts.log.display())))?;
        let mut child = Command::new(&opts.env.python)
            .args(["-u", "-m", "ksmith_harness.cluster_driver"])
            .env("PYTHONPATH", &opts.env.harness_dir)
            .current_dir(&opts.env.harness_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .spawn()
            .map_err(|e| {
                ClusterError::Driver(format!("cannot start {}: {e}", opts.env.python.display()))
            })?;
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let shared = Arc::new(Shared {
            pending: Mutex::new(HashMap::new()),
            control: Mutex::new(None),
            lost: Mutex::new(None),
            events: Mutex::new(Vec::new()),
            log: opts.log.clone(),
        });
        let inner = Arc::new(Inner {
            stdin: Mutex::new(Some(stdin)),
            child: Mutex::new(child),
            control_turn: Mutex::new(()),
            next_id: AtomicU64::new(1),
            shared: Arc::clone(&shared),
        });
        let reader = shared;
        std::thread::Builder::new()
            .name("ksmith-cluster-reader".into())
            .spawn(move || read_loop(&reader, stdout))
            .map_err(|e| ClusterError::Driver(format!("a reader thread: {e}")))?;
        let hello = inner.control(
            json!({
                "op": "hello",
                "protocol": PROTOCOL,
                "address": opts.address,
                "ksmith_bin": opts.ksmith_bin,
                "ksmith_version": KSMITH_VERSION,
                "observe": opts.observe,
            }),
            opts.hello_timeout,
        )?;
        if hello["protocol"].as_u64() != Some(u64::from(PROTOCOL)) {
            return Err(ClusterError::Protocol(format!(
                "the driver speaks protocol {}, this ksmith {PROTOCOL}",
                hello["protocol"]
            )));
        }
        let devices = parse_devices(&hello)?;
        Ok(Cluster {
            inner,
            address: opts.address,
            devices,
            ray_version: hello["ray_version"].as_str().unwrap_or("?").to_string(),
        })
    }

    /// The address connected to.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Ray's version on the driver.
    pub fn ray_version(&self) -> &str {
        &self.ray_version
    }

    /// The devices as of `hello`.
    pub fn devices(&self) -> &[Device] {
        &self.devices
    }

    /// The devices now, with what each is doing.
    pub fn status(&self) -> Result<Vec<Device>, ClusterError> {
        let v = self
            .inner
            .control(json!({"op": "status"}), Duration::from_secs(60))?;
        parse_devices(&v)
    }

    /// Events reported since the last call (devices lost or added).
    pub fn take_events(&self) -> Vec<ClusterEvent> {
        std::mem::take(&mut *lock(&self.inner.shared.events))
    }

    /// The judge-facing side for the devices of one fingerprint: `wanted`, else the largest
    /// group of identified, compatible devices.
    pub fn remote(&self, wanted: Option<&str>) -> Result<ClusterRemote, ClusterError> {
        let mut groups: BTreeMap<&str, Vec<&Device>> = BTreeMap::new();
        for d in &self.devices {
            if let (Some(fp), DeviceState::Idle | DeviceState::Busy) = (d.fingerprint(), d.state) {
                groups.entry(fp).or_default().push(d);
            }
        }
        let chosen = match wanted {
            Some(w) => groups.get_key_value(w).ok_or_else(|| {
                ClusterError::NoDevice(format!(
                    "no device with fingerprint {w}; the cluster has {}",
                    describe_groups(&groups)
                ))
            })?,
            // Most devices; ties by fingerprint, so the choice is stable.
            None => groups
                .iter()
                .max_by(|a, b| a.1.len().cmp(&b.1.len()).then(b.0.cmp(a.0)))
                .ok_or_else(|| ClusterError::NoDevice(self.why_none()))?,
        };
        let identity = chosen.1[0].identity.clone().expect("grouped by identity");
        Ok(ClusterRemote {
            cluster: self.clone(),
            identity,
            devices: chosen.1.len(),
        })
    }

    fn why_none(&self) -> String {
        if self.devices.is_empty() {
            return "it offers no device (a GPU, or a CPU node started with --resources '{\"ksmith_cpu\": 1}')".into();
        }
        self.devices
            .iter()
            .map(|d| {
                format!(
                    "{} {:?}{}",
                    d.id,
                    d.state,
                    d.problem
                        .as_deref()
                        .map(|p| format!(": {p}"))
                        .unwrap_or_default()
                )
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Sends one job to a device of `fingerprint` and waits for its answer.
    fn judge(
        &self,
        fingerprint: &str,
        label: &str,
        request: &WorkerRequest,
    ) -> Result<(String, WorkerResponse, Vec<Value>), ClusterError> {
        let id = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = channel();
        lock(&self.inner.shared.pending).insert(id, tx);
        // The reader marks the driver lost before it drops every waiter: a waiter added after
        // that sees the mark here instead of waiting forever.
        let lost = lock(&self.inner.shared.lost).is_some();
        if lost {
            lock(&self.inner.shared.pending).remove(&id);
            return Err(ClusterError::Lost(self.inner.lost_reason()));
        }
        let sent = self.inner.send(&json!({
            "op": "judge",
            "id": id,
            "fingerprint": fingerprint,
            "label": label,
            "request": request,
        }));
        if let Err(e) = sent {
            lock(&self.inner.shared.pending).remove(&id);
            return Err(e);
        }
        match rx.recv() {
            Ok(Reply::Result {
                device,
                response,
                attempts,
            }) => Ok((device, *response, attempts)),
            Ok(Reply::Failed { error, message }) => Err(match error.as_str() {
                "cluster_lost" => ClusterError::Lost(message),
                "no_device" | "rescheduled_too_often" => {
                    ClusterError::NoDevice(format!("{error}: {message}"))
                }
                _ => ClusterError::Driver(format!("{error}: {message}")),
            }),
            Err(_) => Err(ClusterError::Lost(self.inner.lost_reason())),
        }
    }
}

fn describe_groups(groups: &BTreeMap<&str, Vec<&Device>>) -> String {
    if groups.is_empty() {
        return "no identified device".into();
    }
    groups
        .iter()
        .map(|(fp, ds)| format!("{fp} ({} devices)", ds.len()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn parse_devices(v: &Value) -> Result<Vec<Device>, ClusterError> {
    serde_json::from_value(v["devices"].clone())
        .map_err(|e| ClusterError::Protocol(format!("device list: {e}")))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panicking holder leaves plain data behind; nothing to repair.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    fn send(&self, v: &Value) -> Result<(), ClusterError> {
        if let Some(why) = lock(&self.shared.lost).clone() {
            return Err(ClusterError::Lost(why));
        }
        let mut line = serde_json::to_string(v)
            .map_err(|e| ClusterError::Protocol(format!("encoding a request: {e}")))?;
        line.push('\n');
        let mut w = lock(&self.stdin);
        let Some(w) = w.as_mut() else {
            return Err(ClusterError::Lost("the connection is closed".into()));
        };
        w.write_all(line.as_bytes())
            .and_then(|_| w.flush())
            .map_err(|e| {
                ClusterError::Lost(format!(
                    "writing to the driver: {e}; {}",
                    self.lost_reason()
                ))
            })
    }

    /// A control request and its reply (the next hello/status line).
    fn control(&self, v: Value, timeout: Duration) -> Result<Value, ClusterError> {
        let _turn = lock(&self.control_turn);
        let (tx, rx) = channel();
        *lock(&self.shared.control) = Some(tx);
        // As in `Cluster::judge`: the driver may have gone before the sender was in place.
        let lost = lock(&self.shared.lost).is_some();
        if lost {
            *lock(&self.shared.control) = None;
            return Err(ClusterError::Lost(self.lost_reason()));
        }
        self.send(&v)?;
        let got = recv_timeout(&rx, timeout);
        *lock(&self.shared.control) = None;
        match got {
            Some(v) if v["op"] == "error" => Err(ClusterError::Driver(
                v["message"].as_str().unwrap_or("?").to_string(),
            )),
            Some(v) => Ok(v),
            None => {
                // Not matched on the guard itself: `lost_reason` takes the lock again.
                let lost = lock(&self.shared.lost).is_some();
                if lost {
                    Err(ClusterError::Lost(self.lost_reason()))
                } else {
                    Err(ClusterError::Driver(format!(
                        "no answer to `{}` in {} s (driver log: {})",
                        v["op"].as_str().unwrap_or("?"),
                        timeout.as_secs(),
                        self.shared.log.display()
                    )))
                }
            }
        }
    }

    /// Why the driver is gone: its exit status and the end of its log.
    fn lost_reason(&self) -> String {
        let Some(why) = lock(&self.shared.lost).clone() else {
            return "the driver stopped answering".into();
        };
        // The reader saw the end of its output; the exit status follows shortly.
        let mut status = None;
        for _ in 0..20 {
            if let Ok(Some(s)) = lock(&self.child).try_wait() {
                status = Some(s);
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        format!(
            "{why}{}{}",
            status.map(|s| format!(" ({s})")).unwrap_or_default(),
            log_tail(&self.shared.log)
                .map(|t| format!("; its log ({}) ends:\n{t}", self.shared.log.display()))
                .unwrap_or_default()
        )
    }
}

fn recv_timeout(rx: &Receiver<Value>, timeout: Duration) -> Option<Value> {
    rx.recv_timeout(timeout).ok()
}

/// Dispatches the driver's lines; when it ends, everything waiting learns why.
fn read_loop(shared: &Shared, stdout: std::process::ChildStdout) {
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        // The driver keeps stdout for the protocol; anything else is skipped.
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        match v["op"].as_str() {
            Some("result") | Some("failed") => {
                let Some(id) = v["id"].as_u64() else { continue };
                if let Some(tx) = lock(&shared.pending).remove(&id) {
                    let _ = tx.send(reply(&v));
                }
            }
            Some("event") => lock(&shared.events).push(ClusterEvent {
                kind: v["kind"].as_str().unwrap_or("?").to_string(),
                device: v["device"].as_str().unwrap_or("?").to_string(),
                message: v["message"].as_str().unwrap_or("").to_string(),
            }),
            _ => {
                if let Some(tx) = lock(&shared.control).as_ref() {
                    let _ = tx.send(v);
                }
            }
        }
    }
    *lock(&shared.lost) = Some("the driver exited".into());
    // Dropping the senders wakes every waiter; they read the reason from `lost`.
    lock(&shared.pending).clear();
    *lock(&shared.control) = None;
}

/// A `result` or `failed` line as a reply.
fn reply(v: &Value) -> Reply {
    if v["op"] != "result" {
        return Reply::Failed {
            error: v["error"].as_str().unwrap_or("failed").to_string(),
            message: v["message"].as_str().unwrap_or("").to_string(),
        };
    }
    match serde_json::from_value::<WorkerResponse>(v["response"].clone()) {
        Ok(r) => Reply::Result {
            device: v["device"].as_str().unwrap_or("?").to_string(),
            response: Box::new(r),
            attempts: v["attempts"].as_array().cloned().unwrap_or_default(),
        },
        Err(e) => Reply::Failed {
            error: "bad_response".into(),
            message: format!("a worker's response: {e}"),
        },
    }
}

fn log_tail(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let lines: Vec<&str> = text.lines().rev().take(8).collect();
    (!lines.is_empty()).then(|| lines.into_iter().rev().collect::<Vec<_>>().join("\n"))
}

impl Drop for Inner {
    fn drop(&mut self) {
        // End of stdin tells the driver to release its actors; give it a moment, then kill.
        drop(lock(&self.stdin).take());
        let mut child = lock(&self.child);
        for _ in 0..100 {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The devices of one fingerprint as a [`Remote`] for judges.
#[derive(Clone)]
pub struct ClusterRemote {
    cluster: Cluster,
    identity: Identity,
    devices: usize,
}

impl ClusterRemote {
    /// The identity of the group's devices.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// How many devices judge for this run.
    pub fn devices(&self) -> usize {
        self.devices
    }

    /// The cluster.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }
}

impl Remote for ClusterRemote {
    fn environment(&self, config: &JudgeConfig) -> Result<Environment, JudgeError> {
        // What the worker's judge will record with these settings (`Judge::new`). Whether it
        // judges without a complete sandbox is the worker's own flag, already in its identity.
        let mut e = self.identity.environment.clone();
        e.threads = config.threads;
        e.fingerprint = e.compute_fingerprint();
        Ok(e)
    }

    fn judge(&self, job: RemoteJob<'_>) -> Result<RemoteOutcome, JudgeError> {
        let task = wire_task(job.task).map_err(|e| JudgeError::Task {
            task: job.task.name.clone(),
            message: e,
        })?;
        let compare = matches!(job.kind, RemoteKind::Compare { .. });
        let request = WorkerRequest {
            protocol: PROTOCOL,
            job: job.kind,
            task,
            solutions: job.solutions.iter().map(WireSolution::from).collect(),
            config: WireConfig::from(job.config),
        };
        let label = format!(
            "{}/{}",
            job.task.name,
            job.solutions
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join("+")
        );
        let sent = std::time::Instant::now();
        let (device, response, attempts) = self
            .cluster
            .judge(&self.identity.environment.fingerprint, &label, &request)
            .map_err(|e| JudgeError::Cluster(e.to_string()))?;
        let wall = sent.elapsed().as_secs_f64();
        if !attempts.is_empty() {
            // Devices that died under this job: not the candidate's doing, and said.
            let lost: Vec<String> = attempts
                .iter()
                .map(|a| {
                    format!(
                        "{} ({})",
                        a["device"].as_str().unwrap_or("?"),
                        a["error"].as_str().unwrap_or("?")
                    )
                })
                .collect();
            lock(&self.cluster.inner.shared.events).push(ClusterEvent {
                kind: "rescheduled".into(),
                device: device.clone(),
                message: format!("{label} judged here after {}", lost.join(", ")),
            });
        }
        if !response.ok {
            let err = response.error.unwrap_or(crate::protocol::WorkerError {
                kind: WorkerErrorKind::Environment,
                backend: None,
                message: "no error given".into(),
            });
            return Err(match err.kind {
                WorkerErrorKind::Unavailable => JudgeError::Unavailable {
                    backend: backend_name(err.backend.as_deref()),
                    reason: ksmith_judge::NotRunReason::Remote,
                    why: format!("{} (on {device})", err.message),
                    built: None,
                },
                WorkerErrorKind::Task => JudgeError::Task {
                    task: job.task.name.clone(),
                    message: err.message,
                },
                WorkerErrorKind::Isolation => {
                    JudgeError::Isolation(format!("on {device}: {}", err.message))
                }
                WorkerErrorKind::Environment | WorkerErrorKind::Request => {
                    JudgeError::Cluster(format!("device {device}: {}", err.message))
                }
            });
        }
        if compare {
            let mut c = response.comparison.ok_or_else(|| {
                JudgeError::Cluster(format!("device {device} answered without a comparison"))
            })?;
            // Side by side, each result holds its share of the device's time: the queue and
            // transfer are shared out the same way, so each time line still adds up.
            let judged: f64 = c.results.iter().map(|r| r.elapsed_s).sum();
            let extra = (wall - judged).max(0.0) / c.results.len().max(1) as f64;
            for r in &mut c.results {
                r.device = Some(device.clone());
                r.time_split.cluster_s = extra;
                r.elapsed_s += extra;
            }
            Ok(RemoteOutcome::Compared(c))
        } else {
            let mut results = response.results;
            if results.len() != 1 {
                return Err(JudgeError::Cluster(format!(
                    "device {device} answered with {} results for one candidate",
                    results.len()
                )));
            }
            let mut r = results.remove(0);
            // The driver names the device (not the worker's answer); the time the job spent
            // queued and travelling is this machine's, beyond the device's own elapsed time,
            // so the split still adds up to the wall time here.
            r.device = Some(device);
            r.time_split.cluster_s = (wall - r.elapsed_s).max(0.0);
            r.elapsed_s = r.elapsed_s.max(wall);
            Ok(RemoteOutcome::Evaluated(Box::new(r)))
        }
    }
}

/// The judge's backend names are static; an unknown one from a newer worker reads `remote`.
fn backend_name(name: Option<&str>) -> &'static str {
    match name {
        Some("c") => "c",
        Some("cuda") => "cuda",
        Some("triton") => "triton",
        Some("pallas") => "pallas",
        _ => "remote",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        for ok in [
            "auto",
            "ray://127.0.0.1:10001",
            "127.0.0.1:6379",
            "ray://head:1",
        ] {
            assert!(check_address(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "ray://",
            "ray://host",
            "host:0",
            "host:99999",
            "ray://:1",
            "a/b:1",
        ] {
            assert!(check_address(bad).is_err(), "{bad}");
        }
    }
}
