"""ttft from Python: ``import ttft``, then ``ttft.resolve``, ``ttft.run_turn``, ``ttft.Client``...

The names are those of :mod:`ttft.backends.api`, the same core the ``ttft`` command runs on. They are
loaded on first use, so the command line (which imports ``ttft.tui``, and so this package first) pays
nothing for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .backends.api import (
        AgentSummary,
        ApprovalStepRecord,
        BadValue,
        BenchAbort,
        BenchPlan,
        BenchResult,
        Client,
        ComparePlan,
        CompareResult,
        Conversation,
        Level,
        LogReadError,
        LogRecords,
        McpServerConfig,
        Message,
        MissingEngine,
        ModelStepRecord,
        ProbePlan,
        ProbeResult,
        ProviderError,
        Rate,
        SkippedLinesWarning,
        Speedup,
        Target,
        ToolHost,
        ToolRequest,
        ToolResult,
        ToolSpec,
        ToolStepRecord,
        TtftError,
        TurnRecord,
        TurnSettings,
        Users,
        aclose,
        arun_bench,
        arun_compare,
        arun_probe,
        arun_turn,
        bench_plan,
        compare_plan,
        log_frame,
        read_log,
        resolve,
        run_bench,
        run_compare,
        run_probe,
        run_turn,
        turn_settings,
        turns_frame,
    )

__all__ = [
    "AgentSummary",
    "ApprovalStepRecord",
    "BadValue",
    "BenchAbort",
    "BenchPlan",
    "BenchResult",
    "Client",
    "ComparePlan",
    "CompareResult",
    "Conversation",
    "Level",
    "LogReadError",
    "LogRecords",
    "McpServerConfig",
    "Message",
    "MissingEngine",
    "ModelStepRecord",
    "ProbePlan",
    "ProbeResult",
    "ProviderError",
    "Rate",
    "SkippedLinesWarning",
    "Speedup",
    "Target",
    "ToolHost",
    "ToolRequest",
    "ToolResult",
    "ToolSpec",
    "ToolStepRecord",
    "TtftError",
    "TurnRecord",
    "TurnSettings",
    "Users",
    "aclose",
    "arun_bench",
    "arun_compare",
    "arun_probe",
    "arun_turn",
    "bench_plan",
    "compare_plan",
    "log_frame",
    "read_log",
    "resolve",
    "run_bench",
    "run_compare",
    "run_probe",
    "run_turn",
    "turn_settings",
    "turns_frame",
]


def __getattr__(name: str) -> object:
    if name in __all__:
        from .backends import api

        return getattr(api, name)
    raise AttributeError(f"module 'ttft' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
