"""Ray driver for `ksmith --cluster`: protocol `ksmith-cluster/2` (docs/cluster.md).

Run as `python -m ksmith_harness.cluster_driver`. It reads one JSON request per line on stdin
and writes one JSON reply per line on stdout; stdout carries nothing else (Python's own
`sys.stdout` and file descriptor 1 are pointed at stderr, so Ray's logs and stray prints land
there). Each device of the cluster is one Ray actor pinned to its node; the actor runs the
`ksmith` binary of its node (`worker identify`, `worker judge`) in a subprocess.

Death detection: a killed node's actor calls fail once the GCS marks the node dead, which is
decided by the head's `RAY_health_check_period_ms`, `RAY_health_check_timeout_ms` and
`RAY_health_check_failure_threshold` (defaults 3000 ms, 10000 ms and 5: about 15-30 s); a killed
actor or worker process fails its call at once. The driver also polls the node table and marks
every device of a node that is no longer alive `dead`, and checks the GCS port itself, so a lost
head is noticed within about two seconds (`cluster_lost`, exit 3) rather than when Ray gives up.
"""

from __future__ import annotations

import collections
import json
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

PROTOCOL = 2
# Named device actors live in this Ray namespace, one name per device slot.
NAMESPACE = "ksmith"
HELD = "in use by another ksmith process"
# How long `hello` retries slots whose previous holder is exiting.
RELEASE_WAIT_S = 10.0
# A request whose device died is rescheduled at most this many times.
MAX_RESCHEDULES = 3
# How long a device's `ksmith worker identify` may take.
IDENTIFY_TIMEOUT_S = 120.0
# How often the node table is read (new nodes, nodes gone) while nothing waits for a device.
NODE_POLL_IDLE_S = 5.0
# ... and while a request waits for a device of its fingerprint.
NODE_POLL_WAITING_S = 1.0
# How often the GCS port is probed; two failed probes in a row mean the cluster is gone.
GCS_PROBE_S = 0.5
STDERR_TAIL = 4000
# Exit codes: the cluster could not be reached at `hello`; the cluster was lost later.
EXIT_NO_CLUSTER = 2
EXIT_CLUSTER_LOST = 3


class DeviceWorker:
    """One device's actor: runs its node's `ksmith` binary. Shipped to nodes by value (see `_actor_class`)."""

    def __init__(self, ksmith_bin: str, device_id: str) -> None:
        # A node may keep its binary elsewhere; the caller's path is the default.
        self.bin = os.environ.get("KSMITH_WORKER_BIN") or ksmith_bin
        # One store per device slot of this host and user, kept across clusters and shared
        # by the nodes of one host: its roofline is measured once, its build and reference
        # caches stay warm, and its device lock keeps timings of one machine apart.
        slot = device_id.rsplit("-", 1)[-1]
        default = os.path.join(tempfile.gettempdir(), f"ksmith-worker-{os.getuid()}", slot)
        self.store = os.environ.get("KSMITH_WORKER_STORE") or default
        # `ksmith worker judge` serves request lines until its stdin ends: kept between
        # requests, so its judge (the trusted process, loaded tasks) stays warm.
        self.proc: subprocess.Popen | None = None
        self.log = os.path.join(self.store, "worker.log")
        # What `state` tells other ksmith processes (it runs while `judge` does: the actor has
        # threads for that, see `_actor_class`).
        self.identity: dict[str, Any] | None = None
        self.doing: dict[str, Any] | None = None
        self.judged = 0

    def state(self) -> dict[str, Any]:
        """Its identity and what it is judging, for `ksmith cluster status` of another process."""
        return {"identity": self.identity, "doing": self.doing, "judged": self.judged}

    def identify(self) -> dict[str, Any]:
        """The worker's IDENTITY, or the problem that kept it from giving one."""
        os.makedirs(self.store, exist_ok=True)
        try:
            # The same store as `judge`: the node's roofline is measured once, into it.
            p = subprocess.run(
                [self.bin, "--store", self.store, "worker", "identify"],
                capture_output=True,
                text=True,
                timeout=IDENTIFY_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return {"ok": False, "problem": f"cannot run `{self.bin} worker identify`: {e}"}
        if p.returncode != 0:
            return {"ok": False, "problem": f"`{self.bin} worker identify` exited with {p.returncode}: {p.stderr[-STDERR_TAIL:]}"}
        try:
            identity = json.loads(p.stdout)
        except ValueError as e:
            return {"ok": False, "problem": f"`{self.bin} worker identify` printed no JSON ({e}): {p.stdout[-STDERR_TAIL:]}"}
        if not isinstance(identity, dict):
            return {"ok": False, "problem": f"`{self.bin} worker identify` printed JSON that is not an object"}
        self.identity = identity
        return {"ok": True, "identity": identity}

    def judge(self, request: str, label: str = "", job_id: Any = None) -> dict[str, Any]:
        """Hands the request (one JSON line) to `ksmith worker judge`; its response, or its problem report."""
        self.doing = {"id": job_id, "label": label, "since": time.time()}
        try:
            return self._judge(request)
        finally:
            self.doing = None
            self.judged += 1

    def _judge(self, request: str) -> dict[str, Any]:
        os.makedirs(self.store, exist_ok=True)
        if self.proc is None or self.proc.poll() is not None:
            try:
                with open(self.log, "ab") as log:
                    self.proc = subprocess.Popen(
                        [self.bin, "--store", self.store, "worker", "judge"],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=log,
                        text=True,
                    )
            except OSError as e:
                return {"ok": False, "problem": f"cannot run `{self.bin} worker judge`: {e}"}
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(request.replace("\n", " ") + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
        except OSError:
            line = ""
        if not line:
            code = proc.wait()
            self.proc = None
            return {"ok": False, "problem": f"`ksmith worker judge` exited with {code}: {self._log_tail()}"}
        try:
            response = json.loads(line)
        except ValueError:
            proc.kill()
            self.proc = None
            return {"ok": False, "problem": f"`ksmith worker judge` printed no JSON: {line[-STDERR_TAIL:]!r} {self._log_tail()}"}
        return {"ok": True, "response": response}

    def _log_tail(self) -> str:
        try:
            with open(self.log, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - STDERR_TAIL))
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""


def actor_name(device_id: str) -> str:
    """The device's actor name: one holder per slot across every ksmith process."""
    return f"ksmith-device-{device_id}"


def _actor_class(ray: Any) -> Any:
    """The Ray actor class. Its module is pickled by value, so nodes need no `ksmith_harness`."""
    if __name__ != "__main__":
        # Run as `-m`, the module is `__main__` and cloudpickle ships it by value anyway.
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    # Two threads: `state` answers while `judge` runs (the driver sends one judge at a time).
    return ray.remote(max_concurrency=2)(DeviceWorker)


@dataclass
class Device:
    """One device of the cluster as the driver tracks it."""

    id: str
    node_id: str
    node_ip: str
    kind: str
    actor: Any
    state: str = "idle"
    identity: dict[str, Any] | None = None
    problem: str | None = None
    doing: dict[str, Any] | None = None
    judged: int = 0

    def fingerprint(self) -> str | None:
        env = (self.identity or {}).get("environment")
        return env.get("fingerprint") if isinstance(env, dict) else None

    def wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "node_id": self.node_id,
            "node_ip": self.node_ip,
            "kind": self.kind,
            "state": self.state,
            "identity": self.identity,
            "problem": self.problem,
            "doing": self.doing,
            "judged": self.judged,
        }


@dataclass
class Job:
    """A judge request from the caller, until it is answered."""

    id: Any
    fingerprint: str
    label: str
    request: str
    attempts: list[dict[str, str]] = field(default_factory=list)
    # Since when no live device of its fingerprint exists (None while one does).
    waiting_since: float | None = None


class Out:
    """The protocol's output: whole lines on the real stdout, one writer at a time."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # fd 1 is pointed at stderr below; protocol lines go to a copy of the original.
        self.stream = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        self.open_ids: set[Any] = set()

    def send(self, msg: dict[str, Any]) -> None:
        line = json.dumps(msg, separators=(",", ":"))
        with self.lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def cluster_lost(self, message: str) -> None:
        """Answers everything in flight with `cluster_lost` and ends the process with exit code 3."""
        with self.lock:
            for job_id in sorted(self.open_ids, key=str):
                line = {"op": "failed", "id": job_id, "error": "cluster_lost", "message": message, "attempts": []}
                self.stream.write(json.dumps(line, separators=(",", ":")) + "\n")
            self.stream.flush()
            log(f"cluster lost: {message}")
            os._exit(EXIT_CLUSTER_LOST)


def log(msg: str) -> None:
    print(f"[ksmith cluster driver] {msg}", file=sys.stderr, flush=True)


def read_stdin(inbox: queue.Queue) -> None:
    """Feeds stdin's lines to the main loop; None marks the end of input."""
    for line in sys.stdin:
        if line.strip():
            inbox.put(line)
    inbox.put(None)


def gcs_reachable(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=1.0):
            return True
    except (OSError, ValueError):
        return False


def watch_gcs(address: str, out: Out) -> None:
    """Ray itself may take a minute to give up on a lost GCS; two failed probes in a row suffice."""
    misses = 0
    while True:
        time.sleep(GCS_PROBE_S)
        misses = 0 if gcs_reachable(address) else misses + 1
        if misses >= 2:
            out.cluster_lost(f"the cluster's GCS at {address} does not answer")


class Driver:
    """The driver's state and its single-threaded main loop (stdin is read on a thread)."""

    def __init__(self, out: Out) -> None:
        self.out = out
        self.ray: Any = None
        self.actor_cls: Any = None
        self.hello: dict[str, Any] | None = None
        self.devices: dict[str, Device] = {}
        self.queue: collections.deque[Job] = collections.deque()
        self.inflight: dict[Any, tuple[str, Job]] = {}
        # Devices of nodes that joined late, until their identity arrives.
        self.identifying: dict[Any, Device] = {}
        self.wait_s = float(os.environ.get("KSMITH_CLUSTER_WAIT_S", "60"))
        # Slots whose named actor belongs to another ksmith process.
        self.held_elsewhere: set[str] = set()
        self.next_poll = 0.0

    # --- requests -------------------------------------------------------------------------

    def handle(self, line: str) -> None:
        try:
            msg = json.loads(line)
            op = msg["op"]
        except (ValueError, KeyError, TypeError) as e:
            log(f"ignored a line that is not a request ({e}): {line[:200]!r}")
            return
        if op == "hello":
            self.on_hello(msg)
        elif op == "judge":
            self.on_judge(msg)
        elif op == "status":
            for d in self.devices.values():
                if d.state == "elsewhere":
                    self.observe(d)
            self.out.send({"op": "status", "devices": [d.wire() for d in self.devices.values()]})
        else:
            log(f"ignored unknown op {op!r}")

    def on_hello(self, msg: dict[str, Any]) -> None:
        if self.hello is not None:
            # Already connected: a second hello only asks for the devices again.
            self.out.send({"op": "hello", "protocol": PROTOCOL, "ray_version": self.ray.__version__, "devices": [d.wire() for d in self.devices.values()]})
            return
        import ray

        self.ray = ray
        self.hello = msg
        if msg.get("protocol") != PROTOCOL:
            log(f"hello asks for protocol {msg.get('protocol')!r}; this driver speaks {PROTOCOL}")
        address = msg.get("address") or "auto"
        target = address.removeprefix("ray://")
        if target != "auto" and not gcs_reachable(target):
            # Ray would retry for minutes; nothing listening there is an answer now.
            log(f"cannot connect to the Ray cluster at {address!r}: nothing answers at {target}")
            os._exit(EXIT_NO_CLUSTER)
        try:
            if address.startswith("ray://"):
                # Ray Client: the real driver runs on the head; it takes fewer options.
                ray.init(address=address, logging_level="WARNING", log_to_driver=False)
                probe = address[len("ray://") :]
            else:
                ray.init(address=address, logging_level="WARNING", log_to_driver=False, include_dashboard=False)
                probe = ray.get_runtime_context().gcs_address
        except Exception as e:  # Ray raises ConnectionError, RuntimeError, ValueError... for a bad address
            log(f"cannot connect to the Ray cluster at {address!r}: {type(e).__name__}: {e}")
            self.out.stream.flush()
            os._exit(EXIT_NO_CLUSTER)
        self.actor_cls = _actor_class(ray)
        if probe:
            threading.Thread(target=watch_gcs, args=(probe, self.out), daemon=True).start()
        fresh = self.add_new_devices()
        # A slot whose last holder just exited is freed within moments: try those again briefly.
        # (Not for `status`, which only looks: it shows such a slot as held.)
        deadline = time.time() + (0.0 if msg.get("observe") else RELEASE_WAIT_S)
        while any(d.actor is None for d in fresh) and time.time() < deadline:
            time.sleep(0.5)
            held = [d for d in fresh if d.actor is not None]
            fresh = held + self.add_new_devices({d.id for d in held})
        for d in fresh:
            if d.actor is None:
                self.observe(d)
        pending = {d.actor.identify.remote(): d for d in fresh if d.actor is not None}
        ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=IDENTIFY_TIMEOUT_S)
        for ref in ready:
            self.take_identity(pending.pop(ref), ref)
        for d in pending.values():
            # Typically an actor that cannot be placed: its slot is held by another ksmith's driver.
            d.state, d.problem = "incompatible", f"no identity within {IDENTIFY_TIMEOUT_S:.0f} s (is its slot held by another ksmith?)"
            self.ray.kill(d.actor, no_restart=True)
        for d in fresh:
            self.devices[d.id] = d
        self.out.send(
            {
                "op": "hello",
                "protocol": PROTOCOL,
                "ray_version": ray.__version__,
                "devices": [d.wire() for d in self.devices.values()],
            }
        )

    def on_judge(self, msg: dict[str, Any]) -> None:
        job_id = msg.get("id")
        if self.hello is None:
            self.fail(Job(job_id, "", "", ""), "bad_request", "judge before hello")
            return
        try:
            job = Job(job_id, str(msg["fingerprint"]), str(msg.get("label", "")), json.dumps(msg["request"]))
        except KeyError as e:
            self.fail(Job(job_id, "", "", ""), "bad_request", f"judge lacks the field {e}")
            return
        self.out.open_ids.add(job_id)
        self.queue.append(job)

    # --- devices ----------------------------------------------------------------------------

    def add_new_devices(self, have: set[str] | None = None) -> list[Device]:
        """Actors for the device slots of alive nodes that have none yet (not yet identified);
        `have`: slots this driver already holds that are not in `devices` yet."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        known = {d.id for d in self.devices.values() if d.state != "elsewhere"} | {d.id for d in self.identifying.values()} | (have or set())
        assert self.hello is not None
        fresh = []
        for node in self.ray.nodes():
            if not node.get("Alive"):
                continue
            node_id = node["NodeID"]
            res = node.get("Resources", {})
            slots = [("gpu", i) for i in range(int(res.get("GPU", 0)))]
            slots += [("cpu", i) for i in range(int(res.get("ksmith_cpu", 0)))]
            for kind, i in slots:
                dev_id = f"{node_id[:12]}-{kind}{i}"
                if dev_id in known:
                    continue
                opts: dict[str, Any] = {
                    "num_cpus": 0,
                    "max_restarts": 0,
                    "max_task_retries": 0,
                    "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
                }
                if kind == "gpu":
                    opts["num_gpus"] = 1
                else:
                    opts["resources"] = {"ksmith_cpu": 1}
                # Named, so that another ksmith process can ask what it does (`status`) and a
                # slot held by one driver is seen as such by the others at once.
                opts["name"], opts["namespace"] = actor_name(dev_id), NAMESPACE
                try:
                    # Looked up first: creating an actor under a name that is taken does not
                    # always fail at once, and a handle to another driver's actor must never
                    # be used (or killed) here.
                    self.ray.get_actor(actor_name(dev_id), namespace=NAMESPACE)
                    taken = True
                except ValueError:
                    taken = False
                try:
                    if taken:
                        raise ValueError(f"{actor_name(dev_id)} exists")
                    actor = self.actor_cls.options(**opts).remote(self.hello.get("ksmith_bin", "ksmith"), dev_id)
                except ValueError:
                    # The name is taken: another ksmith process's driver holds this slot.
                    self.held_elsewhere.add(dev_id)
                    fresh.append(Device(dev_id, node_id, node.get("NodeManagerAddress", ""), kind, None, state="elsewhere", problem=HELD))
                    continue
                self.held_elsewhere.discard(dev_id)
                fresh.append(Device(dev_id, node_id, node.get("NodeManagerAddress", ""), kind, actor))
        return fresh

    def observe(self, d: Device) -> None:
        """Fills a slot held by another ksmith process with what its actor says it does."""
        try:
            other = self.ray.get_actor(actor_name(d.id), namespace=NAMESPACE)
            st = self.ray.get(other.state.remote(), timeout=5)
        except Exception as e:  # released meanwhile, or its node is going away
            d.doing, d.problem = None, f"{HELD} (no answer: {type(e).__name__})"
            return
        d.identity = st.get("identity")
        d.doing = st.get("doing")
        d.judged = int(st.get("judged") or 0)
        d.state, d.problem = "elsewhere", HELD

    def take_identity(self, d: Device, ref: Any) -> None:
        assert self.hello is not None
        try:
            got = self.ray.get(ref)
        except self.ray.exceptions.RayError as e:
            d.state, d.problem = "dead", f"the device's actor died before it identified: {e}"
            return
        if not got["ok"]:
            d.state, d.problem = "incompatible", got["problem"]
            return
        ident = got["identity"]
        d.identity = ident
        if ident.get("protocol") != self.hello.get("protocol", PROTOCOL):
            d.state, d.problem = "incompatible", f"worker speaks protocol {ident.get('protocol')!r}, the caller {self.hello.get('protocol')!r}"
        elif ident.get("ksmith_version") != self.hello.get("ksmith_version"):
            d.state, d.problem = "incompatible", f"worker is ksmith {ident.get('ksmith_version')!r}, the caller {self.hello.get('ksmith_version')!r}"
        else:
            d.state = "idle"

    def poll_nodes(self) -> None:
        """Marks devices of vanished nodes dead and starts actors on nodes that joined."""
        alive = {n["NodeID"] for n in self.ray.nodes() if n.get("Alive")}
        for d in self.devices.values():
            if d.node_id not in alive and d.state in ("idle", "incompatible", "elsewhere"):
                # A busy device is declared dead by its failing call (its request is rescheduled then).
                self.lose(d, "its node left the cluster")
        for d in self.add_new_devices():
            if d.actor is None:
                self.devices.setdefault(d.id, d)
            else:
                self.identifying[d.actor.identify.remote()] = d

    def lose(self, d: Device, why: str) -> None:
        was_usable = d.state in ("idle", "busy")
        d.state, d.doing, d.problem = "dead", None, why
        try:
            if d.actor is not None:
                self.ray.kill(d.actor, no_restart=True)
        except Exception as e:  # the actor may already be gone with its node
            log(f"kill of {d.id}'s actor: {e}")
        if was_usable:
            self.out.send({"op": "event", "kind": "device_lost", "device": d.id, "message": why})

    def live_for(self, fingerprint: str) -> list[Device]:
        return [d for d in self.devices.values() if d.state in ("idle", "busy") and d.fingerprint() == fingerprint]

    # --- the loop ---------------------------------------------------------------------------

    def dispatch(self) -> None:
        now = time.time()
        waiting = collections.deque()
        while self.queue:
            job = self.queue.popleft()
            live = self.live_for(job.fingerprint)
            if not live:
                job.waiting_since = job.waiting_since or now
                if now - job.waiting_since >= self.wait_s:
                    self.fail(job, "no_device", f"no live device of fingerprint {job.fingerprint} joined within {self.wait_s:g} s")
                else:
                    waiting.append(job)
                continue
            job.waiting_since = None
            idle = [d for d in live if d.state == "idle"]
            if not idle:
                waiting.append(job)
                continue
            d = idle[0]
            d.state = "busy"
            d.doing = {"id": job.id, "label": job.label, "since": now}
            self.inflight[d.actor.judge.remote(job.request, job.label, job.id)] = (d.id, job)
        self.queue = waiting

    def collect(self, ref: Any) -> None:
        dev_id, job = self.inflight.pop(ref)
        d = self.devices[dev_id]
        ex = self.ray.exceptions
        try:
            got = self.ray.get(ref)
        except ex.RayTaskError as e:
            # The actor's own code raised: not a dead device, and not worth another device.
            d.state, d.doing = "idle", None
            self.fail(job, "bad_request", f"the device's actor failed: {e}")
            return
        except ex.RayError as e:
            self.lose(d, f"died while judging {job.label or job.id}: {type(e).__name__}")
            job.attempts.append({"device": d.id, "error": f"{type(e).__name__}: {str(e)[:500]}"})
            if len(job.attempts) > MAX_RESCHEDULES:
                self.fail(job, "rescheduled_too_often", f"{len(job.attempts)} devices died while judging this request")
            else:
                self.queue.appendleft(job)
            return
        d.state, d.doing = "idle", None
        d.judged += 1
        if got["ok"]:
            self.out.open_ids.discard(job.id)
            self.out.send({"op": "result", "id": job.id, "device": d.id, "response": got["response"], "attempts": job.attempts})
        else:
            self.fail(job, "bad_request", got["problem"])

    def fail(self, job: Job, error: str, message: str) -> None:
        self.out.open_ids.discard(job.id)
        self.out.send({"op": "failed", "id": job.id, "error": error, "message": message, "attempts": job.attempts})

    def step(self) -> None:
        """One round: start what can start, collect what finished, watch the nodes."""
        self.dispatch()
        refs = list(self.inflight) + list(self.identifying)
        if refs:
            ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0.05)
            for ref in ready:
                if ref in self.inflight:
                    self.collect(ref)
                else:
                    d = self.identifying.pop(ref)
                    self.take_identity(d, ref)
                    self.devices[d.id] = d
                    if d.state == "idle":
                        self.out.send({"op": "event", "kind": "device_added", "device": d.id, "message": f"node {d.node_ip}"})
        now = time.time()
        if now >= self.next_poll:
            self.poll_nodes()
            waiting = any(j.waiting_since for j in self.queue)
            self.next_poll = now + (NODE_POLL_WAITING_S if waiting else NODE_POLL_IDLE_S)
            self.dispatch()

    def run(self) -> int:
        inbox: queue.Queue = queue.Queue()
        threading.Thread(target=read_stdin, args=(inbox,), daemon=True).start()
        while True:
            busy = self.ray is not None and (self.inflight or self.identifying or self.queue)
            try:
                line = inbox.get(timeout=0.01 if busy else 0.2)
            except queue.Empty:
                line = ""
            if line is None:
                break
            if line:
                self.handle(line)
                if self.ray is not None:
                    # Start what this request allows before reading the next one.
                    self.dispatch()
                continue
            if self.ray is not None:
                try:
                    self.step()
                except ConnectionError as e:
                    # Ray Client's way of saying the cluster is gone (after its reconnect grace period).
                    self.out.cluster_lost(f"lost the connection to the cluster: {e}")
        self.shutdown()
        return 0

    def shutdown(self) -> None:
        if self.ray is None:
            return
        for d in list(self.devices.values()) + list(self.identifying.values()):
            if d.actor is None:
                continue
            try:
                self.ray.kill(d.actor, no_restart=True)
            except Exception as e:  # a dead node's actor
                log(f"kill of {d.id}'s actor: {e}")
        self.ray.shutdown()


def main() -> int:
    out = Out()
    return Driver(out).run()


if __name__ == "__main__":
    sys.exit(main())
