[("bf16", 4096, [("wgmma_ws", {}), ("ws_t", {"EARLY": True, "EARLY2": True}),
                 ("ws_t", {"EARLY": True, "EARLY2": True, "RELAXED": True, "SCALE_D": True})]),
 ("fp16", 4096, [("wgmma_ws", {}), ("ws_t", {"EARLY": True, "EARLY2": True}),
                 ("ws_t", {"EARLY": True, "EARLY2": True, "RELAXED": True, "SCALE_D": True})])]
