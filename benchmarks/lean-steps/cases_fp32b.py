[("fp32", n, [("pipelined", {})] + [("pbank", {**o, "SCALAR": True}) for o in [
    {"ORDER": "snake"}, {"ORDER": "snakeji"}, {"ORDER": "pairs"}, {"ORDER": "snake", "BK": 16},
    {"ORDER": "snake", "STAGES": 4}, {"ORDER": "snake", "BM": 256, "BN": 128},
    {"ORDER": "snake", "TM": 8, "TN": 16}, {"ORDER": "snakeji", "TM": 8, "TN": 16}]])
 for n in (4096, 8192)]
