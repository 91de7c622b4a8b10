[("fp32", 4096, [("pipelined", {}), ("pbank", {"SCALAR": True}), ("pbank", {"ORDER": "snake", "SCALAR": True}), ("pbank", {"ORDER": "ji", "SCALAR": True}), ("pbank", {"ORDER": "snake"})]),
 ("fp32", 8192, [("pipelined", {}), ("pbank", {"SCALAR": True}), ("pbank", {"ORDER": "snake", "SCALAR": True})]),
 ("fp32", 2049, [("pipelined", {}), ("pbank", {"SCALAR": True}), ("pbank", {"ORDER": "snake", "SCALAR": True})])]
