"""Live OpenTelemetry: finished turns pushed to a collector off the hot path, and the SDK's wiring."""
