[("fp32", shape, [("pipelined", {**MED, "SPLIT_K": s})] + [("lean", {**MED, "SPLIT_K": s}), ("lean4", {**MED, "SPLIT_K": s}),
   ("lean", {**MED, "SPLIT_K": s, "BK": 16}), ("lean", {**MED, "SPLIT_K": min(128, 2 * s)}), ("lean", {**MED, "SPLIT_K": max(1, s // 2)})])
 for MED in [{"BM": 64, "BN": 128, "WM": 32, "WN": 64, "TM": 8, "TN": 8}]
 for shape, s in [((512, 3072, 3072), 4), ((256, 3072, 3072), 4), ((128, 3072, 3072), 8), ((64, 3072, 3072), 16),
                  ((256, 256, 8192), 32), ((128, 128, 32768), 128), ((130, 3000, 2999), 8)]]
