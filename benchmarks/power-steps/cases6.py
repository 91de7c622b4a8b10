[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"BK": 32}), ("wgmma_ws", {"BK": 32, "TMA_STORE": True, "STAGED_STORE": False}),
                 ("wgmma_ws", {"BK": 32, "TMA_STORE": True, "STAGED_STORE": False, "STREAM_K": False, "CLUSTER_M": 2})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"BK": 32, "TMA_STORE": True, "STAGED_STORE": False})]),
 ("bf16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"BK": 32, "TMA_STORE": True, "STAGED_STORE": False})]),
 ("fp16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"BK": 32, "TMA_STORE": True, "STAGED_STORE": False})])]
