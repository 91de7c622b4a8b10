[("fp32", n, [("pipelined", {})] + [("pbank", {**o, "SCALAR": True, "ORDER": "snake"}) for o in [
    {"BK": 32, "UNROLL": 4}, {"BK": 32, "UNROLL": 4, "FAST": True}, {"BK": 16}, {"BK": 16, "FAST": True},
    {"BK": 32, "UNROLL": 8, "STAGES": 4}, {"BK": 32, "UNROLL": 8, "STAGES": 4, "FAST": True}, {"BK": 32, "UNROLL": 4, "STAGES": 4, "FAST": True}]])
 for n in (4096, 8192, 1001, 2048)]
