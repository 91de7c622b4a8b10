[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"WAIT_HINT": True})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"WAIT_HINT": True})]),
 ("tf32", 4096, [("wgmma_tf32", {}), ("wgmma_tf32", {"WAIT_HINT": True})]),
 ("bf16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"WAIT_HINT": True})])]
