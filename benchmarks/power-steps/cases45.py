[("bf16", 4096, [("ws_old", {}), ("wgmma_ws", {}), ("wgmma_ws", {"STAGGER": True})]),
 ("fp16", 4096, [("ws_old", {}), ("wgmma_ws", {}), ("wgmma_ws", {"STAGGER": True})]),
 ("bf16", 8192, [("ws_old", {}), ("wgmma_ws", {})])]
