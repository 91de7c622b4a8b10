"""Stand-ins for a rank's process (gemmlab/multigpu/rank.py:main), for the job's tests on a CPU: each behaves
as DIST_SCENARIO says, through the real Report."""

import os
import time

from gemmlab.multigpu import rows
from gemmlab.multigpu.rank import Report
from gemmlab.multigpu.schedule import rank_plan
from handlers import passing_check


def main(conn, rank, world, local, uid, job):
    report = Report(conn, rank)
    scenario, _, who = os.environ.get("DIST_SCENARIO", "fine").partition(":")
    me = who == str(rank)
    report.phase("start NCCL")
    if rank == 0:
        report.meta({"device": {"name": "Fake GPU", "index": local}, "seed": job.seed, "uid": uid.decode()})
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
        for item in job.items:
            report.row(row(item, job, world, local))
    if scenario == "hang" and not me:  # the others wait for the hung rank in a collective
        time.sleep(3600)
    report.end("done")


def row(item, job, world, local):
    """A real row of a check that passed, at 1 ms (the local GEMMs alone 0.8 ms) on every rank."""
    sched = job.schedules[item.schedule]
    plan = rank_plan(sched, job.shape, world, 0, job.dtype)
    ms = [[1.0] * 4] * world
    r = rows.row(item, sched, plan, job.shape, world, 1e15, job.params, total=ms, compute=[[0.8] * 4] * world,
                 check=passing_check())
    return dict(r, local=local)
