[("tf32", 4096, [("wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": True}), ("wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": True, "GROUP_M": 4}),
                 ("wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": True, "GROUP_M": 16}), ("wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": True, "STAGES": 3})]),
 ("tf32", 8192, [("wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": True}), ("wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": True, "GROUP_M": 4}),
                 ("wgmma_tf32", {"CLUSTER_N": 2, "PAIRS": True, "GROUP_M": 16})])]
