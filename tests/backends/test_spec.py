"""``PROVIDER:MODEL@URL``: a spec with its own address, as compare's panes and the Python API take one."""

from __future__ import annotations

from ttft.backends.spec import PaneSpec, parse_model, split_spec


def test_a_url_after_the_model_is_its_base_url_and_wins_over_the_default() -> None:
    assert parse_model("compat:qwen@http://127.0.0.1:8080/v1", None) == PaneSpec(
        "compat:qwen", "http://127.0.0.1:8080/v1"
    )
    assert parse_model("compat:q@https://u:p@h/v1", "http://d/v1") == parse_model("compat:q@https://u:p@h/v1", None)
    assert parse_model("compat:q@https://u:p@h/v1", None).base_url == "https://u:p@h/v1"  # the URL's own @ kept


def test_without_a_url_the_default_stands_and_an_at_sign_in_the_model_is_the_models() -> None:
    assert parse_model("openai:gpt-x", "http://h/v1") == PaneSpec("openai:gpt-x", "http://h/v1")
    assert parse_model("compat:org/model@v2", None) == PaneSpec("compat:org/model@v2", None)
    assert split_spec(parse_model("compat:qwen3:8b@http://h/v1", None).spec) == ("compat", "qwen3:8b")
