[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"STREAM_C": True}), ("wgmma_ws", {"STREAM_C": True, "CLUSTER_M": 2, "STREAM_K": False})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"STREAM_C": True})]),
 ("bf16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"STREAM_C": True})]),
 ("fp16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"STREAM_C": True})]),
 ("tf32", 4096, [("wgmma_tf32", {}), ("wgmma_tf32", {"STREAM_C": True})])]
