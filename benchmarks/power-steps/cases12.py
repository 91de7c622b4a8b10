[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"CLUSTER_M": 4, "STREAM_K": False}),
                 ("wgmma_ws", {"GROUP_M": 16}), ("wgmma_ws", {"GROUP_M": 1})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"CLUSTER_M": 4, "STREAM_K": False})])]
