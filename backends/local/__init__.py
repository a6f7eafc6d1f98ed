"""The ``local`` provider: llama-cpp-python in-process, producing the same events as any backend.

The engine runs on one worker thread per backend (llama.cpp contexts are not
thread-safe, and the UI's event loop must never block on a decode). The worker
stamps each event with :func:`telemetry.events.now_ns` the moment the engine
produced it and hands it to the loop with ``call_soon_threadsafe``.

Generation is driven token by token (not through ``create_chat_completion``):
- token counts are exact (each delta says how many tokens it carries);
- cancel is a flag checked before every decode step (and inside a long prefill
  through llama.cpp's abort callback on CPU);
- the KV cache is kept across turns and the longest common prefix with the new
  prompt is reused (reported as ``prompt_tokens_reused``);
- speculative decoding (prompt lookup) is a per-turn setting: drafts are verified
  in one batch and a token is kept only if the model itself picks it at that
  position, so the output is the same as without it; only the batch's logits that
  are needed are computed.

The package, one idea a module:
- ``engine``: the backend, its worker thread and the loader;
- ``generation``: one turn's prefill and decode loop;
- ``speculative``: prompt-lookup settings, drafter and the batch-invariance check;
- ``template``: chat templates and stop strings;
- ``loadlog``: what llama.cpp's load log says;
- ``state``: what the worker keeps between turns;
- ``llama_adapter``: the only module that touches llama-cpp-python;
- ``models``, ``gguf``: the shipped models and any GGUF's header, without llama.cpp;
- ``amx``: which weight buffers are safe on this CPU;
- ``llama_server``: llama.cpp's own server on loopback, for ``ttft bench -m local-server``.
"""
