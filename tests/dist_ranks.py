"""Stand-ins for a rank's process (gemmlab/dist/rank.py:main), for the job's tests on a CPU: each behaves
as DIST_SCENARIO says, through the real Report."""

import os
import time

from gemmlab.dist.rank import Report


def main(conn, rank, world, local, uid, job):
    report = Report(conn, rank)
    scenario, _, who = os.environ.get("DIST_SCENARIO", "fine").partition(":")
    me = who == str(rank)
    report.phase("start NCCL")
    if rank == 0:
        report.meta({"device": {"name": "Fake GPU"}, "seed": job.seed, "uid": uid.decode()})
    report.phase("ring with mine: check")
    if me and scenario == "crash":
        os._exit(3)
    if me and scenario == "hang":
        time.sleep(3600)
    if me and scenario == "error":
        report.end("error", "no room for the inputs", "choose a smaller shape")
        return
    if me and scenario == "fault":
        report.end("fault", "CUDARuntimeError: cudaErrorIllegalAddress", "Traceback ...")
        return
    report.phase("ring with mine: time")
    if rank == 0:
        report.row({"schedule": "ring", "status": "PASS", "ms": 1.0, "world": world, "local": local})
    if scenario == "hang" and not me:  # the others wait for the hung rank in a collective
        time.sleep(3600)
    report.end("done")
