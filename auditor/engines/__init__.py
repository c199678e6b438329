"""Where the heavy stage runs: the normalization SQL shared by DuckDB and Spark."""
