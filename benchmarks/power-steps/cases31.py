[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"DRAIN": True}), ("wgmma_ws", {"DRAIN": True, "DCH": 1}),
                 ("wgmma_ws", {"DRAIN": True, "STAGES": 3, "DCH": 4})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"DRAIN": True})]),
 ("bf16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"DRAIN": True})])]
