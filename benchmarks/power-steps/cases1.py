[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"LAG": 1}), ("wgmma_ws", {"LAG": 2}),
                 ("wgmma_ws", {"CLUSTER_M": 2, "STREAM_K": False, "LAG": 1})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"LAG": 1}), ("wgmma_ws", {"LAG": 2})]),
 ("bf16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"LAG": 1}), ("wgmma_ws", {"LAG": 2})])]
