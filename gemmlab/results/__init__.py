"""What a run comes to: the row model (model), the element-wise verdict (check), rows and their derived
metrics (rows, metrics), the run history (history) and the tuning cache (tuning). No GPU needed."""
