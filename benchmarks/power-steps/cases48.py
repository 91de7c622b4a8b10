[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"CLUSTER_M": 1, "GROUP_M": 16})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"CLUSTER_M": 1, "GROUP_M": 16})]),
 ("bf16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"CLUSTER_M": 1, "GROUP_M": 16})])]
