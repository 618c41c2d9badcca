#!/usr/bin/env python3
"""The gateway's end-to-end run: a Curio cluster's work through the whole fleet, with an agent
and the manager killed on the way.

  1. market-sim (a healthy scenario, --spawn-agents: real `proverfleet agent` processes with
     the sim prover, time-scaled); a stand-in for the operator's own cuzk daemon
     (curio_cluster.py --serve-local-cuzk, which proves PoSt); `serve` with the autopilot on and
     the cuzk-compatible gateway on a fixed --grpc-listen port (so Curio nodes and agents find
     the restarted manager), configured with [gateway] local_cuzk (that daemon), curio_nodes
     and curio_max_pending.
  2. curio_cluster.py (stubs generated from the proto) acts as --nodes Curio nodes doing what
     Curio's code does: only unary `Prove`, at most MaxPending calls per node, no client retry,
     a failed task given back to the harmony table and retried by any node up to its kind's
     MaxFailures, with the same request_id. The mix (--mix) holds PoRep and snap (proved by the
     fleet) and WindowPoSt / WinningPoSt (relayed by the gateway to the local cuzk).
  3. Once jobs are being proved: SIGKILL the agent of an instance that holds a job in state
     proving. Later (a share of the jobs done): SIGKILL serve, wait, restart it on the same
     database and ports.
  4. Checks: every task completed with its own proof (the fleet's: sim proof of its input; PoSt:
     the local cuzk's proof of its input), no wrong proof; the store holds exactly one job per
     request_id, every one done with the proof digest of that proof, and no PoSt job at all;
     the local cuzk proved the PoSt; the killed agent's job was leased again and finished;
     after pausing the autopilot and destroying everything, market-sim lists none of our
     instances and every row is destroyed; no process of the run survives its teardown.
     Prints `curio_e2e jobs_lost=.. duplicate_jobs=.. wrong_proofs=.. post_in_fleet_queue=..
     tries_exhausted=.. tries_exhausted_in_serve_outage=..`; the first five must be 0.
     Curio gives up a task after MaxFailures tries (snap 3, WdPost 5, WinPost 1, none of them
     waiting between tries), so tasks whose every try failed while serve was deliberately down
     (from its SIGKILL to --outage-grace-s after its restart) are what real Curio would lose to
     that restart: they are counted in tries_exhausted_in_serve_outage, not tries_exhausted.
  5. With --second-run-without-local-cuzk: serve restarted with no local_cuzk; one WinningPoSt
     Prove must be refused at once (FAILED_PRECONDITION naming local_cuzk) and leave no job.

With --replicas N (N >= 2): N `serve` replicas on the same database, configuration and
VAST_API_KEY (working directory: the data directory, so they share the operator token and the
job inputs), each on its own HTTP and gRPC port, with [replicas] lease_ttl_s = 5. Two TCP load
balancers stand in front of them as an operator runs them (docs/operating.md, "A load balancer
in front"): one over the replicas' HTTP ports (serve's --public-url: the agents' manager, and
this script's operator API) and one over their gRPC ports (the Curio nodes' [Cuzk] Address).
Each balancer is a child process of this script (--balancer): it hands each connection to the
next replica in turn that accepts a TCP connection (a refused one is skipped: its health check)
and pipes the bytes both ways. Instead of serve, the replica that leads is SIGKILLed
(GET /healthz/leader on each replica's own port), kept down --serve-down-s and restarted with
the same arguments; another replica must lead meanwhile. Curio must then lose no task at all:
tries_exhausted + tries_exhausted_in_serve_outage must be 0 (and --figures-out's
curio_tries_exhausted is that sum).

With --upgrade: instead of the SIGKILL, a planned upgrade mid-run (docs/operating.md, "Restarts
and upgrades"): a second `serve --takeover` with the same arguments receives the running serve's
sockets and leads; the old one answers the calls it holds and must exit 0. Meanwhile a probe
(curio_cluster.py --probe) calls GetStatus every 0.1 s, on a channel kept open and on new ones.
No Curio call may fail: Curio retries 0, probe failures 0 (--figures-out's
curio_upgrade_failed_calls is their sum); the probe's longest call is the upgrade's stall.

Usage: gateway_e2e.py --binary build/proverfleet --source . [--jobs 200] [--time-scale 30]
       [--nodes 2] [--max-pending 10] [--mix porep=0.8,snap=0.1,wdpost=0.05,winpost=0.05]
       [--second-run-without-local-cuzk] [--replicas 2]
       [--db sqlite | --db postgres://... | --db pg-fresh] [--keep] [--result out.json]
--db: the store serve runs on: a SQLite file in the run directory (default), a PostgreSQL URL
(an empty database; no password on the command line), or pg-fresh: a new database on the
PostgreSQL server whose URL is in $PF_TEST_PG_URL_FILE (ctest's pg_server_start fixture).
Exit 0 when every check passed, 1 when one failed, 2 when the run could not be carried out.
"""

import argparse
import collections
import ctypes
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

PR_SET_PDEATHSIG = 1
POST_STORE_KINDS = ("window-post", "winning-post")


def log(msg):
    print("e2e: [%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


class RunError(Exception):
    """The run itself could not be carried out (exit 2)."""


def free_port():
    """A port on 127.0.0.1 that is free now and below the kernel's ephemeral range
    (tests/support/free_port.h says why): one from bind(0) may be handed to any other process's
    bind(0) or outgoing connection before serve binds it. In CI (2026-12-07) another test's
    HTTP server got the port chosen for serve's gateway and answered Curio's first calls."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ceiling = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ceiling = 32768
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(10000, ceiling)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RunError("no free port on 127.0.0.1 below the ephemeral range (%d)" % ceiling)


def held_listening_socket():
    """A listening socket on 127.0.0.1 that this script keeps open across serve's restarts."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(1024)
    s.set_inheritable(True)
    return s


def die_with_parent():
    # The child gets SIGKILL when this script dies, whatever kills it.
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Child:
    """A child process in its own process group, its output in a log file."""

    def __init__(self, name, argv, log_path, env_changes, cwd=None, pass_fds=()):
        self.name = name
        self.log_path = log_path
        env = dict(os.environ)
        for k, v in env_changes.items():
            if v is None:
                env.pop(k, None)
            else:
                env[k] = v
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                     preexec_fn=die_with_parent, cwd=cwd, pass_fds=pass_fds)

    def wait_for(self, pattern, timeout):
        end = time.time() + timeout
        rx = re.compile(pattern)
        while time.time() < end:
            with open(self.log_path, "rb") as f:
                text = f.read().decode(errors="replace")
            m = rx.search(text)
            if m:
                return m
            if self.proc.poll() is not None:
                raise RunError("%s exited (%s) before printing %r; log tail:\n%s" %
                               (self.name, self.proc.returncode, pattern, text[-3000:]))
            time.sleep(0.2)
        raise RunError("%s did not print %r within %d s" % (self.name, pattern, timeout))

    def running(self):
        return self.proc.poll() is None

    def kill(self):
        if self.running():
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self, grace=15):
        if self.running():
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        self.log.close()

    def tail(self, n=3000):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")[-n:]


class Balancer:
    """A TCP load balancer over `backends` (HOST:PORT each), run in its own process
    (`gateway_e2e.py --balancer ...`): each accepted connection goes to the next backend in turn
    (round robin) that accepts a TCP connection, a refused one being skipped (its health check),
    and bytes are piped both ways until either side closes. Counts go to `stats_path` on
    SIGTERM."""

    def __init__(self, name, listen, backends, stats_path=None):
        self.name = name
        self.backends = []
        for b in backends:
            host, port = b.rsplit(":", 1)
            self.backends.append((host, int(port)))
        self.stats_path = stats_path
        host, port = listen.rsplit(":", 1)
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, int(port)))
        self.sock.listen(512)
        self.address = "%s:%d" % self.sock.getsockname()[:2]
        self.lock = threading.Lock()
        self.turn = 0
        self.open = set()
        self.stats = collections.OrderedDict([
            ("accepted", 0), ("routed", collections.Counter()), ("refused", collections.Counter()),
            ("unrouted", 0), ("max_open", 0)])

    def serve_forever(self):
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.route, args=(client,), daemon=True).start()

    def route(self, client):
        with self.lock:
            first = self.turn
            self.turn = (self.turn + 1) % len(self.backends)
            self.stats["accepted"] += 1
        for i in range(len(self.backends)):
            backend_addr = self.backends[(first + i) % len(self.backends)]
            name = "%s:%d" % backend_addr
            try:
                backend = socket.create_connection(backend_addr, timeout=3)
            except OSError as e:
                with self.lock:
                    self.stats["refused"][name] += 1
                    n = self.stats["refused"][name]
                if n <= 5 or n % 50 == 0:
                    log("%s: backend %s refused (%s; %d so far), trying the next" %
                        (self.name, name, e, n))
                continue
            backend.settimeout(None)
            for s in (client, backend):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self.lock:
                self.stats["routed"][name] += 1
                self.open.add(client)
                self.open.add(backend)
                self.stats["max_open"] = max(self.stats["max_open"], len(self.open) // 2)
            self.pipe(client, backend)
            return
        with self.lock:
            self.stats["unrouted"] += 1
        log("%s: no backend accepted a connection" % self.name)
        client.close()

    def pipe(self, client, backend):
        def pump(src, dst, from_backend):
            reset = False
            try:
                while True:
                    data = src.recv(65536)
                    if not data:
                        break
                    dst.sendall(data)
            except OSError:
                reset = True
            # The backend closed (a server does not half-close) or either side was reset: end
            # the connection both ways. The client closed its side: pass that on and let the
            # backend answer and close.
            ends = ((src, socket.SHUT_RDWR), (dst, socket.SHUT_RDWR)) if from_backend or reset \
                else ((dst, socket.SHUT_WR),)
            for sock, how in ends:
                try:
                    sock.shutdown(how)
                except OSError:
                    pass

        up = threading.Thread(target=pump, args=(client, backend, False), daemon=True)
        up.start()
        pump(backend, client, True)
        up.join()
        with self.lock:
            self.open.discard(client)
            self.open.discard(backend)
        client.close()
        backend.close()

    def write_stats(self):
        if not self.stats_path:
            return
        with self.lock:
            out = dict(self.stats, address=self.address,
                       backends=["%s:%d" % b for b in self.backends])
        with open(self.stats_path + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(self.stats_path + ".tmp", self.stats_path)


def run_balancer(o):
    """`--balancer NAME --listen HOST:PORT --backends A,B --stats FILE`: the balancer process."""
    b = Balancer(o.balancer, o.listen, [x for x in o.backends.split(",") if x], o.stats)

    def on_term(signum, frame):
        b.write_stats()
        os._exit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    print("balancer %s listening on %s for %s" % (o.balancer, b.address, o.backends), flush=True)
    b.serve_forever()
    return 0


class Replica:
    """One `serve` of the run: its ports, its process (None before its first start) and how
    many times it was started (its log files: serve-r<index>-<generation>.log)."""

    def __init__(self, index, http_port, grpc_port, work_dir):
        self.index = index
        self.http_port = http_port
        self.grpc_port = grpc_port
        self.dir = work_dir  # its working directory: its [jobs] data_dir on a server database
        self.url = "http://127.0.0.1:%d" % http_port
        self.child = None
        self.generation = 0


def fresh_pg_database():
    """A new empty database on the server named in $PF_TEST_PG_URL_FILE; its URL."""
    url_file = os.environ.get("PF_TEST_PG_URL_FILE")
    if not url_file or not os.path.exists(url_file):
        raise RunError("--db pg-fresh: $PF_TEST_PG_URL_FILE names no PostgreSQL server URL "
                       "(run under ctest, whose pg_server_start fixture writes it)")
    with open(url_file) as f:
        admin_url = f.read().strip()
    name = "pf_e2e_%d_%s" % (os.getpid(), os.urandom(4).hex())
    done = subprocess.run(["psql", admin_url, "-v", "ON_ERROR_STOP=1", "-qc",
                           "CREATE DATABASE " + name], capture_output=True, text=True)
    if done.returncode != 0:
        raise RunError("creating database %s: %s" % (name, done.stderr.strip()))
    return admin_url[:admin_url.rindex("/") + 1] + name


def http_json(method, url, token=None, body=None, timeout=30):
    """(status, JSON body or text); (0, reason) when nothing answered."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode(errors="replace")
    except (urllib.error.URLError, OSError) as e:
        return 0, str(e)
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


def config_text(scale, lease_s, local_cuzk, curio_nodes, curio_max_pending, lease_ttl_s=None):
    """Manager settings for a scaled-time fleet, as `proverfleet demo` writes them (deadlines
    divided by the time scale, with floors for real process start-up), and the gateway's view of
    the Curio cluster: its nodes and their MaxPending, and the operator's own cuzk for PoSt
    (local_cuzk "" = none: PoSt is refused). lease_ttl_s: [replicas] lease_ttl_s (replicas only).
    """

    def scaled(seconds, floor):
        return "%d" % max(floor, round(seconds / scale))

    return "\n".join([
        "[deploy]", "heartbeat_s = 2", "",
        "[autopilot]", "enabled = true", "interval_s = 3", "max_instances = 4",
        "max_concurrent_benchmarks = 4", "max_rents_per_decision = 4", "",
        "[lifecycle]",
        "boot_loading_max_s = " + scaled(30 * 60, 60),
        "boot_register_grace_s = " + scaled(20 * 60, 60),
        "registered_max_s = " + scaled(20 * 60, 60),
        "params_min_s = " + scaled(60, 60),
        "params_max_s = " + scaled(2 * 3600, 120),
        "warmup_max_s = " + scaled(30 * 60, 60),
        "bench_min_s = " + scaled(10 * 60, 60),
        "bench_max_s = " + scaled(3600, 120),
        # Longer than serve is down for: a manager restart must not look like lost hosts.
        "heartbeat_timeout_s = 30",
        "market_unknown_grace_s = " + scaled(10 * 60, 30),
        "destroy_retry_s = 3", "",
        "[acceptance]", "max_seconds = " + scaled(3600, 120), "",
        "[jobs]", "lease_s = %d" % lease_s,
        'proof_check = "sim"',  # market-sim's agents run the sim prover
        "",
        "[gateway]", "local_cuzk = %s" % json.dumps(local_cuzk),
        "curio_nodes = %d" % curio_nodes, "curio_max_pending = %d" % curio_max_pending, "",
    ] + ([] if lease_ttl_s is None else
         ["[replicas]", "lease_ttl_s = %d" % lease_ttl_s, ""])) + "\n"


class Run:
    def __init__(self, o):
        self.o = o
        self.dir = tempfile.mkdtemp(prefix="pf-e2e-")
        self.data = os.path.join(self.dir, "data")
        self.work = os.path.join(self.dir, "market-sim")
        os.makedirs(self.data, mode=0o700)
        self.key = "mkt-" + os.urandom(12).hex()
        # --supervised: this script holds serve's listening sockets as systemd would
        # (deploy/systemd/, socket activation) and hands them to every serve it starts; while
        # serve is down the kernel accepts calls into their backlogs.
        self.held_sockets = None
        if o.supervised:
            self.held_sockets = [held_listening_socket() for _ in ("http", "grpc")]
            self.http_port, self.grpc_port = (s.getsockname()[1] for s in self.held_sockets)
        else:
            self.http_port = free_port()
            self.grpc_port = free_port()
        self.sim = None
        # The run's `serve` processes: one (today's run), or --replicas on one database, each on
        # its own ports, behind two balancers (HTTP and gRPC).
        if o.replicas == 1:
            self.replicas = [Replica(0, self.http_port, self.grpc_port, self.data)]
        else:
            # --separate-dirs: each its own working directory, as on its own host (issue 29).
            self.replicas = [
                Replica(i, free_port(), free_port(),
                        os.path.join(self.dir, "replica-%d" % i) if o.separate_dirs else self.data)
                for i in range(o.replicas)]
            for r in self.replicas:
                os.makedirs(r.dir, mode=0o700, exist_ok=True)
        self.balancers = {}  # "http" / "grpc": Child running a Balancer
        self.grpc_target = "127.0.0.1:%d" % self.grpc_port  # the Curio nodes' [Cuzk] Address
        self.client = None
        self.local_cuzk = None
        self.local_cuzk_addr = None
        self.local_stats = os.path.join(self.dir, "local-cuzk.json")
        self.outages = []  # (SIGKILL of serve, restarted serve listening), wall-clock
        self.market_url = None
        self.url = "http://127.0.0.1:%d" % self.http_port
        self.token = None
        self.failures = []
        self.facts = collections.OrderedDict()
        self.serve_generation = 0
        self.public_url = None  # serve's --public-url (replicas: the HTTP balancer)
        self.db = None  # what serve's --db gets: chosen by run()

    # --- processes -------------------------------------------------------------------------
    def start_sim(self):
        o = self.o
        scenario = o.scenario or os.path.join(o.source, "tests/fixtures/scenarios/chaos-healthy.json")
        self.sim = Child("market-sim", [
            o.binary, "market-sim", "--scenario", scenario, "--listen", "127.0.0.1:0",
            "--time-scale", str(o.time_scale), "--spawn-agents", "--work-dir", self.work,
            "--param-stand-in-mib", "1", "--param-min-kib-s", "512", "--quiet",
        ], os.path.join(self.dir, "market-sim.log"), {"PROVERFLEET_MARKET_SIM_API_KEY": self.key})
        m = self.sim.wait_for(r"market-sim listening on (http://[0-9.]+:[0-9]+)", 60)
        self.market_url = m.group(1)

    @property
    def serve(self):
        """The one serve of a run without replicas."""
        return self.replicas[0].child

    def start_serve(self):
        """Starts every replica (the first one alone until it leads, so that the leader is
        known and the operator token is created once)."""
        for r in self.replicas:
            self.start_replica(r)
            if len(self.replicas) > 1 and r.index == 0:
                self.wait_leader(60)

    def start_replica(self, r, extra=()):
        self.serve_generation += 1
        r.generation += 1
        o = self.o
        argv = [
            o.binary, "serve", "--config", os.path.join(self.dir, "proverfleet.toml"),
            "--listen", "127.0.0.1:%d" % r.http_port,
            "--grpc-listen", "127.0.0.1:%d" % r.grpc_port,
            "--db", self.db, "--vast-url", self.market_url,
            "--params-manifest", self.market_url + "/proverfleet-sim/params.json",
            "--autopilot", "true", "--reconcile-interval", "1", "--tick-interval", "0.5",
        ]
        if self.public_url:
            # --replica-url / --replica-grpc: their defaults (the listen addresses) fit one host.
            argv += ["--public-url", self.public_url]
        argv += list(extra)
        pass_fds = ()
        if self.held_sockets:
            # As systemd starts it: the sockets as fds 3 and 4, named, LISTEN_PID its own pid
            # (set by the process itself before exec); --listen and --grpc-listen give way.
            fds = [s.fileno() for s in self.held_sockets]
            argv = ["/bin/sh", "-c",
                    "exec 3<&%d 4<&%d; export LISTEN_PID=$$ LISTEN_FDS=2 "
                    "LISTEN_FDNAMES=http:grpc; exec \"$@\"" % tuple(fds), "sh"] + argv
            pass_fds = tuple(fds)
        log_name = ("serve-%d.log" % self.serve_generation if len(self.replicas) == 1 else
                    "serve-r%d-%d.log" % (r.index, r.generation))
        r.child = Child("serve" if len(self.replicas) == 1 else "serve replica %d" % r.index,
                        argv, os.path.join(self.dir, log_name),
                        {"VAST_API_KEY": self.key, "PROVERFLEET_TOKEN": None,
                         "PROVERFLEET_DB": None},
                        cwd=r.dir, pass_fds=pass_fds)
        r.child.wait_for(r"proverfleet serve listening on", 60)
        # Curio's calls must reach this serve's gateway, not whatever else holds its port: a
        # gateway whose port is taken says so and retries its bind at every lease renewal.
        try:
            r.child.wait_for(
                r"proverfleet gateway listening on 127\.0\.0\.1:%d\b" % r.grpc_port, 30)
        except RunError as e:
            raise RunError("serve's gateway does not listen on port %d: %s" % (r.grpc_port, e))
        # Every replica runs in the data directory (or, --separate-dirs, its own): on SQLite the
        # token file lies beside the database, so they all share it; on PostgreSQL the first
        # creates it in its working directory and the others serve the recorded token.
        with open(os.path.join(self.replicas[0].dir, "operator.token")) as f:
            self.token = f.readline().strip()
        if not self.token:
            raise RunError("serve wrote no operator token")

    def start_balancers(self):
        """The operator's TCP load balancers in front of the replicas (docs/operating.md, "A
        load balancer in front"): HTTP (agents, operator API) and gRPC (Curio)."""
        for kind in ("http", "grpc"):
            ports = [r.http_port if kind == "http" else r.grpc_port for r in self.replicas]
            b = Child("balancer-" + kind, [
                sys.executable, os.path.abspath(__file__), "--balancer", kind,
                "--listen", "127.0.0.1:0",
                "--backends", ",".join("127.0.0.1:%d" % p for p in ports),
                "--stats", os.path.join(self.dir, "balancer-%s.json" % kind),
            ], os.path.join(self.dir, "balancer-%s.log" % kind), {})
            m = b.wait_for(r"balancer %s listening on ([0-9.]+:[0-9]+)" % kind, 30)
            self.balancers[kind] = (b, m.group(1))
        self.public_url = "http://" + self.balancers["http"][1]
        self.url = self.public_url
        self.grpc_target = self.balancers["grpc"][1]

    def leads(self, r):
        """Whether replica r says it leads (GET /healthz/leader on its own port: 200 / 503)."""
        if r.child is None or not r.child.running():
            return False
        status, _ = http_json("GET", r.url + "/healthz/leader", timeout=5)
        return status == 200

    def wait_leader(self, timeout):
        """The one replica that leads, waiting up to `timeout` s for there to be exactly one."""
        end = time.time() + timeout
        while True:
            leaders = [r for r in self.replicas if self.leads(r)]
            if len(leaders) == 1:
                return leaders[0]
            if time.time() > end:
                raise RunError("no single leader within %d s (leading: %s); replica logs:\n%s" % (
                    timeout, [r.index for r in leaders],
                    "\n".join(r.child.tail(1500) for r in self.replicas if r.child)))
            time.sleep(0.2)

    def replica_view(self, r):
        status, body = http_json("GET", r.url + "/api/v1/fleet", self.token, timeout=5)
        if status == 200 and isinstance(body, dict):
            return body.get("replica")
        return {"status": status, "body": str(body)[:200]}

    def cluster_script(self):
        return os.path.join(self.o.source, "tests/e2e/curio_cluster.py")

    def start_local_cuzk(self):
        """The operator's own cuzk daemon (a stand-in that proves PoSt): what local_cuzk names."""
        self.local_cuzk = Child("local-cuzk", [
            sys.executable, self.cluster_script(), "--serve-local-cuzk", "127.0.0.1:0",
            "--local-cuzk-stats", self.local_stats,
            "--proto-dir", os.path.join(self.o.source, "proto"),
        ], os.path.join(self.dir, "local-cuzk.log"), {})
        m = self.local_cuzk.wait_for(r"local-cuzk listening on ([0-9.]+:[0-9]+)", 60)
        self.local_cuzk_addr = m.group(1)

    def write_config(self, local_cuzk):
        o = self.o
        with open(os.path.join(self.dir, "proverfleet.toml"), "w") as f:
            f.write(config_text(o.time_scale, o.lease_s, local_cuzk, o.nodes, o.max_pending,
                                lease_ttl_s=o.lease_ttl_s if o.replicas > 1 else None))

    def start_client(self):
        o = self.o
        self.client_summary = os.path.join(self.dir, "client.json")
        self.client = Child("curio-cluster", [
            sys.executable, self.cluster_script(),
            "--target", self.grpc_target, "--nodes", str(o.nodes),
            "--jobs", str(o.jobs), "--mix", o.mix,
            "--max-pending", str(o.max_pending), "--summary", self.client_summary,
            "--proto-dir", os.path.join(o.source, "proto"), "--give-up-s", str(o.give_up_s),
            "--drain-s", "30", "--prove-timeout-s", "600",
            "--vanilla-bytes", str(o.vanilla_bytes),
        ], os.path.join(self.dir, "client.log"), {})

    # --- the operator API and the market ---------------------------------------------------
    def api(self, method, path, body=None):
        return http_json(method, self.url + path, self.token, body)

    def api_get(self, path, tries=40):
        last = None
        for _ in range(tries):
            status, body = self.api("GET", path)
            if status == 200:
                return body
            last = (status, body)
            time.sleep(0.5)
        raise RunError("GET %s kept failing: %s" % (path, str(last)[:300]))

    def jobs(self):
        body = self.api_get("/api/v1/jobs?limit=%d" % min(1000, self.o.jobs * 4 + 100))
        if isinstance(body, dict):
            body = body.get("jobs", [])
        if not isinstance(body, list):
            raise RunError("GET /api/v1/jobs: not a list: %s" % str(body)[:300])
        return body

    def instances(self):
        return self.api_get("/api/v1/instances?all=true")

    def market_instances(self):
        out, token = [], ""
        for _ in range(1000):
            path = "/api/v1/instances/?limit=25" + ("&after_token=" + token if token else "")
            for _ in range(40):
                status, body = http_json("GET", self.market_url + path, self.key)
                if status == 200 and isinstance(body, dict):
                    break
                time.sleep(0.1)
            else:
                raise RunError("market-sim GET %s kept failing" % path)
            out.extend(body.get("instances", []))
            token = body.get("next_token") or ""
            if not isinstance(token, str) or not token:
                break
        return [i for i in out if str(i.get("label") or "").startswith("proverfleet:")]

    # --- the run ---------------------------------------------------------------------------
    def check(self, ok, what):
        if not ok:
            self.failures.append(what)
            log("FAIL: " + what)
        return ok

    def run(self):
        o = self.o
        self.start_local_cuzk()
        self.write_config(self.local_cuzk_addr)
        # serve runs in the data directory: a server database's operator token and job inputs
        # go there (a SQLite file's go next to it, the same place).
        if o.db in ("", "sqlite"):
            self.db = os.path.join(self.data, "pf.db")
        elif o.db == "pg-fresh":
            self.db = fresh_pg_database()
        else:
            self.db = o.db
        self.facts["store"] = "sqlite" if self.db.startswith(self.data) else "postgres"
        self.start_sim()
        if len(self.replicas) > 1:
            self.start_balancers()
        self.start_serve()
        log("market-sim %s, serve %s, gateway %s, local cuzk %s, run dir %s" %
            (self.market_url, self.url, self.grpc_target, self.local_cuzk_addr, self.dir))
        if len(self.replicas) > 1:
            for r in self.replicas:
                log("replica %d: http %s, grpc 127.0.0.1:%d, pid %d: %s" % (
                    r.index, r.url, r.grpc_port, r.child.proc.pid,
                    json.dumps(self.replica_view(r))))
        self.start_client()
        started = time.time()
        end = started + o.give_up_s + 60
        killed_job = None
        serve_killed = False
        last_note = 0.0
        while time.time() < end and self.client.running():
            self.ensure_alive()
            jobs = self.jobs()
            by_state = collections.Counter(j.get("state") for j in jobs)
            done = by_state.get("done", 0)
            if time.time() - last_note > 10:
                last_note = time.time()
                live = collections.Counter(i.get("state") for i in self.instances())
                log("jobs %s | instances %s" % (dict(by_state), dict(live)))
            open_now = sum(by_state.get(st, 0) for st in ("queued", "assigned", "proving"))
            self.facts["most_jobs_open"] = max(self.facts.get("most_jobs_open", 0), open_now)
            if o.kill_leader_at_open and not serve_killed and open_now >= o.kill_leader_at_open:
                log("%d jobs open: %s" % (open_now, dict(by_state)))
                self.facts["jobs_open_at_the_sigkill"] = open_now
                self.restart_serve()
                serve_killed = True
                continue
            if killed_job is None and done >= o.jobs * 0.1:
                killed_job = self.kill_agent_mid_proof(jobs)
            if (not serve_killed and not o.kill_leader_at_open and killed_job is not None and
                    done >= o.jobs * 0.4):
                self.restart_serve()
                serve_killed = True
            time.sleep(1)
        if self.client.running():
            self.client.kill()
            raise RunError("the client did not finish within %d s" % (o.give_up_s + 60))
        self.client.log.close()
        self.facts["client_s"] = round(time.time() - started, 1)
        self.check(killed_job is not None, "no agent was killed mid-proof (no job seen proving)")
        self.check(serve_killed, "the manager was never killed and restarted" +
                   (" (its leading replica)" if len(self.replicas) > 1 else "") +
                   ("" if not o.kill_leader_at_open else
                    ": at most %d jobs were open at once, want %d" %
                    (self.facts.get("most_jobs_open", 0), o.kill_leader_at_open)))
        self.verify(killed_job)
        if o.second_run_without_local_cuzk:
            self.check_without_local_cuzk()
        self.teardown()

    def ensure_alive(self):
        if not self.sim.running():
            raise RunError("market-sim exited on its own:\n" + self.sim.tail())
        for r in self.replicas:
            if not r.child.running():
                self.check(False, "%s exited on its own:\n%s" % (r.child.name, r.child.tail()))
                r.child.log.close()
                self.start_replica(r)

    def agent_pids(self, market_id):
        """Agent processes of market instance `market_id`: their environment names its state
        directory under market-sim's work dir."""
        needle = ("PROVERFLEET_STATE_DIR=" +
                  os.path.join(self.work, "instances", str(market_id), "")).encode()
        pids = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % name, "rb") as f:
                    argv = f.read().split(b"\0")
                with open("/proc/%s/environ" % name, "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if b"agent" in argv[1:3] and any(e.startswith(needle) for e in env):
                pids.append(int(name))
        return pids

    def kill_agent_mid_proof(self, jobs):
        proving = [j for j in jobs if j.get("state") == "proving" and j.get("instance_id")]
        if not proving:
            return None
        job = proving[0]
        # Every job the instance holds: proofs there finish one after another, so the one seen
        # proving may finish before the signal lands, but not all it holds.
        held = [j.get("request_id") for j in jobs if j.get("instance_id") == job["instance_id"]
                and j.get("state") in ("assigned", "proving")]
        rows = {r.get("id"): r for r in self.instances()}
        row = rows.get(job["instance_id"])
        if not row or row.get("market_id") is None:
            return None
        pids = self.agent_pids(row["market_id"])
        if not pids:
            return None
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        # The agent went on leasing between the list above and the signal (it takes several
        # jobs at once): what it held is what the store says it holds now that it is dead.
        held = sorted(set(held) | {
            j.get("request_id") for j in self.jobs()
            if j.get("instance_id") == job["instance_id"]
            and j.get("state") in ("assigned", "proving")})
        log("SIGKILL agent pid %s of instance %s (market %s), proving job %s (%s)" %
            (pids, row["id"], row["market_id"], job.get("id"), job.get("request_id")))
        self.facts["killed_agent_instance"] = row["id"]
        self.facts["killed_agent_jobs"] = held
        return held

    def start_probe(self):
        """curio_cluster.py --probe: GetStatus every 0.1 s through the gateway; its longest call
        is a restart's stall."""
        probe = Child("probe", [
            sys.executable, self.cluster_script(), "--probe", self.grpc_target,
            "--proto-dir", os.path.join(self.o.source, "proto"),
        ], os.path.join(self.dir, "probe.log"), {})
        probe.wait_for(r"probe of .* running", 60)
        time.sleep(1)
        return probe

    @staticmethod
    def stop_probe(probe):
        time.sleep(2)
        probe.stop()
        for line in reversed(probe.tail(20000).splitlines()):
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    return {}
        return {}

    def restart_serve(self):
        if len(self.replicas) > 1:
            return self.restart_leader()
        if self.o.upgrade:
            return self.upgrade_serve()
        probe = self.start_probe() if self.o.supervised else None
        log("SIGKILL serve (pid %d)" % self.serve.proc.pid)
        killed_at = time.time()
        self.serve.kill()
        self.serve.log.close()
        time.sleep(self.o.serve_down_s)
        self.start_serve()
        self.outages.append((killed_at, time.time()))
        log("serve restarted on the same database and ports")
        self.facts["serve_restarts"] = self.facts.get("serve_restarts", 0) + 1
        if probe is not None:
            stats = self.stop_probe(probe)
            # Calls open at the SIGKILL may fail (each costs a retry); calls made while serve is
            # down wait in the socket's backlog: the longest is about the outage.
            self.facts["crash"] = {
                "down_s": round(time.time() - killed_at, 1), "probe_calls": stats.get("calls"),
                "probe_failures": stats.get("failures"),
                "probe_failures_by_code": stats.get("failures_by_code"),
                "longest_call_stall_s": stats.get("longest_s"),
                "longest_call_on": stats.get("longest_on")}
            log("crash: %s" % json.dumps(self.facts["crash"]))

    def upgrade_serve(self):
        """--upgrade: `serve --takeover` beside the running serve, with the same arguments; the
        old one answers the calls it holds, then exits. A probe times every call meanwhile."""
        r = self.replicas[0]
        old = r.child
        probe = self.start_probe()
        log("planned upgrade: serve --takeover beside pid %d" % old.proc.pid)
        started_at = time.time()
        self.start_replica(r, ["--takeover"])
        log("the new serve (pid %d) listens; the old one answers its calls" % r.child.proc.pid)
        end = time.time() + 600
        while old.running() and time.time() < end:
            time.sleep(0.1)
        exited_at = time.time()
        old_rc = old.proc.poll()
        if old_rc is None:
            old.kill()
        old.log.close()
        stats = self.stop_probe(probe)
        self.outages.append((started_at, exited_at))
        self.facts["serve_restarts"] = self.facts.get("serve_restarts", 0) + 1
        self.facts["upgrade"] = {
            "old_serve_exit": old_rc, "old_serve_exited_after_s": round(exited_at - started_at, 1),
            "probe_calls": stats.get("calls"), "probe_failures": stats.get("failures"),
            "probe_failures_by_code": stats.get("failures_by_code"),
            "longest_call_stall_s": stats.get("longest_s"),
            "longest_call_on": stats.get("longest_on"),
            "handover_started_at": round(started_at, 3), "old_serve_exited_at": round(exited_at, 3),
            "probe_failure_samples": stats.get("failure_samples"),
        }
        log("upgrade: %s" % json.dumps(self.facts["upgrade"]))
        self.check(old_rc == 0, "the old serve exited %s after the takeover, want 0:\n%s" %
                   (old_rc, old.tail()))
        self.check(stats.get("calls", 0) > 0 and stats.get("failures") == 0,
                   "the probe's calls failed during the upgrade: %s" % stats)

    def restart_leader(self):
        """Replicas: SIGKILL the one that leads, keep it down --serve-down-s while another
        takes over, restart it with the same arguments."""
        o = self.o
        leader = self.wait_leader(30)
        others = [r for r in self.replicas if r is not leader]
        log("SIGKILL the leading replica %d (pid %d); replica %s" % (
            leader.index, leader.child.proc.pid, json.dumps(self.replica_view(leader))))
        killed_at = time.time()
        leader.child.kill()
        leader.child.log.close()
        new_leader, took_over_s = None, None
        while time.time() < killed_at + o.serve_down_s:
            if new_leader is None:
                leading = [r for r in others if self.leads(r)]
                if leading:
                    new_leader, took_over_s = leading[0], time.time() - killed_at
                    log("replica %d leads %.1f s after the SIGKILL" %
                        (new_leader.index, took_over_s))
            time.sleep(0.1)
        self.start_replica(leader)
        self.outages.append((killed_at, time.time()))
        log("replica %d restarted on the same database and ports" % leader.index)
        if new_leader is None:  # not yet: the failover bound may exceed the time it was down
            try:
                new_leader = self.wait_leader(30)
                took_over_s = time.time() - killed_at
            except RunError as e:
                log(str(e))
        self.facts["serve_restarts"] = self.facts.get("serve_restarts", 0) + 1
        self.facts["killed_leader"] = leader.index
        self.facts["new_leader"] = None if new_leader is None else new_leader.index
        self.facts["failover_s"] = None if took_over_s is None else round(took_over_s, 1)
        self.check(new_leader is not None and new_leader is not leader,
                   "no other replica took over from the SIGKILLed leader %d (leader after its "
                   "restart: %s)" % (leader.index, None if new_leader is None
                                     else new_leader.index))
        for r in self.replicas:
            log("replica %d after the failover: %s" % (r.index, json.dumps(self.replica_view(r))))

    def in_outage(self, t):
        return any(k <= t <= r + self.o.outage_grace_s for k, r in self.outages)

    def wait_store_settled(self, timeout=90):
        """Jobs the store still holds open (a task Curio gave up on may still be proving) get a
        while to finish before the store is judged."""
        end = time.time() + timeout
        while True:
            jobs = self.jobs()
            open_jobs = [j for j in jobs if j.get("state") in ("queued", "assigned", "proving")]
            if not open_jobs or time.time() > end:
                return jobs
            self.ensure_alive()
            time.sleep(0.5)

    def verify(self, killed_job):
        o = self.o
        try:
            with open(self.client_summary) as f:
                s = json.load(f)
        except (OSError, ValueError) as e:
            raise RunError("no cluster summary (%s); its log:\n%s" %
                           (e, open(os.path.join(self.dir, "client.log")).read()[-3000:]))
        for k in ("tasks", "completed", "completed_own_proof", "tries_exhausted", "unfinished",
                  "wrong_proofs", "wrong_proofs_accepted", "retries", "retries_on_other_node",
                  "errors_by_code", "post_local_calls", "max_open_calls_per_node", "elapsed_s"):
            self.facts["cluster_" + k] = s.get(k)
        self.facts["cluster_by_kind"] = {k: {"tasks": v["tasks"], "completed": v["completed"],
                                             "exhausted": v["tries_exhausted"]}
                                         for k, v in s["by_kind"].items()}
        self.facts["serve_outages_s"] = [round(r - k, 1) for k, r in self.outages]

        # Tasks Curio gave up on: lost to the deliberate serve outage, or not.
        in_outage, outside = [], []
        for t in s["exhausted_tasks"]:
            failed = [x for x in t["tries"] if x["outcome"] == "error"]
            if failed and all(self.in_outage(x["end"]) for x in failed):
                in_outage.append(t)
            else:
                outside.append(t)
        if s["tries_exhausted"] > len(s["exhausted_tasks"]):  # the list is cut at 200
            outside.extend([{}] * (s["tries_exhausted"] - len(s["exhausted_tasks"])))
        exhausted_ids = {t.get("request_id") for t in s["exhausted_tasks"]}
        self.facts["exhausted_in_serve_outage"] = [(t["request_id"], t["kind"], len(t["tries"]))
                                                   for t in in_outage]
        self.check(s["tasks"] == o.jobs, "the cluster ran %s tasks, want %d" % (s["tasks"], o.jobs))
        self.check(s["unfinished"] == 0, "tasks never finished: %s" %
                   json.dumps(s["unfinished_tasks"][:5]))
        self.check(s["completed_own_proof"] + len(in_outage) == s["tasks"],
                   "%d of %d tasks completed with their own proof (%d lost to the serve outage);"
                   " errors: %s" % (s["completed_own_proof"], s["tasks"], len(in_outage),
                                    json.dumps(s["errors"][:10])))
        self.check(not outside, "tasks Curio gave up on outside the serve outage: %s" %
                   json.dumps(outside[:5]))
        self.check(all(n <= o.max_pending for n in s["max_open_calls_per_node"]),
                   "a node held %s calls open, MaxPending %d" %
                   (s["max_open_calls_per_node"], o.max_pending))

        jobs = self.wait_store_settled()
        by_request = collections.defaultdict(list)
        for j in jobs:
            by_request[j.get("request_id")].append(j)
        expected = s["proof_digests"]  # the fleet's tasks: request_id → digest of their proof
        asked = set()
        for ids in s["request_ids"].values():
            asked.update(ids)
        fleet_done_ids = set(expected) - exhausted_ids - {
            t["request_id"] for t in s["unfinished_tasks"]}
        post_jobs = [j for j in jobs if j.get("kind") in POST_STORE_KINDS]
        duplicated = {r: len(v) for r, v in by_request.items() if len(v) > 1}
        missing = sorted(fleet_done_ids - set(by_request))
        extra = sorted(set(by_request) - asked)
        # A task Curio gave up on may leave a job nobody waits for: its state is reported, not
        # judged (whatever the gateway does with it, Curio never sees the answer).
        not_done = {r: v[0].get("state") for r, v in by_request.items()
                    if v[0].get("state") != "done" and r not in exhausted_ids}
        self.facts["jobs_of_exhausted_tasks"] = {r: by_request[r][0].get("state")
                                                 for r in exhausted_ids if r in by_request}
        store_wrong = [r for r, v in by_request.items()
                       if r in expected and v[0].get("proof_digest") not in (None, expected[r])]
        self.facts["store_jobs"] = len(jobs)
        self.check(not post_jobs, "PoSt jobs entered the fleet's queue: %s" %
                   [(j.get("request_id"), j.get("kind")) for j in post_jobs[:10]])
        self.check(not duplicated, "request_ids with more than one job: %s" % duplicated)
        self.check(not missing, "completed tasks whose job the store lost: %s" % missing[:20])
        self.check(not extra, "jobs nobody asked for: %s" % extra[:20])
        self.check(not not_done, "jobs not done: %s" % dict(list(not_done.items())[:20]))
        self.check(not store_wrong,
                   "store's proof digest differs from the proof Curio needs: %s" % store_wrong[:20])
        no_digest = [r for r, v in by_request.items() if not v[0].get("proof_digest")]
        self.check(not no_digest, "done jobs without a proof digest: %s" % no_digest[:20])
        # Inputs live in the database (issue 29): none is a file on any replica's disk, so a
        # replica that dies takes nothing another needs.
        on_disk = sorted(r.dir for r in self.replicas
                         if os.path.isdir(os.path.join(r.dir, "job-inputs")))
        self.check(not on_disk, "job input files on a replica's disk: %s" % on_disk)
        self.facts["input_bytes_per_task"] = o.vanilla_bytes
        attempts = collections.Counter(int(v[0].get("attempts", 0)) for v in by_request.values())
        self.facts["attempts_histogram"] = dict(sorted(attempts.items()))
        # Jobs leased more than once, other than those of the agent killed on purpose: a restart
        # of the manager must requeue none (leases are restored from the store, and a handover
        # passes them on).
        requeued = sorted(r for r, v in by_request.items()
                          if int(v[0].get("attempts") or 0) >= 2 and r not in (killed_job or []))
        # The killed agent may have asked for work just before it died. The manager looks for
        # the hang-up before each lease (HttpRequest::caller_gone), but a kill that lands after
        # that look, or before the connection's close reaches the manager, still hands a job to
        # the dead agent: it waits out its lease and is leased again — the kill's doing, not a
        # restart's. Its timeline says so: a lease to the killed instance.
        killed_instance = self.facts.get("killed_agent_instance")
        leased_to_killed = []
        if killed_instance is not None:
            for r in requeued:
                body = self.api_get("/api/v1/jobs/%s" % urllib.parse.quote(r, safe=""))
                steps = body.get("timeline", []) if isinstance(body, dict) else []
                if any(s.get("kind") == "leased" and s.get("instance_id") == killed_instance
                       for s in steps):
                    leased_to_killed.append(r)
        self.facts["jobs_leased_to_the_killed_agent_after_it_was_killed"] = leased_to_killed
        requeued = [r for r in requeued if r not in leased_to_killed]
        self.facts["jobs_requeued_besides_the_killed_agents"] = requeued[:20]
        if o.upgrade or o.supervised:
            self.check(not requeued, "the manager's restart requeued jobs: %s" % requeued[:20])
        undelivered = [r for r, v in by_request.items()
                       if not v[0].get("delivered_at") and r not in exhausted_ids]
        self.check(not undelivered, "jobs done but never delivered: %s" % undelivered[:20])
        if killed_job is not None:
            after = {r: {k: by_request.get(r, [{}])[0].get(k)
                         for k in ("state", "attempts", "instance_id")} for r in killed_job}
            self.facts["killed_agent_jobs_after"] = after
            self.check(any(int(a.get("attempts") or 0) >= 2 and a.get("state") == "done"
                           for a in after.values()),
                       "no job of the killed agent was leased again and finished: %s" % after)

        # The PoSt went to the operator's own cuzk.
        try:
            with open(self.local_stats) as f:
                local = json.load(f)
        except (OSError, ValueError) as e:
            raise RunError("no local cuzk stats (%s)" % e)
        self.facts["local_cuzk"] = local
        post_done = sum(v["completed_own_proof"] for k, v in s["by_kind"].items()
                        if k in ("wdpost", "winpost"))
        post_tasks = sum(v["tasks"] for k, v in s["by_kind"].items() if k in ("wdpost", "winpost"))
        self.check(post_tasks == 0 or post_done > 0, "no PoSt task completed (%d)" % post_tasks)
        self.check(set(local.get("prove_by_kind", {})) <= {"wdpost", "winpost"},
                   "the local cuzk was asked for fleet kinds: %s" % local.get("prove_by_kind"))
        self.check(local.get("methods", {}).get("Prove", 0) >= post_done and
                   s["post_local_calls"] >= post_done,
                   "PoSt completed %d, local cuzk Prove calls %s, answers with its proof %d" %
                   (post_done, local.get("methods"), s["post_local_calls"]))

        figures = collections.OrderedDict([
            ("jobs_lost", len(missing) + len(not_done)),
            ("duplicate_jobs", sum(n - 1 for n in duplicated.values())),
            ("wrong_proofs", s["wrong_proofs"] + len(store_wrong)),
            ("post_in_fleet_queue", len(post_jobs)),
            ("tries_exhausted", len(outside)),
            ("tries_exhausted_in_serve_outage", len(in_outage)),
        ])
        self.facts["figures"] = dict(figures)
        print("curio_e2e " + " ".join("%s=%d" % kv for kv in figures.items()), flush=True)
        for k in ("jobs_lost", "duplicate_jobs", "wrong_proofs", "post_in_fleet_queue",
                  "tries_exhausted"):
            self.check(figures[k] == 0, "curio_e2e %s=%d, want 0" % (k, figures[k]))
        if self.o.supervised:
            # Only the calls open on the killed process can fail (each costs its task one try);
            # calls made while serve is down wait in the socket's backlog. At most that many
            # retries: the nodes' open-call window.
            window = self.o.nodes * self.o.max_pending
            self.check((s.get("retries") or 0) <= window,
                       "curio_e2e: %s Curio retries with the sockets held, more than the %d calls "
                       "that can be open at the SIGKILL: calls made during the restart failed" %
                       (s.get("retries"), window))
        if self.o.upgrade:
            # A planned upgrade fails no call: Curio spends no try on it.
            self.check((s.get("retries") or 0) == 0,
                       "curio_e2e: %s Curio retries across a planned upgrade, want 0: %s" %
                       (s.get("retries"), json.dumps(s.get("errors", [])[:5])))
        if len(self.replicas) > 1 or self.o.supervised or self.o.upgrade:
            # With replicas the leader's death is no outage for Curio, and with the sockets held
            # across the restart (--supervised) calls made meanwhile wait: no task may run out of
            # tries at all, in the outage or not.
            self.check(figures["tries_exhausted_in_serve_outage"] == 0,
                       "curio_e2e tries_exhausted_in_serve_outage=%d, want 0 with %d replicas%s: "
                       "%s" % (figures["tries_exhausted_in_serve_outage"], len(self.replicas),
                               " and the sockets held" if self.o.supervised else "",
                               json.dumps([{"request_id": t["request_id"], "kind": t["kind"],
                                            "tries": t["tries"]} for t in in_outage[:5]])))

    def check_without_local_cuzk(self):
        """serve with no local_cuzk: a WinningPoSt Prove is refused at once, and no job appears."""
        o = self.o
        log("restarting serve without [gateway] local_cuzk")
        for r in self.replicas:
            r.child.stop()
        self.write_config("")
        self.start_serve()
        summary = os.path.join(self.dir, "no-local-cuzk.json")
        started = time.time()
        done = subprocess.run([
            sys.executable, self.cluster_script(), "--target", self.grpc_target,
            "--nodes", "1", "--jobs", "1", "--mix", "winpost=1", "--seed", "9001",
            "--max-pending", str(o.max_pending), "--summary", summary, "--poll-s", "0.2",
            "--proto-dir", os.path.join(o.source, "proto"), "--give-up-s", "60",
            "--prove-timeout-s", "60",
        ], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=180,
            preexec_fn=die_with_parent)
        try:
            with open(summary) as f:
                s = json.load(f)
        except (OSError, ValueError) as e:
            raise RunError("no summary of the WinningPoSt without local_cuzk (%s): %s" %
                           (e, (done.stdout + done.stderr)[-2000:]))
        err = (s.get("errors") or [{}])[0]
        rid = (s.get("request_ids", {}).get("winpost") or [""])[0]
        self.facts["no_local_cuzk"] = {"rc": done.returncode, "errors_by_code":
                                       s.get("errors_by_code"), "call_s": err.get("call_s"),
                                       "details": err.get("details"),
                                       "run_s": round(time.time() - started, 1)}
        self.check(done.returncode != 0 and s.get("errors_by_code") == {"FAILED_PRECONDITION": 1}
                   and s.get("calls_total") == 1,
                   "without local_cuzk, a WinningPoSt was not refused FAILED_PRECONDITION once: "
                   "%s" % self.facts["no_local_cuzk"])
        self.check("local_cuzk" in (err.get("details") or ""),
                   "the refusal does not mention local_cuzk: %r" % err.get("details"))
        self.check(err.get("call_s") is not None and err["call_s"] < 5,
                   "the refusal took %s s, want at once" % err.get("call_s"))
        jobs = self.jobs()
        leaked = [(j.get("request_id"), j.get("kind")) for j in jobs
                  if j.get("request_id") == rid or j.get("kind") in POST_STORE_KINDS]
        self.check(not leaked, "the refused WinningPoSt left jobs: %s" % leaked)

    def teardown(self):
        log("pausing the autopilot and destroying every instance through the manager")
        self.api("POST", "/api/v1/autopilot", {"paused": True})
        end = time.time() + self.o.cleanup_timeout_s
        asked = set()
        rows, listed = [], []
        while time.time() < end:
            self.ensure_alive()
            rows = self.instances()
            live = [r for r in rows if r.get("state") != "destroyed"]
            for r in live:
                if r.get("state") != "destroying" and r.get("id") not in asked:
                    asked.add(r.get("id"))
                    self.api("DELETE", "/api/v1/instances/%s" % r.get("id"))
            listed = self.market_instances()
            if not live and not listed:
                break
            time.sleep(1)
        self.facts["rentals"] = len(rows)
        self.check(not listed, "leaked instances: market-sim still lists %s" %
                   [(i.get("id"), i.get("label"), i.get("actual_status")) for i in listed])
        self.check(all(r.get("state") == "destroyed" for r in rows),
                   "rows not destroyed: %s" % [(r.get("id"), r.get("state")) for r in rows
                                               if r.get("state") != "destroyed"])
        for r in self.replicas:
            r.child.stop()
        for kind, (b, _) in self.balancers.items():
            b.stop()
            try:
                with open(os.path.join(self.dir, "balancer-%s.json" % kind)) as f:
                    self.facts["balancer_" + kind] = json.load(f)
            except (OSError, ValueError) as e:
                self.facts["balancer_" + kind] = "no stats: %s" % e
        self.sim.stop()
        if self.local_cuzk is not None:
            self.local_cuzk.stop()
        # The agents market-sim spawned exit on their own once it is gone: give them a moment.
        left = self.processes_of_run()
        deadline = time.time() + 5
        while left and time.time() < deadline:
            time.sleep(0.25)
            left = self.processes_of_run()
        self.check(not left, "processes of the run still alive after teardown: %s" % left)
        for pid, _ in left:
            try:
                os.kill(pid, signal.SIGKILL)  # ours: its command line or environment names the run
            except OSError:
                pass

    def processes_of_run(self):
        needle = self.dir.encode()
        out = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    if f.read().rsplit(b")", 1)[-1].split()[0] == b"Z":
                        continue
                with open("/proc/%s/cmdline" % name, "rb") as f:
                    cmd = f.read()
                with open("/proc/%s/environ" % name, "rb") as f:
                    env = f.read()
            except OSError:
                continue
            if needle in cmd or needle in env:
                out.append((int(name), cmd.replace(b"\0", b" ")[:160].decode(errors="replace")))
        return out

    def cleanup(self):
        children = [self.client] + [r.child for r in self.replicas] + \
            [b for b, _ in self.balancers.values()] + [self.sim, self.local_cuzk]
        for c in children:
            if c is not None and c.running():
                c.kill()
        if self.o.keep or self.failures:
            log("run directory kept: " + self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description="proverfleet gateway end-to-end run")
    p.add_argument("--binary", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--scenario")
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--nodes", type=int, default=2, help="Curio nodes (each its own channel)")
    p.add_argument("--max-pending", type=int, default=10, help="Curio's MaxPending, per node")
    p.add_argument("--mix", default="porep=0.8,snap=0.1,wdpost=0.05,winpost=0.05",
                   help="the Curio tasks' kinds (curio_cluster.py --mix)")
    p.add_argument("--outage-grace-s", type=float, default=20,
                   help="after serve's restart, failures still count as the outage's this long")
    p.add_argument("--second-run-without-local-cuzk", action="store_true",
                   help="then restart serve without local_cuzk: a WinningPoSt must be refused "
                        "FAILED_PRECONDITION at once and leave no job")
    p.add_argument("--time-scale", type=float, default=30)
    p.add_argument("--lease-s", type=int, default=20)
    p.add_argument("--serve-down-s", type=float, default=5)
    p.add_argument("--give-up-s", type=float, default=600)
    p.add_argument("--cleanup-timeout-s", type=float, default=120)
    p.add_argument("--db", default="sqlite",
                   help="sqlite (default), a postgres:// URL, or pg-fresh ($PF_TEST_PG_URL_FILE)")
    p.add_argument("--replicas", type=int, default=1,
                   help="serve replicas on the database, behind TCP balancers; with 2 or more "
                        "the leader is SIGKILLed instead of serve, and no Curio task may run out "
                        "of tries at all")
    p.add_argument("--lease-ttl-s", type=int, default=5,
                   help="with --replicas: [replicas] lease_ttl_s (2..20)")
    p.add_argument("--supervised", action="store_true",
                   help="hold serve's listening sockets here and hand them to it (socket "
                        "activation, as deploy/systemd/ does): the SIGKILL and restart of serve "
                        "must then cost no Curio task its tries")
    p.add_argument("--upgrade", action="store_true",
                   help="instead of SIGKILLing serve, upgrade it mid-run (serve --takeover beside "
                        "it): no Curio call may fail, and the old serve must exit 0")
    p.add_argument("--separate-dirs", action="store_true",
                   help="with --replicas on a server database: each replica in its own working "
                        "directory (its [jobs] data_dir), sharing only the database, as replicas "
                        "on separate hosts do; no job input may be a file on any of them")
    p.add_argument("--vanilla-bytes", type=int, default=4096,
                   help="the vanilla proof bytes in each Curio task (curio_cluster.py): the size "
                        "of each job's input")
    p.add_argument("--kill-leader-at-open", type=int, default=0,
                   help="SIGKILL serve (the leader, with --replicas) as soon as this many jobs are "
                        "open (queued, assigned or proving) instead of once 40%% are done; the "
                        "agent is SIGKILLed mid-proof after it, once 10%% are done")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--result", help="write the facts and failures as JSON here")
    p.add_argument("--figures-out",
                   help="write the figures as `make reliability` reads them (every figure but "
                        "requests_tried must be 0)")
    if "--balancer" in sys.argv[1:]:
        # The balancer process a --replicas run starts for itself (run_balancer), with its own
        # arguments: --balancer NAME --listen HOST:PORT --backends HOST:PORT,... --stats FILE.
        bp = argparse.ArgumentParser()
        for a in ("--balancer", "--listen", "--backends", "--stats"):
            bp.add_argument(a)
        return run_balancer(bp.parse_args())
    o = p.parse_args()
    if o.replicas < 1:
        p.error("--replicas must be at least 1")
    if o.supervised and o.replicas > 1:
        p.error("--supervised holds one serve's sockets: not with --replicas")
    if o.upgrade and (o.supervised or o.replicas > 1):
        p.error("--upgrade takes over from one serve that binds its own sockets: not with "
                "--supervised or --replicas")
    if not 2 <= o.lease_ttl_s <= 20:
        p.error("--lease-ttl-s must be 2..20")
    if o.separate_dirs and (o.replicas < 2 or o.db in ("", "sqlite")):
        p.error("--separate-dirs needs --replicas 2 or more on a server database (--db)")
    if o.vanilla_bytes < 1:
        p.error("--vanilla-bytes must be at least 1")
    o.binary = os.path.abspath(o.binary)
    o.source = os.path.abspath(o.source)
    run = Run(o)
    code = 0
    try:
        run.run()
        code = 1 if run.failures else 0
    except RunError as e:
        log("could not run: %s" % e)
        run.failures.append("run error: %s" % e)
        code = 2
    finally:
        run.cleanup()
    result = {"passed": code == 0, "facts": run.facts, "failures": run.failures}
    print(json.dumps(result, indent=1))
    if o.result:
        with open(o.result, "w") as f:
            json.dump(result, f, indent=1)
    if o.figures_out:
        figures = run.facts.get("figures", {})
        out = collections.OrderedDict([("requests_tried", o.jobs)])
        for name in ("jobs_lost", "duplicate_jobs", "wrong_proofs", "post_in_fleet_queue",
                     "tries_exhausted"):
            # A run that could not measure a figure counts it as failed, never as 0.
            out["curio_" + name] = figures.get(name, 1)
        details = ["curio e2e: %s" % f for f in run.failures]
        if o.upgrade:
            upgrade = run.facts.get("upgrade") or {}
            # A run that could not measure them counts them as failed, never as 0.
            retries = run.facts.get("cluster_retries")
            failures = upgrade.get("probe_failures")
            out["curio_upgrade_failed_calls"] = ((retries if retries is not None else 1) +
                                                 (failures if failures is not None else 1))
            details.append(
                "one serve on %s upgraded mid-run (serve --takeover): Curio retries %s, probe "
                "calls %s of which failed %s, longest call stall %s s (%s), the old serve exited "
                "%s after %s s" %
                (run.facts.get("store", "?"), retries, upgrade.get("probe_calls"), failures,
                 upgrade.get("longest_call_stall_s"), upgrade.get("longest_call_on"),
                 upgrade.get("old_serve_exit"), upgrade.get("old_serve_exited_after_s")))
        if o.replicas > 1 or o.supervised or o.upgrade:
            # With replicas, or one serve whose sockets a supervisor holds or that is upgraded,
            # a task lost in the restart counts like any other: one figure, no carve-out.
            if "tries_exhausted" in figures:
                out["curio_tries_exhausted"] = (figures["tries_exhausted"] +
                                                figures["tries_exhausted_in_serve_outage"])
            if o.supervised:
                details.append(
                    "one serve on %s, its sockets held across its SIGKILL and restart (socket "
                    "activation): tasks whose every try fell in the outage: %d (counted in "
                    "curio_tries_exhausted); Curio tries spent: %s retries (at most one per call "
                    "open at the SIGKILL: <= %d); outages %s s; a GetStatus probe: longest call "
                    "%s s, %s of %s calls failed (open at the SIGKILL)" %
                    (run.facts.get("store", "?"), figures.get("tries_exhausted_in_serve_outage", 0),
                     run.facts.get("cluster_retries"), o.nodes * o.max_pending,
                     run.facts.get("serve_outages_s"),
                     (run.facts.get("crash") or {}).get("longest_call_stall_s"),
                     (run.facts.get("crash") or {}).get("probe_failures"),
                     (run.facts.get("crash") or {}).get("probe_calls")))
            elif o.replicas > 1:
                details.append("%d serve replicas, the leader SIGKILLed%s: tasks whose every "
                               "try fell in the failover: %d (counted in curio_tries_exhausted)" %
                               (o.replicas,
                                "" if "jobs_open_at_the_sigkill" not in run.facts else
                                " with %d jobs open" % run.facts["jobs_open_at_the_sigkill"],
                                figures.get("tries_exhausted_in_serve_outage", 0)))
        else:
            details.append("tasks whose every try fell in the serve outage (no replica): %d" %
                           figures.get("tries_exhausted_in_serve_outage", 0))
        out["details"] = details
        with open(o.figures_out, "w") as f:
            json.dump(out, f, indent=1)
    return code


if __name__ == "__main__":
    sys.exit(main())
