[("fp32", n, [("lean", {}), ("spread", {}), ("spreadx", {"STAGES": 2, "BK": 64})]) for n in (4096, 8192)] + \
[("fp32", 2048, [("lean", {}), ("spread", {})])] + \
[("fp32", n, [("lean", MED), ("spread", {**MED, "BK": 32, "STAGES": 3}), ("spread", MED)]) for n in (3072, 1024) for MED in [{"BM": 64, "BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8}]]
