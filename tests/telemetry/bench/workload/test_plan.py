"""telemetry.bench.workload.plan: what each conversation of a workload asks for, from its number alone."""

from __future__ import annotations

from ttft.telemetry.bench.workload.dataset import DatasetTurn
from ttft.telemetry.bench.workload.lengths import Lengths
from ttft.telemetry.bench.workload.plan import Workload
from ttft.telemetry.bench.workload.trace import TraceRequest


def test_a_conversation_of_three_turns_numbers_its_requests_and_draws_each_length() -> None:
    w = Workload(input=Lengths.parse("100:30"), output=Lengths.parse("10-20"), turns=3)
    conv = w.conversation(30, seed=1, default_output=64)
    assert conv.number == 30 and [t.index for t in conv.turns] == [30, 31, 32]
    assert all(10 <= t.output_tokens <= 20 for t in conv.turns)
    assert conv == w.conversation(30, seed=1, default_output=64)  # the same plan on every process
    assert w.requests_for(32) == 33  # whole conversations


def test_without_output_lengths_the_turns_ask_for_the_default() -> None:
    w = Workload(input=Lengths.fixed(40))
    (turn,) = w.conversation(5, seed=0, default_output=64).turns
    assert (turn.input_tokens, turn.output_tokens, turn.text) == (40, 64, None)


def test_prefixes_go_round_the_users() -> None:
    w = Workload(prefix_tokens=256, prefixes=3)
    assert [w.prefix_of(u) for u in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert Workload().prefix_of(4) is None


def test_a_dataset_is_gone_through_once_in_a_seeded_order_before_it_repeats() -> None:
    convs = tuple((DatasetTurn(f"q{i}", 10 + i), DatasetTurn(f"q{i}b")) for i in range(5))
    w = Workload(dataset=convs, turns=2)
    firsts = [w.conversation(2 * j, seed=4, default_output=64).turns[0].text for j in range(5)]
    assert sorted(firsts) == [f"q{i}" for i in range(5)]  # each once
    again = [w.conversation(2 * j, seed=4, default_output=64).turns[0].text for j in range(5)]
    assert firsts == again
    other = [w.conversation(2 * j, seed=5, default_output=64).turns[0].text for j in range(5)]
    assert other != firsts  # another seed, another order
    conv = w.conversation(0, seed=4, default_output=64)
    i = int(conv.turns[0].text[1:])
    assert [t.output_tokens for t in conv.turns] == [10 + i, 64]  # the dataset's answer, else the default
    one = Workload(dataset=convs)  # one turn: the first human turn only
    assert len(one.conversation(0, seed=4, default_output=64).turns) == 1


def test_a_trace_plans_its_own_requests_by_their_place() -> None:
    reqs = (TraceRequest(0.0, 600, 7, (1, 2)), TraceRequest(40.0, 300, 9, (1,)))
    w = Workload(trace=reqs)
    conv = w.conversation(100, seed=0, default_output=64, position=1)
    assert conv.at_s == 0.04 and conv.turns[0].hash_ids == (1,)
    assert (conv.turns[0].input_tokens, conv.turns[0].output_tokens) == (300, 9)
    assert w.describe(64)["trace"]["requests"] == 2 and w.kind == "trace"


def test_the_longest_request_is_a_conversations_last_turn_with_its_history() -> None:
    w = Workload(input=Lengths.parse("100:10"), output=Lengths.parse("20-40"), prefix_tokens=50, turns=3)
    longest = w.longest(default_output=64)
    # a prefix, three user turns at their reach (130) and the two answers before the last (40 each)
    assert (longest.prompt, longest.output, longest.total) == (50 + 3 * 130 + 2 * 40, 40, 560)
    assert longest.what == "turn 3 of a conversation"
    assert Workload(input=Lengths.fixed(10)).longest(default_output=64).total == 74  # one turn: no history


def test_the_longest_of_a_dataset_and_of_a_trace() -> None:
    convs = ((DatasetTurn("x" * 400, 30), DatasetTurn("y" * 40)), (DatasetTurn("z" * 2000),))
    w = Workload(dataset=convs, turns=2)
    # first: 100 + 10 tokens of text and the 30-token answer between them, then 64 asked; second: 500 + 64
    assert w.dataset_longest(convs[0], 64) == (140, 64) and w.dataset_longest(convs[1], 64) == (500, 64)
    assert w.longest(64).total == 564
    trace = (TraceRequest(0, 1000, 10), TraceRequest(5, 900, 200))
    assert Workload(trace=trace).longest(64).total == 1100  # the trace's own answer lengths
    assert Workload(trace=trace, output=Lengths.fixed(5)).longest(64).total == 1005  # --output-tokens over them
