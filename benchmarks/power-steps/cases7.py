[("bf16", 4096, [("wgmma_ws", {}), ("wgmma_ws", {"WAIT_HINT": True}), ("ws_x", {"FASTDESC": True}),
                 ("ws_x", {"FASTDESC": True, "WAIT_HINT": True}),
                 ("wgmma_ws", {"CLUSTER_M": 2, "STREAM_K": False, "WAIT_HINT": True})])]
