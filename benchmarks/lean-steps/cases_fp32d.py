[("fp32", n, [("pipelined", {})] + [("pbank", {**o, "SCALAR": True, "ORDER": "snake"}) for o in [
    {"BK": 16}, {"BK": 16, "UNROLL": 8}, {"BK": 16, "UNROLL": 4}, {"BK": 32, "UNROLL": 8},
    {"BK": 16, "UNROLL": 8, "STAGES": 4}, {"BK": 32, "UNROLL": 8, "STAGES": 4}, {"BK": 32, "UNROLL": 8, "STAGES": 2}, {"BK": 32, "UNROLL": 4}]])
 for n in (4096, 8192, 1001)]
