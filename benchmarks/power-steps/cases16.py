[("tf32", 4096, [("wgmma_tf32", {}), ("wgmma_tf32", {"CLUSTER_N": 2}), ("wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": True}),
                 ("wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": True, "NOCVT": True})]),
 ("tf32", 8192, [("wgmma_tf32", {}), ("wgmma_tf32", {"CLUSTER_N": 2}), ("wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": True})])]
