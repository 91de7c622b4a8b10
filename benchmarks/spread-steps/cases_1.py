[("fp32", n, [("lean", {}), ("spread", {}), ("spread", {"UNROLL": 8}), ("spread", {"BK": 16}), ("spread", {"STAGES": 4, "BK": 16})]) for n in (4096, 8192, 2048)] + \
[("fp32", n, [("lean", MED), ("spread", MED), ("spread", {**MED, "UNROLL": 8})]) for n in (3072, 1024) for MED in [{"BM": 64, "BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8}]]
