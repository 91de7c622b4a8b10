[("tf32", 4096, [("wgmma_tf32", {}), ("wgmma_tf32", {"CLUSTER_N": 1})]),
 ("tf32", 8192, [("wgmma_tf32", {}), ("wgmma_tf32", {"CLUSTER_N": 1})])]
