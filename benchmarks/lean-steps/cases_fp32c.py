[("fp32", n, [("pipelined", {})] + [("pbank", {**o, "SCALAR": True}) for o in [
    {"ORDER": "snake", "BK": 16}, {"ORDER": "snake", "BK": 32}, {"ORDER": "snakeji", "BK": 16}, {"ORDER": "pairs", "BK": 16},
    {"ORDER": "snake", "BK": 16, "STAGES": 2}, {"ORDER": "snake", "BK": 16, "STAGES": 4}, {"ORDER": "snake", "BK": 16, "GROUP_M": 8}]])
 for n in (4096, 8192, 1001)]
