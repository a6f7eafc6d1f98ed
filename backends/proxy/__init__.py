"""``ttft proxy``: a loopback reverse proxy that times the LLM calls other apps send, one turn record per call."""
