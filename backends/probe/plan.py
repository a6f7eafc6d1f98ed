"""The probe's designed experiment: which requests, in which order, and what they will cost.

- TTFT at several input lengths (about 100 to 8k tokens; for a local model, scaled
  to its context), each trial in text of its own that starts differently, so no
  prefix cache can serve any of it;
- one long prefix sent twice per trial (a new prefix each trial): the second send
  shows what a prompt cache saves;
- E2E at several output lengths, from a short prompt.

Every design point has the same number of trials, and each round runs every point
once in a shuffled order (a cold/warm pair stays adjacent), so a drift of the
server's load spreads over all points instead of biasing one. One short warm-up
request comes first and is not a point. ``--budget`` shrinks the plan (fewer trials,
then fewer long inputs, then fewer long outputs) until it fits.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass

from ...telemetry.errors import TtftError
from ...telemetry.probe.result import PointKind

HOSTED_MAX_INPUT = 8192
MIN_INPUT = 128
INPUT_OUTPUT_TOKENS = 4  # the input sweep times the first token only
WARMUP_OUTPUT_TOKENS = 4
CONTEXT_SHARE = 0.8  # of a local model's context, the most one probe prompt may use
MIN_TRIALS = 2
# Short common words that most BPE vocabularies hold as one token each (with their leading space),
# so a prompt of N words is about N tokens; the server's usage gives the true count anyway.
_WORDS = (
    "the of and to in is it that was for on are with as be at one have this from or had by not but what all "
    "were when we there can an your which their said if do will each about how up out them then she many "
    "some so these would other into has more her two like him see time could no make than first been its "
    "who now people my made over did down only way find use may water long little very after words called "
    "just where most know get through back much before go good new write our used me man too any day same "
    "right look think also around another came come work three word must because does part even place well"
)
WORDS = tuple(_WORDS.split())
STORY_TOPICS = ("a dragon and a village", "a lighthouse keeper", "a lost map", "a clockmaker", "two rival bakers")


@dataclass(frozen=True, slots=True)
class Step:
    kind: PointKind | None  # None: the warm-up
    group: int
    trial: int
    input_words: int
    max_output_tokens: int
    text_seed: int  # the text's own seed: a cold/warm pair shares its prefix's seed
    suffix_seed: int = 0

    @property
    def warmup(self) -> bool:
        return self.kind is None

    @property
    def tokens(self) -> int:
        """About what this request spends: its input plus at most its output."""
        return self.input_words + self.max_output_tokens + 16  # a prompt's own words and template


@dataclass(frozen=True, slots=True)
class Design:
    inputs: tuple[int, ...]
    cache_prefix: int
    outputs: tuple[int, ...]
    trials: int


@dataclass(frozen=True, slots=True)
class Schedule:
    """The designed experiment: the design and its steps, in the order they are sent."""

    design: Design
    steps: tuple[Step, ...]
    quick: bool

    @property
    def requests(self) -> int:
        return len(self.steps)

    @property
    def input_tokens(self) -> int:
        return sum(s.input_words + 16 for s in self.steps)

    @property
    def output_tokens(self) -> int:
        return sum(s.max_output_tokens for s in self.steps)

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.steps)

    def summary(self) -> str:
        d = self.design
        return (
            f"{self.requests} requests, about {self.input_tokens:,} input and at most {self.output_tokens:,} "
            f"output tokens: TTFT at {len(d.inputs)} input lengths ({d.inputs[0]:,}-{d.inputs[-1]:,} tokens), "
            f"a {d.cache_prefix:,}-token prefix sent twice, E2E at {len(d.outputs)} output lengths "
            f"({d.outputs[0]}-{d.outputs[-1]} tokens); {d.trials} trials each, interleaved, after 1 warm-up"
        )


class BudgetError(TtftError, ValueError):
    """Even the smallest plan costs more tokens than ``--budget`` allows."""


def _ladder(lo: int, hi: int, n: int) -> tuple[int, ...]:
    """``n`` lengths from ``lo`` to ``hi``, evenly spaced on a log scale."""
    if n <= 1 or hi <= lo:
        return (lo,)
    ratio = (hi / lo) ** (1 / (n - 1))
    return tuple(sorted({round(lo * ratio**i) for i in range(n)}))


def design_for(context_tokens: int | None, quick: bool) -> Design:
    """The full (or quick) design, scaled to a context window when the model has a known one."""
    outputs: tuple[int, ...] = (16, 64, 128) if quick else (16, 64, 128, 256)
    top = HOSTED_MAX_INPUT
    if context_tokens:
        top = min(top, int(context_tokens * CONTEXT_SHARE) - INPUT_OUTPUT_TOKENS - 64)
        outputs = tuple(n for n in outputs if n <= context_tokens // 4) or (16,)
    top = max(top, MIN_INPUT * 2)
    inputs = _ladder(MIN_INPUT, top, 4 if quick else 6)
    return Design(inputs, max(MIN_INPUT, top // 2), outputs, 3 if quick else 5)


def _steps(d: Design, seed: int) -> tuple[Step, ...]:
    rng = random.Random(seed)
    out = [Step(None, -1, 0, 16, WARMUP_OUTPUT_TOKENS, rng.getrandbits(32))]
    n_in = len(d.inputs)
    for t in range(d.trials):
        units: list[list[Step]] = [
            [Step("input", g, t, n, INPUT_OUTPUT_TOKENS, rng.getrandbits(32))] for g, n in enumerate(d.inputs)
        ]
        prefix_seed = rng.getrandbits(32)
        pair = 1000 + t  # one group per pair: the saving is paired
        units.append(
            [
                Step("cache_cold", pair, t, d.cache_prefix, INPUT_OUTPUT_TOKENS, prefix_seed, rng.getrandbits(32)),
                Step("cache_warm", pair, t, d.cache_prefix, INPUT_OUTPUT_TOKENS, prefix_seed, rng.getrandbits(32)),
            ]
        )
        units += [[Step("output", 100 + n_in + g, t, 16, n, rng.getrandbits(32))] for g, n in enumerate(d.outputs)]
        rng.shuffle(units)
        out += [s for u in units for s in u]
    return tuple(out)


def make_plan(
    context_tokens: int | None = None, *, quick: bool = False, budget: int | None = None, seed: int | None = None
) -> Schedule:
    """The plan, shrunk to ``budget`` tokens when one is given; BudgetError when even the least cannot fit.

    ``seed`` None (a run's default) draws new texts: a server's prompt cache outlives a probe (OpenAI's
    keeps prefixes for minutes), so the same texts again would be served from it.
    """
    if seed is None:
        seed = secrets.randbits(32)
    d = design_for(context_tokens, quick)
    plan = Schedule(d, _steps(d, seed), quick)
    while budget is not None and plan.tokens > budget:
        if d.trials > MIN_TRIALS:
            d = Design(d.inputs, d.cache_prefix, d.outputs, d.trials - 1)
        elif len(d.inputs) > 2:
            inputs = d.inputs[:-1]
            d = Design(inputs, max(MIN_INPUT, inputs[-1] // 2), d.outputs, d.trials)
        elif len(d.outputs) > 2:
            d = Design(d.inputs, d.cache_prefix, d.outputs[:-1], d.trials)
        else:
            raise BudgetError(
                f"the smallest probe needs about {plan.tokens:,} tokens ({plan.requests} requests), "
                f"more than the budget of {budget:,}"
            )
        plan = Schedule(d, _steps(d, seed), quick)
    return plan


def prompt_text(step: Step) -> str:
    """The request's text: unique from its first word (its seed), about ``input_words`` words long."""
    if step.kind == "output":
        rng = random.Random(step.text_seed)
        # A story runs to any length in any model (counting prompts make small models stop after a few tokens).
        topic = rng.choice(STORY_TOPICS)
        return f"Ref {rng.getrandbits(32):08x}. Write a very long story about {topic}, with many chapters."
    if step.kind in ("cache_cold", "cache_warm"):
        # The shared prefix, then a short question of its own: only the prefix can be cached.
        prefix = _filler(step.text_seed, step.input_words - 12)
        return f"{prefix}\n{_filler(step.suffix_seed, 8)}. Reply with one word."
    return f"{_filler(step.text_seed, step.input_words - 4)}. Reply with one word."


def _filler(seed: int, n_words: int) -> str:
    rng = random.Random(seed)
    head = f"Ref {rng.getrandbits(32):08x}:"  # differs from any other prompt's first token on
    return " ".join([head, *rng.choices(WORDS, k=max(n_words, 1))])
