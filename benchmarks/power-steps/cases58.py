[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"GPC_ORDER": False})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"GPC_ORDER": False})]),
 ("bf16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"GPC_ORDER": False})]),
 ("fp16", 8192, [("wgmma_ws", {}), ("wgmma_ws", {"GPC_ORDER": False})])]
