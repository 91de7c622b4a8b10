[("bf16", 4096, [("wgmma_ws", {}), ("ws_t", {"RELAXED": True, "SCALE_D": True}),
                 ("ws_t", {"EARLY": True, "RELAXED": True, "SCALE_D": True})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("ws_t", {"RELAXED": True, "SCALE_D": True}),
                 ("ws_t", {"EARLY": True, "RELAXED": True, "SCALE_D": True})])]
