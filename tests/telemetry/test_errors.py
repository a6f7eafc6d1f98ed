"""The error vocabulary: one ErrorKind for every failure, written as its value, and one root for ttft's exceptions."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json

import pytest
from ttft.telemetry import events as ev
from ttft.telemetry.errors import USAGE_KINDS, ErrorKind, TtftError, describe, kind_of
from ttft.telemetry.record import ErrorInfo

from tests.test_import_graph import MODULES


def test_a_kind_is_its_value_wherever_a_string_is_expected() -> None:
    assert ErrorKind.RATE_LIMITED == "rate_limited" and f"{ErrorKind.AUTH}" == "auth"
    assert json.dumps({"type": ErrorKind.AUTH}) == json.dumps({"type": "auth"})
    info = ErrorInfo(ErrorKind.CONNECTION_REFUSED, "Could not connect.", None, "Is it running?")
    assert json.dumps(info.to_dict()) == json.dumps(
        {"type": "connection_refused", "message": "Could not connect.", "status_code": None, "hint": "Is it running?"}
    )
    assert type(info.to_dict()["type"]) is str  # every writer gets a plain string


def test_kind_of_gives_the_member_for_a_known_value_and_any_other_string_unchanged() -> None:
    assert kind_of("timeout") is ErrorKind.TIMEOUT
    assert kind_of("RuntimeError") == "RuntimeError" and not isinstance(kind_of("RuntimeError"), ErrorKind)
    assert kind_of("some_newer_kind") == "some_newer_kind"


def test_every_value_is_distinct_and_in_snake_case() -> None:
    values = [k.value for k in ErrorKind]
    assert len(values) == len(set(values))
    assert all(v == v.lower() and " " not in v for v in values)
    assert {ErrorKind.BAD_SPEC, ErrorKind.CONFIG_ERROR, ErrorKind.BAD_URL} == USAGE_KINDS


def test_describe_gives_ttfts_own_kind_and_hint_and_a_bugs_class_name() -> None:
    own = TtftError("The key is bad.", kind=ErrorKind.BAD_KEY, hint="Set it again.")
    assert describe(own) == (ErrorKind.BAD_KEY, "The key is bad.", "Set it again.")
    assert describe(RuntimeError("boom")) == ("RuntimeError", "boom", None)
    assert describe(KeyError()) == ("KeyError", "KeyError()", None)  # no text: its repr, never an empty message
    no_kind = TtftError("internal")
    assert describe(no_kind) == ("TtftError", "internal", None)  # a root with no kind of its own: its class


def test_failed_of_an_exception_is_the_turns_end_in_those_terms() -> None:
    f = ev.Failed.of(TtftError("No key.", kind=ErrorKind.MISSING_KEY, hint="export KEY=..."), t_ns=7)
    assert (f.t_ns, f.error_type, f.message, f.status_code) == (7, "missing_key", "No key.", None)
    assert f.hint == "export KEY=..."
    assert ev.Failed.of(ValueError("x")).error_type == "ValueError"


def _project_exceptions() -> list[type[BaseException]]:
    found = []
    for name in MODULES:
        module = importlib.import_module(f"ttft.{name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if issubclass(cls, BaseException) and cls.__module__ == module.__name__:
                found.append(cls)
    return found


# Left outside the root, each for its reason: a CancelledError or KeyboardInterrupt subclass must
# stay a BaseException only (a TtftError is an Exception, which every `except Exception` would
# swallow); a warning category is said, never raised (read_log's skipped lines); the lean reader's classes
# are the OpenAI SDK's hierarchy, rebuilt name for name.
OUTSIDE = {
    "ttft.backends.load.outcome.LevelCancelled",
    "ttft.tui.signals.Interrupted",
    "ttft.telemetry.export.log_data.SkippedLinesWarning",
}
SDK_MIRROR = "ttft.backends.providers.lean.sdk_errors"


def test_every_exception_class_of_the_project_has_one_root() -> None:
    classes = _project_exceptions()
    assert len(classes) >= 16
    loose = sorted(
        f"{c.__module__}.{c.__qualname__}"
        for c in classes
        if not issubclass(c, TtftError)
        and f"{c.__module__}.{c.__qualname__}" not in OUTSIDE
        and c.__module__ != SDK_MIRROR
    )
    assert loose == []


def test_each_keeps_the_base_its_callers_catch() -> None:
    from ttft.backends.load.outcome import LevelCancelled
    from ttft.backends.local.gguf import GGUFError
    from ttft.backends.local.llama_server import LlamaServerError
    from ttft.backends.probe.plan import BudgetError
    from ttft.telemetry.bench.merge import MergeRefused
    from ttft.telemetry.log.turns import LogWriteError
    from ttft.telemetry.typed_read import RecordError
    from ttft.tui.commands.prompt import PromptTooLarge
    from ttft.tui.signals import Interrupted

    for cls, base in (
        (LogWriteError, OSError),
        (RecordError, ValueError),
        (MergeRefused, ValueError),
        (GGUFError, ValueError),
        (BudgetError, ValueError),
        (PromptTooLarge, ValueError),
        (LlamaServerError, RuntimeError),
    ):
        assert issubclass(cls, TtftError) and issubclass(cls, base), cls
    assert issubclass(LevelCancelled, asyncio.CancelledError) and not issubclass(LevelCancelled, Exception)
    assert issubclass(Interrupted, KeyboardInterrupt) and not issubclass(Interrupted, Exception)


@pytest.mark.parametrize("kind", list(ErrorKind))
def test_every_kind_is_documented(kind: ErrorKind) -> None:
    from tests.support.paths import ROOT

    assert f"`{kind.value}`" in (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")
