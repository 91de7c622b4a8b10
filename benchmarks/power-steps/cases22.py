[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"TMAP_PREFETCH": True})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"TMAP_PREFETCH": True})]),
 ("tf32", 4096, [("wgmma_tf32", {}), ("wgmma_tf32", {"TMAP_PREFETCH": True})])]
