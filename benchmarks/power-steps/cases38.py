[("bf16", 4096, [("ws_old", {}), ("wgmma_ws", {})]),
 ("fp16", 4096, [("ws_old", {}), ("wgmma_ws", {})]),
 ("bf16", 8192, [("ws_old", {}), ("wgmma_ws", {})]),
 ("fp16", 8192, [("ws_old", {}), ("wgmma_ws", {})])]
