[("fp32", n, [("spread", {}), ("spread", {"STAGES": 2, "BK": 64}), ("spread", {"STAGES": 2}), ("spread", {"GROUP_M": 8}), ("spread", {"STAGES": 4}), ("spread", {"BK": 16})]) for n in (4096, 8192)]
