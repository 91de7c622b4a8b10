[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"CLUSTER_M": 2})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"CLUSTER_M": 2})]),
 ("bf16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"CLUSTER_M": 2})]),
 ("fp16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"CLUSTER_M": 2})])]
