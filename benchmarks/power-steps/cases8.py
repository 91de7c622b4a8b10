[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"CLUSTER_M": 2, "STREAM_K": False})])]
