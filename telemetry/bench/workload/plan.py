"""What a bench sends, and what each of its conversations is: the workload and its plan (pure).

A :class:`Workload` is the bench's load in data: the lengths to draw (``--input-tokens``,
``--output-tokens``), shared prefixes (``--prefix-tokens N --prefixes K``), conversations of T turns
(``--turns``, ``--think-time``), a dataset's prompts (``--dataset``) or a trace's requests
(``--trace``). It is plain data, so it travels to worker processes as the load's config does.

:meth:`Workload.conversation` plans one conversation from its number alone: its turns, each with the
request index that names it in the run, the token lengths it asks for and where its text comes from.
A single-turn workload is a conversation of one turn. The plan is drawn from the seed and the
request's index, never from a shared generator, so the same run on one or several processes, or
again later, sends the same lengths. What the text *is* (words for a length, a block for a hash id)
is the load driver's (``backends.load.prompts``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from ...tokens import tokens_for_chars
from .dataset import DatasetTurn
from .lengths import Lengths
from .trace import TraceRequest


@dataclass(frozen=True, slots=True)
class PlannedTurn:
    """One request of a conversation, before its text is made."""

    index: int  # the request's place in the run: names its synthetic text, unique across the run
    input_tokens: int  # tokens of the new user text (a trace: of the whole prompt; a dataset's: estimated)
    output_tokens: int  # asked for through max_tokens
    text: str | None = None  # a dataset's user text; None: synthetic words
    hash_ids: tuple[int, ...] = ()  # a trace's prompt blocks (equal ids, equal text)


@dataclass(frozen=True, slots=True)
class PlannedConversation:
    number: int  # the index of its first request
    turns: tuple[PlannedTurn, ...]
    at_s: float | None = None  # a trace's send offset (before any --speedup)


@dataclass(frozen=True, slots=True)
class Longest:
    """A workload's longest request: its prompt and the answer it asks for, in tokens, and which it is."""

    prompt: int
    output: int
    what: str

    @property
    def total(self) -> int:
        return self.prompt + self.output


@dataclass(frozen=True)
class Workload:
    """The bench's load as data (every field has the plain bench's value by default)."""

    input: Lengths = field(default_factory=lambda: Lengths.fixed(128))
    output: Lengths | None = None  # None: the turn's --max-output-tokens, or a dataset's answer lengths
    prefix_tokens: int = 0  # every conversation starts with one of `prefixes` shared texts of this length
    prefixes: int = 1
    turns: int = 1  # turns per conversation (a dataset: at most this many of each conversation's turns)
    think_time_s: float = 0.0  # between one answer's end and the next turn's send
    dataset: tuple[tuple[DatasetTurn, ...], ...] = ()
    dataset_source: str = ""
    trace: tuple[TraceRequest, ...] = ()
    trace_source: str = ""
    trace_kind: str = ""

    @property
    def kind(self) -> str:
        """ "trace", "dataset" or "synthetic"."""
        return "trace" if self.trace else "dataset" if self.dataset else "synthetic"

    @property
    def conversational(self) -> bool:
        """Whether requests are turns of conversations longer than one turn (tagged with their turn)."""
        return self.turns > 1 and not self.trace

    def requests_for(self, requests: int) -> int:
        """``requests`` rounded up to whole conversations: a level always ends its conversations."""
        t = 1 if self.trace else self.turns
        return -(-requests // t) * t

    def prefix_of(self, slot: int) -> int | None:
        """Which shared prefix a user (closed loop) or a conversation (open loop) numbered ``slot`` starts with."""
        return slot % self.prefixes if self.prefix_tokens > 0 else None

    def conversation(
        self, first_index: int, *, seed: int, default_output: int, position: int | None = None
    ) -> PlannedConversation:
        """The conversation whose first request is ``first_index``.

        ``position``: its place in a trace or a dataset (default: counted from ``first_index`` in
        whole conversations), so a trace's levels each replay it from the start.
        """
        t = 1 if self.trace else self.turns
        pos = first_index // t if position is None else position
        if self.trace:
            r = self.trace[pos % len(self.trace)]
            out = self.output.draw_for(seed, first_index, "output") if self.output else r.output_tokens
            return PlannedConversation(
                first_index, (PlannedTurn(first_index, r.input_tokens, out, None, r.hash_ids),), r.at_ms / 1000
            )
        source: tuple[DatasetTurn, ...] | None = None
        if self.dataset:
            source = self.dataset[_shuffled(len(self.dataset), seed, pos)]
            source = source[:t]
        turns = []
        for k in range(len(source) if source is not None else t):
            index = first_index + k
            text = source[k].text if source is not None else None
            # a dataset's text: its length estimated, as the dataset's answers are
            n_in = self.input.draw_for(seed, index, "input") if text is None else tokens_for_chars(len(text))
            if self.output is not None:
                n_out = self.output.draw_for(seed, index, "output")
            elif source is not None and source[k].answer_tokens is not None:
                n_out = source[k].answer_tokens or default_output
            else:
                n_out = default_output
            turns.append(PlannedTurn(index, n_in, n_out, text))
        return PlannedConversation(first_index, tuple(turns))

    def longest(self, default_output: int) -> Longest:
        """The longest request this workload sends, in tokens of context (its prompt and the answer it asks
        for): what a server's context must hold. Synthetic lengths at their reach (a normal's MEAN + 3
        STDDEV); a conversation's last turn carries every turn before it and their answers."""
        t = 1 if self.trace else self.turns
        if self.trace:
            out = self.output.reach if self.output else 0
            r = max(self.trace, key=lambda r: r.input_tokens + (out or r.output_tokens))
            return Longest(r.input_tokens, out or r.output_tokens, "the trace's longest request")
        if self.dataset:
            prompt, out = max((self.dataset_longest(c, default_output) for c in self.dataset), key=sum)
            return Longest(prompt, out, "the dataset's longest conversation (estimated)")
        out = self.output.reach if self.output else default_output
        prompt = self.prefix_tokens + t * self.input.reach + (t - 1) * out
        return Longest(prompt, out, f"turn {t} of a conversation" if t > 1 else "the longest request")

    def dataset_longest(self, conv: tuple[DatasetTurn, ...], default_output: int) -> tuple[int, int]:
        """The prompt and answer tokens of a dataset conversation's last turn sent (its text estimated)."""
        turns = conv[: self.turns]
        outs = [self.output.reach if self.output else (d.answer_tokens or default_output) for d in turns]
        return self.prefix_tokens + sum(tokens_for_chars(len(d.text)) for d in turns) + sum(outs[:-1]), outs[-1]

    def describe(self, default_output: int) -> dict[str, Any]:
        """The workload as summary.json records it."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.trace:
            out["trace"] = {"source": self.trace_source, "kind": self.trace_kind, "requests": len(self.trace)}
        else:
            if self.dataset:
                out["dataset"] = {"source": self.dataset_source, "conversations": len(self.dataset)}
            else:
                out["input_tokens"] = self.input.to_dict()
        if self.output is not None:
            out["output_tokens"] = self.output.to_dict()
        elif self.trace:
            out["output_tokens"] = "the trace's"
        elif self.dataset:
            out["output_tokens"] = f"the dataset's answers (else {default_output})"
        else:
            out["output_tokens"] = Lengths.fixed(default_output).to_dict()
        if self.prefix_tokens:
            out["prefix_tokens"] = self.prefix_tokens
            out["prefixes"] = self.prefixes
        if self.turns > 1 and not self.trace:
            out["turns"] = self.turns
            out["think_time_s"] = self.think_time_s
        return out


def _shuffled(n: int, seed: int, position: int) -> int:
    """The dataset entry for a conversation: a seeded permutation of the dataset, gone through in order
    (each entry once before any repeats), the same for the same seed."""
    lap, at = divmod(position, n)
    order = _ORDERS.get((n, seed, lap))
    if order is None:
        order = list(range(n))
        random.Random(f"ttft-dataset-{seed}-{lap}").shuffle(order)
        if len(_ORDERS) > 8:
            _ORDERS.clear()
        _ORDERS[(n, seed, lap)] = order
    return order[at]


_ORDERS: dict[tuple[int, int, int], list[int]] = {}
