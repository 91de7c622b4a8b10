[("bf16", 8192, [("wgmma_ws", {"WAIT_HINT": False}), ("wgmma_ws", {})]),
 ("fp16", 8192, [("wgmma_ws", {"WAIT_HINT": False}), ("wgmma_ws", {})]),
 ("tf32", 4096, [("wgmma_tf32", {"WAIT_HINT": False}), ("wgmma_tf32", {})])]
