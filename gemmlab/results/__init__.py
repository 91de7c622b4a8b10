"""What a run comes to: the row model (model), the element-wise verdict (check), rows (records) and
their derived metrics (metrics). No GPU needed. (The run history and the tuning cache are still
gemmlab/history.py and gemmlab/tuning.py.)"""
