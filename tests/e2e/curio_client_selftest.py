#!/usr/bin/env python3
"""Checks the Curio stand-in (curio_client.py) itself, against an in-process ProvingEngine
written here from the same generated stubs: a daemon that answers the sim proof, turns some
calls away with UNAVAILABLE (the client must retry with the same request_id), and, in a second
run, answers one job with another job's proof (the client must report it and exit non-zero).

Usage: curio_client_selftest.py [--proto-dir proto]
"""

import argparse
import concurrent.futures
import json
import os
import sys
import tempfile
import threading

import grpc

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import curio_client  # noqa: E402


def serve(pb, pb_grpc, wrong_for=None, unavailable_every=7):
    """A fake daemon; returns (server, port, seen) where seen counts Prove calls by request_id."""
    seen = {}
    lock = threading.Lock()
    running = [0]

    class Engine(pb_grpc.ProvingEngineServicer):
        def Prove(self, request, context):
            rid = request.submit.request_id
            with lock:
                seen[rid] = seen.get(rid, 0) + 1
                n = seen[rid]
                total = sum(seen.values())
                running[0] += 1
            try:
                # Every `unavailable_every`-th call, first try only: a daemon going away.
                if n == 1 and total % unavailable_every == 0:
                    context.abort(grpc.StatusCode.UNAVAILABLE, "restarting")
                proof = curio_client.sim_proof_of(request.submit)
                if rid == wrong_for:
                    proof = b"0" * len(proof)
                return pb.ProveResponse(result=pb.AwaitProofResponse(
                    job_id=rid, status=pb.AwaitProofResponse.COMPLETED, proof=proof))
            finally:
                with lock:
                    running[0] -= 1

        def GetStatus(self, request, context):
            with lock:
                busy = running[0]
            return pb.GetStatusResponse(
                queues=[pb.QueueStatus(proof_kind="porep-c2", pending=0, in_progress=busy)])

    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=16))
    pb_grpc.add_ProvingEngineServicer_to_server(Engine(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port, seen


def run_client(port, summary_path, proto_dir, jobs):
    return curio_client.main([
        "--target", "127.0.0.1:%d" % port, "--jobs", str(jobs), "--max-pending", "4",
        "--summary", summary_path, "--proto-dir", proto_dir, "--give-up-s", "60",
        "--prove-timeout-s", "30",
    ])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser()
    p.add_argument("--proto-dir", default=os.path.join(here, "..", "..", "proto"))
    proto_dir = os.path.abspath(p.parse_args().proto_dir)
    failures = []
    with tempfile.TemporaryDirectory(prefix="pf-curio-selftest-") as tmp:
        gen = os.path.join(tmp, "gen")
        os.mkdir(gen)
        pb, pb_grpc = curio_client.generate_stubs(proto_dir, gen)

        # 1. An honest daemon that drops some calls: every job correct, dropped ones retried
        #    with the same request_id.
        server, port, seen = serve(pb, pb_grpc)
        summary_path = os.path.join(tmp, "honest.json")
        rc = run_client(port, summary_path, proto_dir, 30)
        server.stop(0)
        s = json.load(open(summary_path))
        if rc != 0 or s["correct"] != 30 or s["answers_total"] != 30:
            failures.append("honest daemon: rc %d, summary %s" % (rc, s))
        if s["retried_calls"] == 0 or not any(n > 1 for n in seen.values()):
            failures.append("no UNAVAILABLE call was retried: %s" % s)
        if len(seen) != 30:
            failures.append("request_ids seen: %d, want 30 distinct" % len(seen))
        if s["max_in_flight"] > 4:
            failures.append("more calls in flight (%d) than MaxPending 4" % s["max_in_flight"])

        # 2. A daemon that answers one job with a proof that is not of its input.
        server, port, _ = serve(pb, pb_grpc, wrong_for="porep-1000-5", unavailable_every=10**9)
        summary_path = os.path.join(tmp, "wrong.json")
        rc = run_client(port, summary_path, proto_dir, 10)
        server.stop(0)
        s = json.load(open(summary_path))
        if rc == 0 or s["correct"] != 9 or [f["request_id"] for f in s["failures"]] != [
                "porep-1000-5"]:
            failures.append("a wrong proof went unnoticed: rc %d, summary %s" % (rc, s))

    for f in failures:
        print("FAIL: " + f, file=sys.stderr)
    print("curio_client self-test: %s" % ("FAILED" if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
