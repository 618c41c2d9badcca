#!/usr/bin/env python3
"""A stand-in for Curio talking to its one cuzk daemon (here: proverfleet's gateway).

Its gRPC stubs are generated from proto/cuzk/v1/proving.proto at run time with Debian's
python3-grpc-tools, independently of the C++ code generated for proverfleet, so the wire
contract is tested from the outside.

What it does, as Curio's PoRep C2 tasks do ([Cuzk] Address, MaxPending, ProveTimeout):
  - submits N PoRep-shaped jobs with distinct inputs through the blocking `Prove` RPC, each
    with Curio's request_id convention "porep-<miner>-<sector>";
  - keeps at most MaxPending calls of its own in flight, and starts a new one only while
    GetStatus shows Σ(pending + in_progress) below MaxPending (Curio's backpressure);
  - retries a call that ends UNAVAILABLE or DEADLINE_EXCEEDED with the same request_id (a
    restarted daemon, a lost connection), as a re-run harmony task does;
  - checks each answer is the sim prover's proof of its own input: the hex SHA-256 of
    "pf-sim-proof:" + the SubmitProofRequest serialized with request_id cleared.
Writes a JSON summary (--summary) and exits 0 only when every job got its own proof.

Usage: curio_client.py --target 127.0.0.1:9820 --jobs 200 [--max-pending 10]
       [--summary out.json] [--proto-dir proto] [--vanilla-bytes 4096] [--miner 1000]
       [--first-sector 1] [--prove-timeout-s 1800] [--give-up-s 900]
"""

import argparse
import base64
import hashlib
import json
import os
import random
import sys
import tempfile
import threading
import time

import grpc

SIM_PROOF_PREFIX = b"pf-sim-proof:"
SECTOR_SIZE_32G = 34359738368
REGISTERED_SEAL_PROOF_32G_V1_1 = 8  # StackedDrg32GiBV1_1
RETRIED_CODES = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


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


def sim_proof_of(request):
    """The proof the sim prover derives from a job's input (the issue-12 contract)."""
    copy = type(request)()
    copy.CopyFrom(request)
    copy.request_id = ""
    return hashlib.sha256(SIM_PROOF_PREFIX + copy.SerializeToString()).hexdigest().encode()


def c1_envelope(sector, miner, size, rng):
    """A PoRep C1 envelope shaped like Curio's wrapC1Output: SectorNum, Phase1Out, SectorSize.
    Phase1Out carries random bytes, so every job's input differs."""
    phase1 = json.dumps({
        "registered_proof": "StackedDrg32GiBV1_1",
        "miner": miner,
        "sector": sector,
        "noise": base64.b64encode(rng.randbytes(max(0, size))).decode(),
    }).encode()
    return json.dumps({
        "SectorNum": sector,
        "Phase1Out": base64.b64encode(phase1).decode(),
        "SectorSize": SECTOR_SIZE_32G,
    }).encode()


class Job:
    def __init__(self, request, expected):
        self.request = request
        self.request_id = request.request_id
        self.expected = expected
        self.calls = 0
        self.retried_codes = []  # status code names of retried calls
        self.answers = 0  # successful (COMPLETED) answers received
        self.ok = False
        self.error = ""
        self.started_at = 0.0
        self.finished_at = 0.0


class Client:
    def __init__(self, args, pb, pb_grpc):
        self.args = args
        self.pb = pb
        self.channel = grpc.insecure_channel(
            args.target,
            options=[
                ("grpc.max_send_message_length", 256 << 20),
                ("grpc.max_receive_message_length", 256 << 20),
                # Come back quickly after a restart of the daemon.
                ("grpc.initial_reconnect_backoff_ms", 200),
                ("grpc.max_reconnect_backoff_ms", 2000),
            ],
        )
        self.stub = pb_grpc.ProvingEngineStub(self.channel)
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.status_calls = 0
        self.status_failures = 0
        self.status_held = 0  # times GetStatus held a new submission back

    def make_jobs(self):
        rng = random.Random(self.args.seed)
        jobs = []
        for i in range(self.args.jobs):
            sector = self.args.first_sector + i
            req = self.pb.SubmitProofRequest(
                request_id="porep-%d-%d" % (self.args.miner, sector),
                proof_kind=self.pb.POREP_SEAL_COMMIT,
                sector_size=SECTOR_SIZE_32G,
                registered_proof=REGISTERED_SEAL_PROOF_32G_V1_1,
                vanilla_proof=c1_envelope(sector, self.args.miner, self.args.vanilla_bytes, rng),
                sector_number=sector,
                miner_id=self.args.miner,
            )
            jobs.append(Job(req, sim_proof_of(req)))
        return jobs

    def fleet_busy(self):
        """Σ(pending + in_progress) over GetStatus's queues; None when the call failed."""
        with self.lock:
            self.status_calls += 1
        try:
            st = self.stub.GetStatus(self.pb.GetStatusRequest(), timeout=10)
        except grpc.RpcError:
            with self.lock:
                self.status_failures += 1
            return None
        return sum(q.pending + q.in_progress for q in st.queues)

    def prove(self, job, give_up_at):
        job.started_at = time.time()
        backoff = 0.5
        while True:
            job.calls += 1
            try:
                resp = self.stub.Prove(self.pb.ProveRequest(submit=job.request),
                                       timeout=self.args.prove_timeout_s)
            except grpc.RpcError as e:
                code = e.code()
                if code in RETRIED_CODES and time.time() < give_up_at:
                    job.retried_codes.append(code.name)
                    time.sleep(backoff)
                    backoff = min(backoff * 2, 4.0)
                    continue
                job.error = "%s: %s" % (code.name, e.details())
                break
            result = resp.result
            if result.status != self.pb.AwaitProofResponse.COMPLETED:
                job.error = "status %s: %s" % (
                    self.pb.AwaitProofResponse.Status.Name(result.status), result.error_message)
                break
            job.answers += 1
            if result.proof == job.expected:
                job.ok = True
            else:
                job.error = "wrong proof: got %r, want %r" % (result.proof[:80], job.expected)
            break
        job.finished_at = time.time()
        with self.lock:
            self.in_flight -= 1

    def run(self):
        jobs = self.make_jobs()
        start = time.time()
        give_up_at = start + self.args.give_up_s
        threads = []
        for job in jobs:
            # Curio's harmony task limit (MaxPending) and its CanAccept gate on GetStatus.
            while True:
                if time.time() > give_up_at:
                    job.error = "never submitted: the fleet stayed busy or unreachable"
                    break
                with self.lock:
                    room = self.in_flight < self.args.max_pending
                if room:
                    busy = self.fleet_busy()
                    if busy is not None and busy < self.args.max_pending:
                        break
                    if busy is not None:
                        with self.lock:
                            self.status_held += 1
                time.sleep(0.2)
            if job.error:
                continue
            with self.lock:
                self.in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self.in_flight)
            t = threading.Thread(target=self.prove, args=(job, give_up_at), daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join(max(1.0, give_up_at + self.args.prove_timeout_s - time.time()))
        elapsed = time.time() - start
        return self.summary(jobs, elapsed)

    def summary(self, jobs, elapsed):
        wrong = [j for j in jobs if not j.ok]
        latencies = sorted(j.finished_at - j.started_at for j in jobs if j.ok)

        def pct(p):
            if not latencies:
                return None
            return round(latencies[min(len(latencies) - 1, int(p * len(latencies)))], 3)

        return {
            "target": self.args.target,
            "jobs": len(jobs),
            "answered": sum(1 for j in jobs if j.answers > 0),
            "correct": sum(1 for j in jobs if j.ok),
            "answers_total": sum(j.answers for j in jobs),
            "calls_total": sum(j.calls for j in jobs),
            "retried_calls": sum(len(j.retried_codes) for j in jobs),
            "jobs_retried": sum(1 for j in jobs if j.retried_codes),
            "max_in_flight": self.max_in_flight,
            "max_pending": self.args.max_pending,
            "status_calls": self.status_calls,
            "status_failures": self.status_failures,
            "status_held": self.status_held,
            "elapsed_s": round(elapsed, 3),
            "latency_p50_s": pct(0.5),
            "latency_p95_s": pct(0.95),
            "failures": [{"request_id": j.request_id, "error": j.error, "calls": j.calls}
                         for j in wrong][:50],
            # request_id → SHA-256 hex of the proof expected: what the store's proof_digest of
            # each job must be.
            "proof_digests": {j.request_id: hashlib.sha256(j.expected).hexdigest() for j in jobs},
        }


def parse_args(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", required=True, help="HOST:PORT of the ProvingEngine endpoint")
    p.add_argument("--jobs", type=int, default=200)
    p.add_argument("--max-pending", type=int, default=10, help="Curio's [Cuzk] MaxPending")
    p.add_argument("--summary", help="write the JSON summary here")
    p.add_argument("--proto-dir", default=os.path.join(here, "..", "..", "proto"))
    p.add_argument("--vanilla-bytes", type=int, default=4096,
                   help="random bytes inside each job's C1 envelope")
    p.add_argument("--miner", type=int, default=1000)
    p.add_argument("--first-sector", type=int, default=1)
    p.add_argument("--seed", type=int, default=12)
    p.add_argument("--prove-timeout-s", type=float, default=1800, help="Curio's ProveTimeout")
    p.add_argument("--give-up-s", type=float, default=900,
                   help="stop retrying and stop submitting after this long")
    args = p.parse_args(argv)
    if args.jobs < 1 or args.max_pending < 1:
        p.error("--jobs and --max-pending must be positive")
    return args


def main(argv):
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="pf-curio-stubs-") as gen:
        pb, pb_grpc = generate_stubs(os.path.abspath(args.proto_dir), gen)
        summary = Client(args, pb, pb_grpc).run()
    text = json.dumps(summary, indent=1, sort_keys=True)
    if args.summary:
        with open(args.summary + ".tmp", "w") as f:
            f.write(text + "\n")
        os.replace(args.summary + ".tmp", args.summary)
    brief = {k: v for k, v in summary.items() if k not in ("proof_digests",)}
    print(json.dumps(brief, sort_keys=True))
    return 0 if summary["correct"] == summary["jobs"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
