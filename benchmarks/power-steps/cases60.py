[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"CLUSTER_M": 1}), ("wgmma_ws", {"CLUSTER_M": 1, "GPC_ORDER": False})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"CLUSTER_M": 1})])]
