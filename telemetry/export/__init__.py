"""What leaves ttft as files: JSONL, the flat table, Parquet, and OpenTelemetry GenAI documents."""
