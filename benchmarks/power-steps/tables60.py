"""Run 60: interleave.py with a second slot table for single blocks (CLUSTER_M=1, every load plain, so B's too can
merge): with TABLE1=consec the SMs of a GPC take consecutive slots, in GROUP_M 8 two columns of tiles x 8 rows,
sharing B 8 ways and A 2 ways; otherwise gemmlab.gpc.slot_table's classes (A shared, B not).
Usage: TABLE1=consec CASES=... python3 benchmarks/power-steps/tables60.py ROUNDS OUT.json  (also XCONFIGS=... for
ncu_launches.py with NCU=1)"""
import os
import runpy
import sys

import gemmlab.gpc as gpc

classes = gpc.slot_table


def slot_table(gpcs, sms, cluster, group):
    if cluster == 1 and os.environ.get("TABLE1") == "consec":
        order = sorted(range(sms), key=lambda s: next(g for g, members in enumerate(gpcs) if s in members))
        table = [0] * sms
        for v, s in enumerate(order):
            table[s] = v
        return table
    return classes(gpcs, sms, cluster, group)


gpc.slot_table = slot_table
script = "benchmarks/store-steps/ncu_launches.py" if os.environ.get("NCU") else "benchmarks/lean-steps/interleave.py"
sys.argv = [script] + sys.argv[1:]
runpy.run_path(script, run_name="__main__")
