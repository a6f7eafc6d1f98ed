"""Chat Completions without the OpenAI SDK: SSE on bytes, the SDK's errors and retries rebuilt."""
