[("fp32", n, [("lean", {})] + [("lean2", o) for o in [
    {"PREFETCH": True}, {"PREFETCH": True, "UNROLL": 2}, {"PREFETCH": True, "UNROLL": 8}, {"PREFETCH": True, "BK": 16, "UNROLL": 4}, {"PREFETCH": True, "STAGES": 4}]])
 for n in (4096, 8192, 2049)]
