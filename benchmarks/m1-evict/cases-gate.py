[("fp32", (1, 3072, 3072), [("skinny_narrow", {"EVICT_FIRST": False}), ("skinny_narrow", {"EVICT_FIRST": True})]),
 ("fp32", (8, 3072, 3072), [("skinny_narrow", {"EVICT_FIRST": False}), ("skinny_narrow", {"EVICT_FIRST": True})]),
 ("fp32", (16, 3072, 3072), [("skinny_async", {"BM": 16, "ROWS": 8, "SPLIT_K": 16, "STAGES": 2, "WARPS": 4, "EVICT_FIRST": False}),
                             ("skinny_async", {"BM": 16, "ROWS": 8, "SPLIT_K": 16, "STAGES": 2, "WARPS": 4, "EVICT_FIRST": True})]),
 ("fp32", (32, 3072, 3072), [("skinny_async", {"BM": 16, "ROWS": 8, "SPLIT_K": 16, "STAGES": 3, "WARPS": 2, "EVICT_FIRST": False}),
                             ("skinny_async", {"BM": 16, "ROWS": 8, "SPLIT_K": 16, "STAGES": 3, "WARPS": 2, "EVICT_FIRST": True})])]
