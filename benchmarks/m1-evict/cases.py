[("fp32", (1, 3072, 3072), [("skinny_narrow", {}), ("skinny_narrow", {"EVICT_FIRST": True}),
                            ("skinny_narrow", {"EVICT_FIRST": True, "COLS": 64}), ("skinny_narrow", {"EVICT_FIRST": True, "COLS": 16}),
                            ("skinny_narrow", {"EVICT_FIRST": True, "WARPS": 16})]),
 ("fp32", (16, 3072, 3072), [("skinny_async", {"BM": 16, "ROWS": 8, "SPLIT_K": 32, "STAGES": 2, "WARPS": 2}),
                             ("skinny_async", {"BM": 16, "ROWS": 8, "SPLIT_K": 32, "STAGES": 2, "WARPS": 2, "EVICT_FIRST": True})]),
 ("fp32", (32, 3072, 3072), [("skinny_async", {"BM": 16, "ROWS": 8, "SPLIT_K": 16, "STAGES": 3, "WARPS": 2}),
                             ("skinny_async", {"BM": 16, "ROWS": 8, "SPLIT_K": 16, "STAGES": 3, "WARPS": 2, "EVICT_FIRST": True})])]
