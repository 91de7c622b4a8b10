"""What a run comes to: the row model (model), the element-wise verdict (check), rows (records),
their derived metrics (metrics), the run history (history) and the tuning cache `auto` reads (tuning).
No GPU needed."""
