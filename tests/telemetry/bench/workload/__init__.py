"""Tests of telemetry.bench.workload: lengths, datasets, traces, the plan and its figures."""
