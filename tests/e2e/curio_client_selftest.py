#!/usr/bin/env python3
"""Checks the Curio cluster stand-in (curio_cluster.py) itself, in seconds, against an
in-process fake gateway written here from the same generated stubs. The fake proves PoRep and
snap with the sim proof, relays PoSt to curio_cluster's LocalCuzk (the operator's own cuzk) or,
without one, refuses it FAILED_PRECONDITION, and follows a per-kind plan of misbehaviour for the
first request of a kind: UNAVAILABLE, or a proof that is not of the input.

  (a) 2 nodes: no node ever holds more than MaxPending calls open (seen by the fake, per
      connection, and by the cluster), and the limit is reached;
  (b) a PoRep task failing twice (UNAVAILABLE) then succeeding is retried with the same
      request_id and input, at least once from the other node;
  (c) a WinningPoSt failing once is not retried (MaxFailures 1): tries_exhausted 1, exit 1;
  (d) a wrong PoRep proof fails the try and is retried; a wrong snap proof is accepted
      (wrong_proofs_accepted); both count in wrong_proofs and the exit is 1;
  (e) only Prove is ever called, on the gateway and on the local cuzk;
  plus: request ids as Curio builds them, no local cuzk → FAILED_PRECONDITION at once, and the
  --serve-local-cuzk process (as gateway_e2e.py runs it) answering Prove, CancelProof, GetStatus.

Usage: curio_client_selftest.py [--proto-dir proto]
"""

import argparse
import collections
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

import grpc

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import curio_cluster  # noqa: E402

MAX_PENDING = 3
ID_PATTERNS = {
    "porep": r"porep-1000-[0-9]+",
    "snap": r"snap-1000-[0-9]+",
    "wdpost": r"wdpost-1000-0-\[[0-9]{1,3}( [0-9]{1,3}){7}\]",
    "winpost": r"winpost-1000-[0-9a-f]{16}",
}


class FakeGateway:
    """A ProvingEngine standing for proverfleet's gateway."""

    def __init__(self, pb, pb_grpc, plan=None, local=None, delay_s=0.08):
        self.pb = pb
        self.plan = dict(plan or {})  # kind → list of actions for its first request_id
        self.planned = {}  # kind → request_id the plan applies to
        self.delay_s = delay_s
        self.lock = threading.Lock()
        self.methods = collections.Counter()
        self.calls = collections.defaultdict(list)  # request_id → [(peer, input bytes)]
        self.open_by_peer = collections.Counter()
        self.max_open_by_peer = collections.Counter()
        self.local_stub = None
        if local:
            self.local_channel = grpc.insecure_channel(local)
            self.local_stub = pb_grpc.ProvingEngineStub(self.local_channel)
        outer = self

        def refuse(name):
            def handler(self, request, context):
                outer.count(name)
                context.abort(grpc.StatusCode.UNIMPLEMENTED, "fake gateway: %s" % name)
            return handler

        attrs = {m: refuse(m) for m in ("SubmitProof", "AwaitProof", "CancelProof", "GetStatus",
                                         "GetMetrics", "PreloadSRS", "EvictSRS")}
        attrs["Prove"] = lambda self, request, context: outer.prove(request, context)
        Engine = type("Engine", (pb_grpc.ProvingEngineServicer,), attrs)
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=32))
        pb_grpc.add_ProvingEngineServicer_to_server(Engine(), self.server)
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def count(self, name):
        with self.lock:
            self.methods[name] += 1

    def prove(self, request, context):
        pb = self.pb
        sub = request.submit
        kind = curio_cluster.kind_of(pb, sub)
        rid = sub.request_id
        peer = context.peer()
        with self.lock:
            self.methods["Prove"] += 1
            self.calls[rid].append((peer, curio_cluster._input_bytes(sub)))
            if kind in self.plan and kind not in self.planned:
                self.planned[kind] = rid
            action = None
            if self.planned.get(kind) == rid and self.plan.get(kind):
                action = self.plan[kind].pop(0)
            self.open_by_peer[peer] += 1
            self.max_open_by_peer[peer] = max(self.max_open_by_peer[peer],
                                              self.open_by_peer[peer])
        try:
            time.sleep(self.delay_s)
            if action == "UNAVAILABLE":
                context.abort(grpc.StatusCode.UNAVAILABLE, "fake gateway: going away")
            if kind in ("wdpost", "winpost"):
                if self.local_stub is None:
                    context.abort(grpc.StatusCode.FAILED_PRECONDITION,
                                  "PoSt is proved by the operator's own cuzk: no [gateway] "
                                  "local_cuzk is configured")
                resp = self.local_stub.Prove(request, timeout=30)
                if action == "WRONG":
                    resp.result.proof = b"0" * 64
                return resp
            proof = curio_cluster.sim_proof_of(sub)
            if action == "WRONG":
                proof = b"0" * len(proof)
            return pb.ProveResponse(result=pb.AwaitProofResponse(
                job_id=rid, status=pb.AwaitProofResponse.COMPLETED, proof=proof))
        finally:
            with self.lock:
                self.open_by_peer[peer] -= 1

    def stop(self):
        self.server.stop(0).wait()
        if self.local_stub is not None:
            self.local_channel.close()


def run_cluster(pb, pb_grpc, port, tmp, name, extra):
    summary_path = os.path.join(tmp, name + ".json")
    argv = ["--target", "127.0.0.1:%d" % port, "--nodes", "2", "--max-pending", str(MAX_PENDING),
            "--summary", summary_path, "--poll-s", "0.05", "--poll-next-s", "0.01",
            "--prefer-other-node-s", "0.3", "--retry-wait-scale", "0.02", "--give-up-s", "60",
            "--prove-timeout-s", "20", "--vanilla-bytes", "512"] + extra
    print("selftest: run %s: curio_cluster %s" % (name, " ".join(extra)), flush=True)
    rc, summary = curio_cluster.run(argv, pb, pb_grpc)
    with open(summary_path) as f:
        on_disk = json.load(f)
    assert on_disk["tasks"] == summary["tasks"]
    return rc, summary


class Checks:
    def __init__(self):
        self.failures = []

    def __call__(self, ok, what):
        if not ok:
            self.failures.append(what)
            print("FAIL: " + what, file=sys.stderr, flush=True)


def brief(s):
    return json.dumps({k: s[k] for k in ("tasks", "completed", "completed_own_proof",
                                         "tries_exhausted", "wrong_proofs",
                                         "wrong_proofs_accepted", "retries",
                                         "retries_on_other_node", "errors_by_code",
                                         "max_open_calls_per_node", "post_local_calls")},
                      sort_keys=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--proto-dir", default=os.path.join(HERE, "..", "..", "proto"))
    proto_dir = os.path.abspath(p.parse_args().proto_dir)
    check = Checks()
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="pf-curio-selftest-") as tmp:
        gen = os.path.join(tmp, "gen")
        os.mkdir(gen)
        pb, pb_grpc = curio_cluster.generate_stubs(proto_dir, gen)
        local = curio_cluster.LocalCuzk(pb, pb_grpc, "127.0.0.1:0", prove_s=0.05)

        # (a), (b), (e): 40 tasks of every kind, the first PoRep dropped twice.
        gw = FakeGateway(pb, pb_grpc, plan={"porep": ["UNAVAILABLE", "UNAVAILABLE"]},
                         local=local.address)
        rc, s = run_cluster(pb, pb_grpc, gw.port, tmp, "mixed",
                            ["--jobs", "40", "--mix", "porep=0.6,snap=0.2,wdpost=0.1,winpost=0.1"])
        gw.stop()
        check(rc == 0 and s["completed_own_proof"] == 40 and s["tries_exhausted"] == 0
              and s["wrong_proofs"] == 0, "mixed run: rc %d, %s" % (rc, brief(s)))
        # (a)
        check(all(n <= MAX_PENDING for n in s["max_open_calls_per_node"]) and
              all(n <= MAX_PENDING for n in s["max_claimed_per_node"]),
              "a node held more than MaxPending %d: %s" % (MAX_PENDING, brief(s)))
        check(MAX_PENDING in s["max_open_calls_per_node"],
              "MaxPending was never reached: %s" % s["max_open_calls_per_node"])
        peers = dict(gw.max_open_by_peer)
        check(len(peers) == 2, "the gateway saw %d connections, want 2 (one per node): %s" %
              (len(peers), peers))
        check(all(v <= MAX_PENDING for v in peers.values()),
              "the gateway saw more than MaxPending open calls on a connection: %s" % peers)
        # (b)
        rid = gw.planned.get("porep")
        calls = gw.calls.get(rid, [])
        check(len(calls) == 3, "planned PoRep %s: %d calls, want 3" % (rid, len(calls)))
        check(len({c[1] for c in calls}) == 1, "the retried PoRep's input changed between tries")
        check(len({c[0] for c in calls}) >= 2,
              "the retried PoRep never ran on the other node: %s" % [c[0] for c in calls])
        check(s["retries"] >= 2 and s["retries_on_other_node"] >= 1,
              "retries %d, on another node %d" % (s["retries"], s["retries_on_other_node"]))
        check(s["errors_by_code"] == {"UNAVAILABLE": 2}, "errors: %s" % s["errors_by_code"])
        # (e)
        check(dict(gw.methods) == {"Prove": s["calls_total"]},
              "gateway methods called: %s (calls %d)" % (dict(gw.methods), s["calls_total"]))
        post = s["by_kind"]["wdpost"]["tasks"] + s["by_kind"]["winpost"]["tasks"]
        check(local.stats()["methods"] == {"Prove": post} and s["post_local_calls"] == post,
              "local cuzk: %s, post_local_calls %d, PoSt tasks %d" %
              (local.stats(), s["post_local_calls"], post))
        for kind, rx in ID_PATTERNS.items():
            bad = [r for r in s["request_ids"].get(kind, []) if not re.fullmatch(rx, r)]
            check(s["request_ids"].get(kind) and not bad,
                  "%s request ids not as Curio builds them: %s" %
                  (kind, (bad or s["request_ids"].get(kind))[:3]))
        print("selftest: mixed: " + brief(s), flush=True)

        # (c) a WinningPoSt failing once is dropped.
        gw = FakeGateway(pb, pb_grpc, plan={"winpost": ["UNAVAILABLE"]}, local=local.address)
        rc, s = run_cluster(pb, pb_grpc, gw.port, tmp, "winpost",
                            ["--jobs", "6", "--mix", "porep=0.5,winpost=0.5", "--seed", "13"])
        gw.stop()
        rid = gw.planned.get("winpost")
        check(rc != 0 and s["tries_exhausted"] == 1 and
              s["by_kind"]["winpost"]["tries_exhausted"] == 1 and s["completed_own_proof"] == 5,
              "winpost failing once: rc %d, %s" % (rc, brief(s)))
        check(len(gw.calls.get(rid, [])) == 1,
              "the failed WinningPoSt was called %d times, want 1" % len(gw.calls.get(rid, [])))
        print("selftest: winpost: " + brief(s), flush=True)

        # (d) wrong proofs: PoRep retried, snap accepted.
        gw = FakeGateway(pb, pb_grpc, plan={"porep": ["WRONG"], "snap": ["WRONG"]},
                         local=local.address)
        rc, s = run_cluster(pb, pb_grpc, gw.port, tmp, "wrong",
                            ["--jobs", "6", "--mix", "porep=0.5,snap=0.5", "--seed", "14"])
        gw.stop()
        porep_rid, snap_rid = gw.planned.get("porep"), gw.planned.get("snap")
        check(rc != 0 and s["wrong_proofs"] == 2 and s["wrong_proofs_accepted"] == 1 and
              s["completed"] == 6 and s["completed_own_proof"] == 5 and
              s["tries_exhausted"] == 0 and s["errors_by_code"] == {"PROOF_INVALID": 1},
              "wrong proofs: rc %d, %s" % (rc, brief(s)))
        check(len(gw.calls.get(porep_rid, [])) == 2,
              "the PoRep with a wrong proof was called %d times, want 2" %
              len(gw.calls.get(porep_rid, [])))
        check(len(gw.calls.get(snap_rid, [])) == 1,
              "the snap with a wrong proof was called %d times, want 1 (Curio keeps it)" %
              len(gw.calls.get(snap_rid, [])))
        print("selftest: wrong: " + brief(s), flush=True)

        # No local cuzk: a WinningPoSt is refused at once.
        gw = FakeGateway(pb, pb_grpc)
        rc, s = run_cluster(pb, pb_grpc, gw.port, tmp, "nolocal",
                            ["--jobs", "1", "--mix", "winpost=1", "--nodes", "1", "--seed", "15"])
        gw.stop()
        err = (s["errors"] or [{}])[0]
        check(rc != 0 and s["errors_by_code"] == {"FAILED_PRECONDITION": 1} and
              "local_cuzk" in err.get("details", "") and s["tries_exhausted"] == 1,
              "no local cuzk: rc %d, %s, %s" % (rc, brief(s), err))
        local.stop()

        # The local cuzk as gateway_e2e.py runs it: a process of its own.
        stats_path = os.path.join(tmp, "local-stats.json")
        proc = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "curio_cluster.py"), "--serve-local-cuzk",
             "127.0.0.1:0", "--local-cuzk-stats", stats_path, "--proto-dir", proto_dir,
             "--local-prove-s", "0"], stdout=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            m = re.match(r"local-cuzk listening on (\S+)", line)
            check(m is not None, "--serve-local-cuzk printed %r" % line)
            if m:
                ch = grpc.insecure_channel(m.group(1))
                stub = pb_grpc.ProvingEngineStub(ch)
                req = pb.SubmitProofRequest(request_id="winpost-1-00", miner_id=1,
                                            proof_kind=pb.WINNING_POST, randomness=b"r" * 32)
                res = stub.Prove(pb.ProveRequest(submit=req), timeout=10).result
                check(res.status == pb.AwaitProofResponse.COMPLETED and
                      res.proof == curio_cluster.local_proof_of(req), "local Prove: %s" % res)
                check(stub.CancelProof(pb.CancelProofRequest(job_id="winpost-1-00"),
                                       timeout=10).was_running is False, "CancelProof")
                st = stub.GetStatus(pb.GetStatusRequest(), timeout=10)
                check(len(st.queues) == 4 and st.total_proofs_completed == 1,
                      "GetStatus: %s" % st)
                try:
                    stub.SubmitProof(req, timeout=10)
                    check(False, "SubmitProof was answered")
                except grpc.RpcError as e:
                    check(e.code() == grpc.StatusCode.UNIMPLEMENTED, "SubmitProof: %s" % e.code())
                ch.close()
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=20)
        with open(stats_path) as f:
            stats = json.load(f)
        check(stats["methods"] == {"Prove": 1, "CancelProof": 1, "GetStatus": 1,
                                   "SubmitProof": 1} and stats["prove_by_kind"] == {"winpost": 1},
              "local cuzk stats: %s" % stats)
        check(proc.returncode == 0, "--serve-local-cuzk exited %s on SIGTERM" % proc.returncode)

    for f in check.failures:
        print("FAIL: " + f, file=sys.stderr)
    print("curio_cluster self-test: %s (%.1f s)" %
          ("FAILED" if check.failures else "passed", time.time() - started))
    return 1 if check.failures else 0


if __name__ == "__main__":
    sys.exit(main())
