[("tf32", 4096, [("wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": True})]),
 ("tf32", 8192, [("wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": True})])]
