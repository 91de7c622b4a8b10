[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"OVERLAP": 1}), ("wgmma_ws", {"OVERLAP": 2}), ("wgmma_ws", {"OVERLAP": 3})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"OVERLAP": 2})]),
 ("bf16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"OVERLAP": 2})])]
