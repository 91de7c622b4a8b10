[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"SNAKE": True})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"SNAKE": True})]),
 ("bf16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"SNAKE": True})])]
