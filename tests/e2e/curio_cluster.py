#!/usr/bin/env python3
"""A Curio cluster talking to its one cuzk endpoint (here: proverfleet's gateway), doing what
Curio's own code does, as read at filecoin-project/curio commit 0ba6cbca.

Its gRPC stubs are generated from proto/cuzk/v1/proving.proto at run time with Debian's
python3-grpc-tools, independently of the C++ code generated for proverfleet, so the wire
contract is tested from the outside. Run it with /usr/bin/python3 (Debian's python3-grpcio).

What Curio does, and where (paths and lines at 0ba6cbca):

  The calls
  - Only the unary `Prove` RPC is ever called (lib/cuzk/client.go:123). GetStatus/HasCapacity
    (client.go:148-186) have no callers; nothing calls SubmitProof, AwaitProof or CancelProof.
  - One gRPC channel per Curio node, created lazily and kept: insecure credentials, no
    keepalive, 256 MiB max message both ways (client.go:80-84). No retry, no metadata.
  - Each call carries a deadline of [Cuzk] ProveTimeout, default 30 min (client.go:117-121,
    deps/config/types.go:131-134). A result is used only when its status is COMPLETED; FAILED,
    CANCELLED, TIMEOUT, UNKNOWN and a missing result are errors (client.go:128-144), and so is
    any gRPC error (client.go:124-126).
  - [Cuzk] MaxPending (default 10, types.go:131-134) bounds the tasks a node runs against cuzk
    at once: one taskhelp.Max counter per node (client.go:52), shared by every cuzk-using task
    type through TaskMax() (client.go:61-63; task_porep.go:203, snap/task_prove.go:164,
    window/compute_task.go:451, winning/winning_task.go:586), taken when harmonytask claims a
    task and given back when Do() ends (harmony/harmonytask/task_type_handler.go:228,258).

  The requests (lib/ffi/cuzk_funcs.go), 32 GiB sectors:
  - porep   request_id "porep-<miner>-<sector>", POREP_SEAL_COMMIT, registered_proof 8
            (StackedDrg32GiBV1_1), priority NORMAL, vanilla_proof = the C1 envelope
            {"SectorNum","Phase1Out"(base64),"SectorSize"} as Go's json.Marshal writes it,
            sector_number, miner_id (cuzk_funcs.go:25-40, 61-75).
  - snap    request_id "snap-<miner>-<sector>", SNAP_DEALS_UPDATE, registered_proof 3
            (update StackedDrg32GiBV1), NORMAL, vanilla_proofs (16 partitions), sector_number,
            miner_id, comm_r_old, comm_r_new, comm_d_new as raw 32 bytes (cuzk_funcs.go:149-161).
  - wdpost  request_id fmt "wdpost-%d-%d-%d" of (miner, partitionIdx, randomness[:8]): Go's %d
            of a []byte prints "[b0 b1 ... b7]", so "wdpost-1000-0-[12 34 ...]" with spaces;
            WINDOW_POST_PARTITION, registered_proof 13 (Window32GiBV1_1), HIGH, vanilla_proofs,
            miner_id, randomness, partition_index (cuzk_funcs.go:178-188). partitionIdx is always
            0: generateWindowPoSt refuses more than one partition per call and passes its local
            index (tasks/window/compute_do.go:376-379, 408-431), and randomness[31] &= 0x3f
            (compute_do.go:361). All partitions of one deadline share the randomness
            (compute_do.go:55), hence the same request_id (see --wdpost-partitions).
  - winpost request_id "winpost-<miner>-<hex of randomness[:8]>", WINNING_POST,
            registered_proof 3 (Winning32GiBV1), CRITICAL, vanilla_proofs, miner_id, randomness
            (cuzk_funcs.go:219-228; randomness[31] &= 0x3f at winning_task.go:282-283).
  Request ids are deterministic, so a retried task sends the same request_id from any node.

  What Curio checks in an answer
  - PoRep: an empty proof is an error (cuzk_funcs.go:82-84), then ffi.VerifySeal
    (cuzk_funcs.go:93-108): a wrong proof fails the task.
  - WdPost: an empty proof is an error (cuzk_funcs.go:193-195), then VerifyWindowPoSt
    (tasks/window/compute_do.go:219-229): a wrong proof fails the task.
  - WinPost: an empty proof is an error (cuzk_funcs.go:233-235); no verification
    (winning_task.go:533-536): a wrong proof is used.
  - Snap: no check at all, not even the length (cuzk_funcs.go:149-166; snap/task_prove.go:103-112).

  The harmony task engine (harmony/harmonytask)
  - A failed Do() gives the task back: owner NULL, retries+1, update_time now
    (task_type_handler.go:359); the task is dropped once retries >= MaxFailures-1
    (task_type_handler.go:349-353), i.e. MaxFailures is the number of tries. Any node's poller
    may claim it again (harmonytask.go:412-415), once time since update_time > RetryWait(retries)
    when the type has a RetryWait (harmonytask.go:421-431).
  - MaxFailures / RetryWait: PoRep 10, min(1s << retries, 2 min) (seal/task_porep.go:216-219);
    UpdateProve 3, none (snap/task_prove.go:177); WdPost 5, none (window/compute_task.go:459);
    WinPost 1 (winning/winning_task.go:599).
  - Each node's poller wakes every POLL_DURATION (3 s), or POLL_NEXT_DURATION (100 ms) after it
    accepted work (harmonytask.go:22-23, 267-296); each pass claims tasks of the first task type
    (in registration order: WdPost, WinPost, PoRep, UpdateProve; cmd/curio/tasks/tasks.go:198,
    205, 509, 550) that has eligible ones, oldest update_time first, up to the MaxPending
    headroom (harmonytask.go:372-439, task_type_handler.go:101-182).

What this program adds for testing: a task just given back by node X is left to the other nodes
for --prefer-other-node-s (so retries land on another node, as they may in a real cluster), and
every answer is checked against the proof it must be:
  - porep / snap (proved by the fleet's sim prover): hex SHA-256 of b"pf-sim-proof:" + the
    SubmitProofRequest serialized with request_id cleared;
  - wdpost / winpost (never for the fleet: the gateway relays them to the operator's own cuzk,
    [gateway] local_cuzk): hex SHA-256 of --local-proof-prefix + the same serialization, which is
    what --serve-local-cuzk answers.
A wrong proof counts in wrong_proofs; for PoRep and WdPost it fails the try (Curio's own
verification), for snap and WinPost Curio would keep it: wrong_proofs_accepted.

Summary (--summary FILE, JSON): tasks, completed, completed_own_proof, tries_exhausted,
unfinished, wrong_proofs, wrong_proofs_accepted, retries, retries_on_other_node, errors_by_code,
by_kind, post_local_calls, max_open_calls_per_node, elapsed_s, and details (errors, exhausted and
unfinished tasks with every try, proof_digests of the fleet tasks).
Exit 0 only when every task completed with its own proof, tries_exhausted == 0 and
wrong_proofs == 0; 1 otherwise; 2 on bad arguments.

--serve-local-cuzk HOST:PORT instead runs a stand-in for the operator's own cuzk daemon until
SIGTERM/SIGINT: Prove answers COMPLETED with the local-cuzk proof above (after --local-prove-s),
CancelProof answers was_running=false and does nothing, GetStatus and GetMetrics answer
plausibly, SubmitProof/AwaitProof are refused UNIMPLEMENTED (nothing that stands for Curio may
use them); every call is counted by method and Prove by kind in --local-cuzk-stats FILE.
"""

import argparse
import base64
import collections
import hashlib
import json
import os
import random
import signal
import sys
import tempfile
import threading
import time

import grpc

SIM_PROOF_PREFIX = b"pf-sim-proof:"
DEFAULT_LOCAL_PROOF_PREFIX = "local-cuzk-proof:"
SECTOR_SIZE_32G = 32 << 30
REGISTERED_SEAL_PROOF_32G_V1_1 = 8  # abi.RegisteredSealProof_StackedDrg32GiBV1_1
REGISTERED_UPDATE_PROOF_32G = 3  # abi.RegisteredUpdateProof_StackedDrg32GiBV1
REGISTERED_WINDOW_POST_32G_V1_1 = 13  # abi.RegisteredPoStProof_StackedDrgWindow32GiBV1_1
REGISTERED_WINNING_POST_32G = 3  # abi.RegisteredPoStProof_StackedDrgWinning32GiBV1
SNAP_PARTITIONS_32G = 16
WDPOST_VANILLA_PROOFS = 8  # per partition here; real partitions hold up to 2349 sectors
WINPOST_VANILLA_PROOFS = 1


def porep_retry_wait(retries):
    return min(float(1 << min(retries, 30)), 120.0)


# Per kind: harmony task name, MaxFailures, RetryWait (seconds, from retries so far, or None),
# whether Curio rejects an empty proof, whether it verifies the proof, whether the fleet proves it.
KINDS = collections.OrderedDict([
    ("wdpost", dict(task="WdPost", max_failures=5, retry_wait=None, empty_is_error=True,
                    verified=True, fleet=False, store_kind="window-post")),
    ("winpost", dict(task="WinPost", max_failures=1, retry_wait=None, empty_is_error=True,
                     verified=False, fleet=False, store_kind="winning-post")),
    ("porep", dict(task="PoRep", max_failures=10, retry_wait=porep_retry_wait,
                   empty_is_error=True, verified=True, fleet=True, store_kind="porep-c2")),
    ("snap", dict(task="UpdateProve", max_failures=3, retry_wait=None, empty_is_error=False,
                  verified=False, fleet=True, store_kind="snap-update")),
])
HANDLER_ORDER = list(KINDS)  # WdPost, WinPost, PoRep, UpdateProve: tasks.go registration order
POST_KINDS = ("wdpost", "winpost")
DEFAULT_MIX = "porep=0.8,snap=0.1,wdpost=0.05,winpost=0.05"


def generate_stubs(proto_dir, out_dir):
    """protoc (grpc_tools, Debian's python3-grpc-tools) → importable cuzk.v1 modules."""
    from grpc_tools import protoc  # noqa: imported here so --help works without it

    rc = protoc.main([
        "grpc_tools.protoc",
        "-I" + proto_dir,
        "--python_out=" + out_dir,
        "--grpc_python_out=" + out_dir,
        "cuzk/v1/proving.proto",
    ])
    if rc != 0:
        raise RuntimeError("grpc_tools.protoc failed on %s (exit %d)" % (proto_dir, rc))
    for pkg in ("cuzk", os.path.join("cuzk", "v1")):
        open(os.path.join(out_dir, pkg, "__init__.py"), "a").close()
    sys.path.insert(0, out_dir)
    from cuzk.v1 import proving_pb2, proving_pb2_grpc  # noqa: generated above
    return proving_pb2, proving_pb2_grpc


def _input_bytes(request):
    copy = type(request)()
    copy.CopyFrom(request)
    copy.request_id = ""
    return copy.SerializeToString()


def sim_proof_of(request):
    """The proof the fleet's sim prover derives from a job's input (the issue-12 contract)."""
    return hashlib.sha256(SIM_PROOF_PREFIX + _input_bytes(request)).hexdigest().encode()


def local_proof_of(request, prefix=DEFAULT_LOCAL_PROOF_PREFIX):
    """The proof the stand-in for the operator's own cuzk (--serve-local-cuzk) answers."""
    if isinstance(prefix, str):
        prefix = prefix.encode()
    return hashlib.sha256(prefix + _input_bytes(request)).hexdigest().encode()


def kind_of(pb, request):
    """Our kind name of a SubmitProofRequest (by proof_kind)."""
    return {pb.POREP_SEAL_COMMIT: "porep", pb.SNAP_DEALS_UPDATE: "snap",
            pb.WINDOW_POST_PARTITION: "wdpost", pb.WINNING_POST: "winpost"}.get(
                request.proof_kind, "unknown")


def go_json(obj):
    """JSON as Go's encoding/json writes a struct: no spaces, fields in declaration order."""
    return json.dumps(obj, separators=(",", ":")).encode()


def go_d_bytes(b):
    """Go's fmt %d of a []byte: "[1 2 3]"."""
    return "[" + " ".join(str(x) for x in b) + "]"


def post_randomness(rng):
    r = bytearray(rng.randbytes(32))
    r[31] &= 0x3F  # "make into fr" (compute_do.go:361, winning_task.go:283)
    return bytes(r)


def split_bytes(rng, total, parts):
    each = max(1, total // parts)
    return [rng.randbytes(each) for _ in range(parts)]


class RequestMaker:
    def __init__(self, pb, args, rng):
        self.pb = pb
        self.args = args
        self.rng = rng
        self.next_sector = args.first_sector
        self.wdpost_randomness = None
        self.wdpost_left = 0

    def sector(self):
        s = self.next_sector
        self.next_sector += 1
        return s

    def make(self, kind):
        pb, a, rng = self.pb, self.args, self.rng
        miner = a.miner
        if kind == "porep":
            sector = self.sector()
            phase1 = go_json({
                "registered_proof": "StackedDrg32GiBV1_1",
                "vanilla_proofs": {"StackedDrg32GiBV1": [
                    base64.b64encode(rng.randbytes(max(1, a.vanilla_bytes))).decode()]},
                "comm_r": list(rng.randbytes(32)),
                "comm_d": list(rng.randbytes(32)),
                "replica_id": list(rng.randbytes(32)),
                "seed": list(rng.randbytes(32)),
                "ticket": list(rng.randbytes(32)),
            })
            envelope = go_json({"SectorNum": sector,
                                "Phase1Out": base64.b64encode(phase1).decode(),
                                "SectorSize": SECTOR_SIZE_32G})
            return pb.SubmitProofRequest(
                request_id="porep-%d-%d" % (miner, sector),
                proof_kind=pb.POREP_SEAL_COMMIT, sector_size=SECTOR_SIZE_32G,
                registered_proof=REGISTERED_SEAL_PROOF_32G_V1_1, priority=pb.NORMAL,
                vanilla_proof=envelope, sector_number=sector, miner_id=miner)
        if kind == "snap":
            sector = self.sector()
            return pb.SubmitProofRequest(
                request_id="snap-%d-%d" % (miner, sector),
                proof_kind=pb.SNAP_DEALS_UPDATE, sector_size=SECTOR_SIZE_32G,
                registered_proof=REGISTERED_UPDATE_PROOF_32G, priority=pb.NORMAL,
                vanilla_proofs=split_bytes(rng, a.vanilla_bytes, SNAP_PARTITIONS_32G),
                sector_number=sector, miner_id=miner, comm_r_old=rng.randbytes(32),
                comm_r_new=rng.randbytes(32), comm_d_new=rng.randbytes(32))
        if kind == "wdpost":
            if self.wdpost_left <= 0:  # a new deadline: new randomness
                self.wdpost_randomness = post_randomness(rng)
                self.wdpost_left = a.wdpost_partitions
            self.wdpost_left -= 1
            rand = self.wdpost_randomness
            partition = 0  # what Curio sends, whatever the partition (compute_do.go:376-431)
            return pb.SubmitProofRequest(
                request_id="wdpost-%d-%d-%s" % (miner, partition, go_d_bytes(rand[:8])),
                proof_kind=pb.WINDOW_POST_PARTITION, sector_size=SECTOR_SIZE_32G,
                registered_proof=REGISTERED_WINDOW_POST_32G_V1_1, priority=pb.HIGH,
                vanilla_proofs=split_bytes(rng, a.vanilla_bytes, WDPOST_VANILLA_PROOFS),
                miner_id=miner, randomness=rand, partition_index=partition)
        if kind == "winpost":
            rand = post_randomness(rng)
            return pb.SubmitProofRequest(
                request_id="winpost-%d-%s" % (miner, rand[:8].hex()),
                proof_kind=pb.WINNING_POST, sector_size=SECTOR_SIZE_32G,
                registered_proof=REGISTERED_WINNING_POST_32G, priority=pb.CRITICAL,
                vanilla_proofs=split_bytes(rng, a.vanilla_bytes, WINPOST_VANILLA_PROOFS),
                miner_id=miner, randomness=rand)
        raise ValueError("unknown kind %r" % kind)


class Task:
    """A harmony_task row plus what this program learns about it."""

    def __init__(self, idx, kind, request, expected, arrival):
        self.idx = idx
        self.kind = kind
        self.spec = KINDS[kind]
        self.request = request
        self.request_id = request.request_id
        self.expected = expected
        self.arrival = arrival  # monotonic time it is posted
        self.update_time = arrival
        self.retries = 0  # harmony_task.retries: failed tries so far
        self.owner = None
        self.state = "pending"  # pending | running | done | exhausted
        self.avoid_node = None
        self.avoid_until = 0.0
        self.own_proof = False
        self.tries = []  # {"node", "start", "end", "outcome", "code"} (wall-clock times)

    def terminal(self):
        return self.state in ("done", "exhausted")


class Node:
    def __init__(self, index, target, pb_grpc, max_pending):
        self.index = index
        self.target = target
        self.channel = grpc.insecure_channel(target, options=[
            # client.go:83: 256 MiB both ways. No keepalive, no retry policy, no metadata.
            ("grpc.max_send_message_length", 256 << 20),
            ("grpc.max_receive_message_length", 256 << 20),
            # Each Curio node is its own process with its own connection: without this, channels
            # of one Python process share subchannels (one TCP connection for every node).
            ("grpc.use_local_subchannel_pool", 1),
        ])
        self.stub = pb_grpc.ProvingEngineStub(self.channel)
        self.max_pending = max_pending
        self.active = 0  # the shared taskhelp.Max counter: claimed tasks whose Do() runs
        self.open_calls = 0
        self.max_open_calls = 0
        self.max_active = 0
        self.claimed = 0
        self.thread = None


class Cluster:
    def __init__(self, args, pb, pb_grpc):
        self.args = args
        self.pb = pb
        self.pb_grpc = pb_grpc
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.stop = False
        self.local_prefix = args.local_proof_prefix.encode()
        targets = [t.strip() for t in args.target.split(",") if t.strip()]
        self.nodes = [Node(i, targets[i % len(targets)], pb_grpc, args.max_pending)
                      for i in range(args.nodes)]
        self.tasks = self.make_tasks()
        self.workers = []
        self.errors_by_code = collections.Counter()
        self.errors = []
        self.wrong_proofs = 0
        self.wrong_proofs_accepted = 0
        self.wrong_samples = []
        self.retries = 0
        self.retries_on_other_node = 0
        self.post_local_calls = 0
        self.calls = collections.Counter()

    # --- tasks ---------------------------------------------------------------------------
    def make_tasks(self):
        a = self.args
        rng = random.Random(a.seed)
        counts = apportion(a.jobs, a.mix)
        kinds = [k for k in HANDLER_ORDER for _ in range(counts.get(k, 0))]
        rng.shuffle(kinds)
        maker = RequestMaker(self.pb, a, rng)
        start = time.monotonic()
        t = 0.0
        tasks = []
        for i, kind in enumerate(kinds):
            if a.rate_per_s > 0 and i > 0:
                t += rng.expovariate(a.rate_per_s)
            req = maker.make(kind)
            expected = (sim_proof_of(req) if KINDS[kind]["fleet"]
                        else local_proof_of(req, self.local_prefix))
            tasks.append(Task(i, kind, req, expected, start + t))
        return tasks

    def eligible(self, task, node, now):
        """harmonytask.go:412-431: unowned, RetryWait elapsed since update_time; and (ours) not
        just given back by this node while another may take it."""
        if task.state != "pending" or task.owner is not None or task.arrival > now:
            return False
        wait = task.spec["retry_wait"]
        if wait is not None and task.retries > 0:
            if now - task.update_time <= wait(task.retries) * self.args.retry_wait_scale:
                return False
        if task.avoid_node == node.index and now < task.avoid_until and len(self.nodes) > 1:
            return False
        return True

    # --- the pollers ---------------------------------------------------------------------
    def poller(self, node):
        """One node's harmonytask poller (harmonytask.go:267-296, 366-439)."""
        next_wait = self.args.poll_next_s
        while True:
            with self.cond:
                deadline = time.monotonic() + next_wait
                while not self.stop:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    self.cond.wait(left)
                if self.stop:
                    return
                accepted = self.poll_once(node)
            next_wait = self.args.poll_next_s if accepted else self.args.poll_s

    def poll_once(self, node):
        """Claim tasks of the first task type with eligible ones, up to MaxPending headroom.
        Called with the lock held."""
        if node.active >= node.max_pending:  # Max.AtMax(): nothing is considered
            return False
        now = time.monotonic()
        for kind in HANDLER_ORDER:
            ready = [t for t in self.tasks if t.kind == kind and self.eligible(t, node, now)]
            if not ready:
                continue
            ready.sort(key=lambda t: (t.update_time, t.idx))
            headroom = node.max_pending - node.active
            for task in ready[:headroom]:
                task.owner = node.index
                task.state = "running"
                node.active += 1
                node.claimed += 1
                node.max_active = max(node.max_active, node.active)
                w = threading.Thread(target=self.do_task, args=(node, task), daemon=True)
                self.workers.append(w)
                w.start()
            return True
        return False

    # --- one try ---------------------------------------------------------------------------
    def do_task(self, node, task):
        start = time.time()
        code, details, proof = None, "", None
        with self.lock:
            node.open_calls += 1
            node.max_open_calls = max(node.max_open_calls, node.open_calls)
            self.calls[task.kind] += 1
        try:
            resp = node.stub.Prove(self.pb.ProveRequest(submit=task.request),
                                   timeout=self.args.prove_timeout_s)
            if not resp.HasField("result"):
                code, details = "NIL_RESULT", "cuzk Prove returned nil result"
            elif resp.result.status != self.pb.AwaitProofResponse.COMPLETED:
                code = "RESULT_" + self.pb.AwaitProofResponse.Status.Name(resp.result.status)
                details = resp.result.error_message
            else:
                proof = resp.result.proof
        except grpc.RpcError as e:
            code, details = e.code().name, e.details() or ""
        except Exception as e:  # noqa: a broken channel must not lose the task
            code, details = "CLIENT_EXCEPTION", repr(e)
        end = time.time()
        with self.cond:
            node.open_calls -= 1
            outcome = "error"
            wrong = False
            if proof is not None:
                own = proof == task.expected
                if task.kind in POST_KINDS and proof == local_proof_of(task.request,
                                                                       self.local_prefix):
                    self.post_local_calls += 1
                if len(proof) == 0 and task.spec["empty_is_error"]:
                    code, details, wrong = "EMPTY_PROOF", "cuzk returned empty proof bytes", True
                elif own:
                    outcome = "done"
                elif task.spec["verified"]:
                    code, details, wrong = "PROOF_INVALID", "proof failed Curio's verification", True
                else:
                    outcome, wrong = "done_wrong_proof", True
                    self.wrong_proofs_accepted += 1
                if wrong:
                    self.wrong_proofs += 1
                    if len(self.wrong_samples) < 20:
                        self.wrong_samples.append({
                            "request_id": task.request_id, "kind": task.kind, "node": node.index,
                            "got": proof[:80].decode(errors="replace"),
                            "want": task.expected.decode(), "accepted": outcome != "error"})
            if code is not None and outcome == "error":
                self.errors_by_code[code] += 1
                if len(self.errors) < 50:
                    self.errors.append({"request_id": task.request_id, "kind": task.kind,
                                        "node": node.index, "try": len(task.tries) + 1,
                                        "code": code, "details": details[:300],
                                        "call_s": round(end - start, 3)})
            prev = task.tries[-1]["node"] if task.tries else None
            if prev is not None and prev != node.index:
                self.retries_on_other_node += 1
            task.tries.append({"node": node.index, "start": round(start, 3),
                               "end": round(end, 3), "outcome": outcome, "code": code})
            task.owner = None
            if outcome != "error":
                task.state = "done"
                task.own_proof = outcome == "done"
            elif task.retries >= task.spec["max_failures"] - 1:
                task.state = "exhausted"  # task_type_handler.go:349-357: deleted
            else:
                task.state = "pending"
                task.retries += 1
                task.update_time = time.monotonic()
                task.avoid_node = node.index
                task.avoid_until = task.update_time + self.args.prefer_other_node_s
                self.retries += 1
            node.active -= 1  # Do() returned: h.Max.Add(-1)
            self.cond.notify_all()

    # --- the run ---------------------------------------------------------------------------
    def run(self):
        start = time.time()
        give_up_at = time.monotonic() + self.args.give_up_s
        for node in self.nodes:
            node.thread = threading.Thread(target=self.poller, args=(node,), daemon=True)
            node.thread.start()
        with self.cond:
            while not all(t.terminal() for t in self.tasks):
                left = give_up_at - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(min(left, 1.0))
            self.stop = True
            self.cond.notify_all()
            drain_until = time.monotonic() + self.args.drain_s
            while any(n.active for n in self.nodes):
                left = drain_until - time.monotonic()
                if left <= 0:
                    break
                self.cond.wait(min(left, 1.0))
        for node in self.nodes:
            node.channel.close()
        for w in list(self.workers):
            w.join(5)
        return self.summary(time.time() - start)

    def summary(self, elapsed):
        with self.lock:
            tasks = self.tasks
            by_kind = collections.OrderedDict()
            for kind in HANDLER_ORDER:
                ts = [t for t in tasks if t.kind == kind]
                if not ts:
                    continue
                by_kind[kind] = {
                    "tasks": len(ts),
                    "completed": sum(1 for t in ts if t.state == "done"),
                    "completed_own_proof": sum(1 for t in ts if t.own_proof),
                    "tries_exhausted": sum(1 for t in ts if t.state == "exhausted"),
                    "calls": self.calls.get(kind, 0),
                    "request_id_example": ts[0].request_id,
                }

            def detail(t):
                return {"request_id": t.request_id, "kind": t.kind, "state": t.state,
                        "tries": t.tries}

            out = {
                "targets": [n.target for n in self.nodes],
                "nodes": len(self.nodes),
                "max_pending": self.args.max_pending,
                "prove_timeout_s": self.args.prove_timeout_s,
                "mix": self.args.mix,
                "tasks": len(tasks),
                "completed": sum(1 for t in tasks if t.state == "done"),
                "completed_own_proof": sum(1 for t in tasks if t.own_proof),
                "tries_exhausted": sum(1 for t in tasks if t.state == "exhausted"),
                "unfinished": sum(1 for t in tasks if not t.terminal()),
                "wrong_proofs": self.wrong_proofs,
                "wrong_proofs_accepted": self.wrong_proofs_accepted,
                "retries": self.retries,
                "retries_on_other_node": self.retries_on_other_node,
                "errors_by_code": dict(self.errors_by_code),
                "by_kind": by_kind,
                "calls_total": sum(self.calls.values()),
                "methods_called": {"Prove": sum(self.calls.values())},
                "post_local_calls": self.post_local_calls,
                "max_open_calls_per_node": [n.max_open_calls for n in self.nodes],
                "max_claimed_per_node": [n.max_active for n in self.nodes],
                "claims_per_node": [n.claimed for n in self.nodes],
                "elapsed_s": round(elapsed, 3),
                "errors": self.errors,
                "wrong_proof_samples": self.wrong_samples,
                "exhausted_tasks": [detail(t) for t in tasks if t.state == "exhausted"][:200],
                "unfinished_tasks": [detail(t) for t in tasks if not t.terminal()][:200],
                # request_id → SHA-256 hex of the proof expected, for the fleet's tasks: what the
                # store's proof_digest of each job must be.
                "proof_digests": {t.request_id: hashlib.sha256(t.expected).hexdigest()
                                  for t in tasks if t.spec["fleet"]},
                "request_ids": {k: sorted({t.request_id for t in tasks if t.kind == k})
                                for k in by_kind},
            }
        out["passed"] = (out["completed_own_proof"] == out["tasks"] and out["tries_exhausted"] == 0
                         and out["wrong_proofs"] == 0)
        return out


def apportion(total, mix):
    """Task counts per kind from the mix's weights (largest remainder; deterministic)."""
    weights = {k: w for k, w in mix.items() if w > 0}
    s = sum(weights.values())
    exact = {k: total * w / s for k, w in weights.items()}
    counts = {k: int(v) for k, v in exact.items()}
    rest = total - sum(counts.values())
    for k in sorted(exact, key=lambda k: (-(exact[k] - counts[k]), HANDLER_ORDER.index(k)))[:rest]:
        counts[k] += 1
    return counts


def parse_mix(text):
    mix = {}
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise ValueError("mix entry %r is not KIND=WEIGHT" % part)
        k, v = part.split("=", 1)
        k = k.strip()
        if k not in KINDS:
            raise ValueError("mix kind %r is not one of %s" % (k, ", ".join(KINDS)))
        mix[k] = float(v)
        if mix[k] < 0:
            raise ValueError("mix weight of %s is negative" % k)
    if sum(mix.values()) <= 0:
        raise ValueError("mix %r has no positive weight" % text)
    return mix


# --- the stand-in for the operator's own cuzk ------------------------------------------------
class LocalCuzk:
    """A fake operator-side cuzk daemon (what [gateway] local_cuzk points at): answers Prove with
    local_proof_of(request), COMPLETED. Counts every call by method, Prove by kind."""

    def __init__(self, pb, pb_grpc, listen="127.0.0.1:0", prefix=DEFAULT_LOCAL_PROOF_PREFIX,
                 prove_s=0.0, stats_file=None, workers=64):
        import concurrent.futures

        self.pb = pb
        self.prefix = prefix.encode() if isinstance(prefix, str) else prefix
        self.prove_s = prove_s
        self.stats_file = stats_file
        self.lock = threading.Lock()
        self.started = time.time()
        self.methods = collections.Counter()
        self.prove_by_kind = collections.Counter()
        self.running = collections.Counter()
        self.completed = 0
        self.request_ids = collections.Counter()
        outer = self

        class Engine(pb_grpc.ProvingEngineServicer):
            def Prove(self, request, context):
                return outer.prove(request, context)

            def CancelProof(self, request, context):
                outer.count("CancelProof")
                return pb.CancelProofResponse(was_running=False)  # as cuzk: not implemented

            def GetStatus(self, request, context):
                outer.count("GetStatus")
                return outer.status()

            def GetMetrics(self, request, context):
                outer.count("GetMetrics")
                with outer.lock:
                    text = "".join('cuzk_proofs_completed_total{kind="%s"} %d\n' % (k, v)
                                   for k, v in sorted(outer.prove_by_kind.items()))
                return pb.GetMetricsResponse(prometheus_text=text)

            def SubmitProof(self, request, context):
                outer.count("SubmitProof")
                context.abort(grpc.StatusCode.UNIMPLEMENTED,
                              "fake local cuzk: only Prove (what Curio calls)")

            def AwaitProof(self, request, context):
                outer.count("AwaitProof")
                context.abort(grpc.StatusCode.UNIMPLEMENTED,
                              "fake local cuzk: only Prove (what Curio calls)")

            def PreloadSRS(self, request, context):
                outer.count("PreloadSRS")
                return pb.PreloadSrsResponse(already_loaded=True)

            def EvictSRS(self, request, context):
                outer.count("EvictSRS")
                return pb.EvictSrsResponse(was_loaded=False)

        self.server = grpc.server(
            concurrent.futures.ThreadPoolExecutor(max_workers=workers),
            options=[("grpc.max_send_message_length", 256 << 20),
                     ("grpc.max_receive_message_length", 256 << 20)])
        pb_grpc.add_ProvingEngineServicer_to_server(Engine(), self.server)
        self.port = self.server.add_insecure_port(listen)
        if self.port == 0:
            raise RuntimeError("cannot listen on %s" % listen)
        self.host = listen.rsplit(":", 1)[0]
        self.server.start()
        self.write_stats()

    @property
    def address(self):
        return "%s:%d" % (self.host, self.port)

    def count(self, method):
        with self.lock:
            self.methods[method] += 1
        self.write_stats()

    def prove(self, request, context):
        sub = request.submit
        kind = kind_of(self.pb, sub)
        with self.lock:
            self.methods["Prove"] += 1
            self.prove_by_kind[kind] += 1
            self.request_ids[sub.request_id] += 1
            self.running[kind] += 1
        self.write_stats()
        t0 = time.time()
        try:
            if self.prove_s > 0:
                time.sleep(self.prove_s)
            proof = local_proof_of(sub, self.prefix)
        finally:
            with self.lock:
                self.running[kind] -= 1
                self.completed += 1
        total_ms = int((time.time() - t0) * 1000)
        self.write_stats()
        return self.pb.ProveResponse(result=self.pb.AwaitProofResponse(
            job_id=sub.request_id, status=self.pb.AwaitProofResponse.COMPLETED, proof=proof,
            gpu_compute_ms=total_ms, total_ms=total_ms))

    def status(self):
        pb = self.pb
        names = {"porep": "porep-c2", "snap": "snap-update", "wdpost": "window-post",
                 "winpost": "winning-post"}
        with self.lock:
            queues = [pb.QueueStatus(proof_kind=names[k], pending=0,
                                     in_progress=max(0, self.running.get(k, 0)))
                      for k in ("porep", "snap", "wdpost", "winpost")]
            return pb.GetStatusResponse(
                gpus=[pb.GPUStatus(ordinal=0, name="fake local cuzk GPU",
                                   vram_total_bytes=24 << 30, vram_free_bytes=20 << 30)],
                queues=queues, total_proofs_completed=self.completed, total_proofs_failed=0,
                uptime_seconds=int(time.time() - self.started))

    def stats(self):
        with self.lock:
            return {"listen": self.address, "methods": dict(self.methods),
                    "prove_by_kind": dict(self.prove_by_kind), "completed": self.completed,
                    "distinct_request_ids": len(self.request_ids),
                    "request_ids_called_more_than_once": sum(
                        1 for v in self.request_ids.values() if v > 1)}

    def write_stats(self):
        if not self.stats_file:
            return
        text = json.dumps(self.stats(), sort_keys=True)
        with self.lock:  # one writer at a time: the .tmp name is shared
            with open(self.stats_file + ".tmp", "w") as f:
                f.write(text + "\n")
            os.replace(self.stats_file + ".tmp", self.stats_file)

    def stop(self, grace=None):
        self.server.stop(grace).wait()
        self.write_stats()


def serve_local_cuzk(args, pb, pb_grpc):
    local = LocalCuzk(pb, pb_grpc, args.serve_local_cuzk, args.local_proof_prefix,
                      args.local_prove_s, args.local_cuzk_stats)
    done = threading.Event()

    def on_signal(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print("local-cuzk listening on %s" % local.address, flush=True)
    while not done.wait(1.0):
        pass
    local.stop(1)
    print(json.dumps(local.stats(), sort_keys=True), flush=True)
    return 0


def probe(args, pb, pb_grpc):
    """--probe: GetStatus every --probe-every-s until SIGTERM, alternately on one channel kept
    open (a connection the serve had before a restart) and on a new channel (a new connection:
    whoever accepts now). Prints one JSON line: calls, failures by code, the longest call."""
    done = threading.Event()

    def on_signal(signum, frame):
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    kept = grpc.insecure_channel(args.probe)
    stats = {"calls": 0, "failures": 0, "failures_by_code": collections.Counter(),
             "longest_s": 0.0, "longest_at": None, "longest_on": None,
             "failure_samples": []}
    print("probe of %s running" % args.probe, flush=True)
    fresh_turn = False
    while not done.is_set():
        channel = grpc.insecure_channel(args.probe) if fresh_turn else kept
        start = time.time()
        details = ""
        try:
            pb_grpc.ProvingEngineStub(channel).GetStatus(pb.GetStatusRequest(), timeout=120)
            code = None
        except grpc.RpcError as e:
            code, details = e.code().name, e.details() or ""
        took = time.time() - start
        if fresh_turn:
            channel.close()
        stats["calls"] += 1
        if code is not None:
            stats["failures"] += 1
            stats["failures_by_code"][code] += 1
            if len(stats["failure_samples"]) < 10:
                stats["failure_samples"].append({
                    "at": round(start, 3), "took_s": round(took, 3), "code": code,
                    "details": details[:200], "on": "new channel" if fresh_turn else "kept channel"})
        if took > stats["longest_s"]:
            stats["longest_s"], stats["longest_at"] = round(took, 3), round(start, 3)
            stats["longest_on"] = "new channel" if fresh_turn else "kept channel"
        fresh_turn = not fresh_turn
        done.wait(args.probe_every_s)
    kept.close()
    stats["failures_by_code"] = dict(stats["failures_by_code"])
    print(json.dumps(stats, sort_keys=True), flush=True)
    return 0


# --- command line ----------------------------------------------------------------------------
def parse_args(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 1)[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", help="HOST:PORT[,HOST:PORT...] of the ProvingEngine endpoint(s) "
                   "([Cuzk] Address); node i uses target i mod their number")
    p.add_argument("--nodes", type=int, default=2, help="Curio nodes, each with its own channel")
    p.add_argument("--max-pending", type=int, default=10, help="[Cuzk] MaxPending, per node")
    p.add_argument("--prove-timeout-s", type=float, default=1800,
                   help="[Cuzk] ProveTimeout: each Prove call's deadline (default 30 min)")
    p.add_argument("--jobs", type=int, default=200, help="tasks in all")
    p.add_argument("--mix", default=DEFAULT_MIX,
                   help="task kinds' shares, KIND=WEIGHT,... of porep, snap, wdpost, winpost "
                        "(default %(default)s)")
    p.add_argument("--rate-per-s", type=float, default=0.0,
                   help="Poisson arrivals at this rate; 0: every task posted at the start")
    p.add_argument("--vanilla-bytes", type=int, default=4096,
                   help="random bytes in each task's vanilla proof(s)")
    p.add_argument("--wdpost-partitions", type=int, default=1,
                   help="WdPost tasks per deadline: they share the randomness and so, as in "
                        "Curio, the request_id (default 1: distinct ids)")
    p.add_argument("--miner", type=int, default=1000)
    p.add_argument("--first-sector", type=int, default=1)
    p.add_argument("--seed", type=int, default=12)
    p.add_argument("--summary", help="write the JSON summary here")
    p.add_argument("--proto-dir", default=os.path.join(here, "..", "..", "proto"))
    p.add_argument("--local-proof-prefix", default=DEFAULT_LOCAL_PROOF_PREFIX,
                   help="PoSt proofs must be hex SHA-256(prefix + request without request_id)")
    p.add_argument("--poll-s", type=float, default=3.0, help="harmony POLL_DURATION")
    p.add_argument("--poll-next-s", type=float, default=0.1, help="harmony POLL_NEXT_DURATION")
    p.add_argument("--retry-wait-scale", type=float, default=1.0,
                   help="multiply the kinds' RetryWait (PoRep: min(2^retries s, 2 min)) by this")
    p.add_argument("--prefer-other-node-s", type=float, default=None,
                   help="a task given back by a node is left to the others this long "
                        "(default: --poll-s + --poll-next-s)")
    p.add_argument("--give-up-s", type=float, default=3600,
                   help="stop claiming after this long; unfinished tasks then count as such")
    p.add_argument("--drain-s", type=float, default=30,
                   help="after giving up, wait this long for open calls before closing")
    p.add_argument("--serve-local-cuzk", metavar="HOST:PORT",
                   help="run the stand-in for the operator's own cuzk instead (port 0: any)")
    p.add_argument("--local-cuzk-stats", help="with --serve-local-cuzk: keep its counts here")
    p.add_argument("--local-prove-s", type=float, default=0.2,
                   help="with --serve-local-cuzk: seconds each Prove takes")
    p.add_argument("--probe", metavar="HOST:PORT",
                   help="instead: call GetStatus there until SIGTERM and print the longest call "
                        "and the failures (a restart's stall)")
    p.add_argument("--probe-every-s", type=float, default=0.1,
                   help="with --probe: the pause between calls")
    args = p.parse_args(argv)
    if args.serve_local_cuzk or args.probe:
        return args
    if not args.target:
        p.error("--target is required (or --serve-local-cuzk)")
    if args.jobs < 1 or args.max_pending < 1 or args.nodes < 1 or args.wdpost_partitions < 1:
        p.error("--jobs, --max-pending, --nodes and --wdpost-partitions must be positive")
    if args.poll_s <= 0 or args.poll_next_s <= 0 or args.prove_timeout_s <= 0:
        p.error("--poll-s, --poll-next-s and --prove-timeout-s must be positive")
    try:
        args.mix = parse_mix(args.mix)
    except ValueError as e:
        p.error(str(e))
    if args.prefer_other_node_s is None:
        args.prefer_other_node_s = args.poll_s + args.poll_next_s
    return args


def run(argv, pb, pb_grpc):
    """Runs with stubs already generated; (exit code, summary). For tests in-process."""
    args = parse_args(argv)
    if args.serve_local_cuzk:
        return serve_local_cuzk(args, pb, pb_grpc), None
    if args.probe:
        return probe(args, pb, pb_grpc), None
    summary = Cluster(args, pb, pb_grpc).run()
    text = json.dumps(summary, indent=1, sort_keys=True)
    if args.summary:
        with open(args.summary + ".tmp", "w") as f:
            f.write(text + "\n")
        os.replace(args.summary + ".tmp", args.summary)
    brief = {k: v for k, v in summary.items()
             if k not in ("proof_digests", "request_ids", "errors", "exhausted_tasks",
                          "unfinished_tasks", "wrong_proof_samples")}
    print(json.dumps(brief, sort_keys=True), flush=True)
    return (0 if summary["passed"] else 1), summary


def main(argv):
    args = parse_args(argv)  # --help and argument errors before protoc
    with tempfile.TemporaryDirectory(prefix="pf-curio-stubs-") as gen:
        pb, pb_grpc = generate_stubs(os.path.abspath(args.proto_dir), gen)
        rc, _ = run(argv, pb, pb_grpc)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
