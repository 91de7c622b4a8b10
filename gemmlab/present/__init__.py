"""What a person or a file sees of the results: console tables that fit the terminal (fit, tables),
the markdown of the README and docs (markdown), JSON and CSV (export), and plots (plots)."""
