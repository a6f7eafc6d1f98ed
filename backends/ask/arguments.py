"""The Python API's arguments for one turn, checked before anything is sent, as the CLI checks its flags.

``resolve`` turns a spec into the registry's typed Target, ``turn_settings`` keyword arguments into
TurnSettings; :func:`api_plan` makes a turn's :class:`~backends.ask.plan.AskPlan` from what ``arun_turn``
and a ``Client`` are given. A refusal is the CLI's words under the API's names (``BadValue``, a TtftError
and a ValueError; TypeError for a value of the wrong kind).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar, Unpack

from ...telemetry.log.turns import check_session_id
from ...telemetry.settings import TurnSettings
from ...telemetry.values import checked
from ...telemetry.values.checked import BadValue, SettingsKw
from ..base import Message, build_request
from ..providers.registry import Target
from ..providers.registry import resolve as _resolve
from ..spec import parse_model
from .offer import Attachments, read_files
from .plan import AskPlan, ToolPlan

T = TypeVar("T")
TARGET_SETTINGS = frozenset({"timeout", "headers"})  # a Target's own connection settings


def resolve(spec: str, base_url: str | None = None, **settings: Any) -> Target:
    """``-m spec`` (and ``--base-url``) as the registry resolves it: a frozen Target (no key in it).

    ``settings``: the Target's connection settings to override (``timeout`` in seconds, ``headers``).
    ProviderError (a TtftError) for a spec that does not parse, an unknown provider or a bad URL."""
    unknown = set(settings) - TARGET_SETTINGS
    if unknown:
        raise TypeError(f"resolve() got unknown settings {sorted(unknown)}; it takes {sorted(TARGET_SETTINGS)}")
    if not isinstance(spec, str):
        raise TypeError(f"the spec is text such as 'openai:gpt-4o-mini' or 'local', not {type(spec).__name__}")
    pane = parse_model(spec, base_url)  # PROVIDER:MODEL@URL, as compare's panes take it: the URL is the address
    if "timeout" in settings and settings["timeout"] is not None:
        settings["timeout"] = checked_argument("timeout", checked.seconds, settings["timeout"])
    target = _resolve(pane.spec, base_url=pane.base_url)
    return replace(target, **settings) if settings else target


def turn_settings(**settings: Unpack[SettingsKw]) -> TurnSettings:
    """The keyword arguments as TurnSettings (``temperature=0.2, max_output_tokens=64, ...``), each checked
    as its flag is (``BadValue``, a TtftError and a ValueError, in the CLI's words); TypeError naming any
    that is not one of its fields."""
    return checked.settings(**settings)


def checked_argument(name: str, check: Callable[[object], T], value: object) -> T:
    """``value`` through one of telemetry.checked's checks, its refusal naming the argument."""
    try:
        return check(value)
    except BadValue as exc:
        raise BadValue(f"{name} {exc}") from None


def turn_arguments(target: object, prompt: object, timeout_s: object, session: object) -> None:
    """What arun_turn is given, checked before anything is sent (the CLI's checks, the API's names)."""
    if not isinstance(target, Target | str):
        raise TypeError(f"target is a Target (ttft.resolve) or a spec such as 'openai:gpt-4o-mini', not {target!r}")
    if not isinstance(prompt, str):
        raise TypeError(f"prompt is text, not {type(prompt).__name__}")
    if timeout_s is not None:
        checked_argument("timeout_s", checked.seconds, timeout_s)
    if session is not None:
        if not isinstance(session, str):
            raise TypeError(f"session is a session id (text), not {type(session).__name__}")
        try:
            check_session_id(session)
        except ValueError as exc:
            raise BadValue(str(exc)) from None


def api_plan(
    target: Target | str,
    prompt: str,
    tools: ToolPlan,
    *,
    system: str | None,
    history: Sequence[Message],
    attachments: Attachments,
    log: bool,
    session: str | None,
    sdk: bool,
    timeout_s: float | None,
    key: str | None,
    settings: SettingsKw,
    submitted: int,
) -> AskPlan:
    """The turn's AskPlan from the API's arguments, each checked before anything is sent (the CLI's
    checks, the API's names). The local engine runs in this process; a hosted turn on the loop's pool."""
    turn_arguments(target, prompt, timeout_s, session)
    if key is not None and not isinstance(key, str):
        raise TypeError(f"key is text, not {type(key).__name__}")
    resolved = target if isinstance(target, Target) else resolve(target)
    files = read_files(attachments, resolved)
    request = build_request(
        prompt, system=system, history=history, settings=turn_settings(**settings), attachments=files
    )
    return AskPlan(
        target=resolved,
        request=request,
        tools=tools,
        connection="shared",
        sdk=sdk,
        timeout_s=timeout_s,
        key=key,
        log=log,
        session=session,
        submitted_ns=submitted,
        start_failure="raise",
    )
