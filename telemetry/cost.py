"""What a turn cost in US dollars, from a kept price table, never from prices written here.

A turn whose token counts came from the server's usage is priced when it ends:

- by the config file's own prices for its model (``[prices."PROVIDER:MODEL"]``, for a
  self-hosted model or a negotiated rate), when it has them: ``source`` is ``"config"``;
- else by `genai-prices <https://github.com/pydantic/genai-prices>`_ (pydantic's table, its data
  bundled in the package and read offline), under the provider the backend names: ``source`` is
  ``"genai-prices VERSION"`` and ``priced_as`` the provider and model the table matched.

Cached input is priced as cached (the table's cache-read price), input written to the cache at the
table's cache-write price (Anthropic's, 1.25x input for its 5-minute cache). A model the table does not know,
a provider it does not know (a loopback or self-hosted compat server) and estimated token counts
all give no cost (None), never a guess.

genai-prices is imported on the first price, not before: importing it costs 0.2-0.3 s, which
``ttft ask`` pays after its answer, not before its first send. Its price of one usage costs
~0.1 ms; a bench prices thousands of turns with a handful of distinct usages, so a result is
kept per price entry and usage (the entry chosen for the turn's time, so a price that changes by
date or time of day is still the one that applied).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from .duration import DASH
from .metrics import TokenCounts
from .plain import as_dict, field_names

CONFIG_SOURCE = "config"
PER_MTOK = 1_000_000


@dataclass(frozen=True, slots=True)
class Cost:
    """One turn's price: input (cached input included), output (reasoning included), and their sum."""

    input_usd: float
    output_usd: float
    total_usd: float
    priced_as: str  # the price entry used: "openai:gpt-4o-mini" (the table's provider:model) or a config key
    source: str  # "genai-prices 0.2.3" or "config"

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self, _COST_FIELDS)


_COST_FIELDS = field_names(Cost)


@dataclass(frozen=True, slots=True)
class Price:
    """A config file's prices for one model or provider, in USD per million tokens."""

    key: str  # what the config names: "compat:qwen3-8b" or "local"
    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None  # None: cached input costs what other input costs
    cache_write_input_per_mtok: float | None = None  # None: input written to the cache costs what other input costs


@dataclass(frozen=True, slots=True)
class PriceRef:
    """Where a backend's turns get their prices: a config entry, or genai-prices' table for this model
    under a provider named by id or by the API's address (a compat server's URL)."""

    model: str
    provider_id: str | None = None  # genai-prices' provider id ("openai", "anthropic")
    api_url: str | None = None  # tried first when set: the table matches providers by their API's address
    config: Price | None = None


def fmt_usd(value: float | None, significant: int = 2) -> str:
    """``$0.00021`` / ``$0.042`` / ``$1.27``: cents and up to the cent, less with ``significant`` digits
    (a turn often costs a fraction of a cent, which "$0.00" would hide)."""
    if value is None or not math.isfinite(value):
        return DASH
    if value == 0:
        return "$0"
    if abs(value) >= 1:
        return f"${value:,.2f}"
    digits = max(2, significant - 1 - math.floor(math.log10(abs(value))))
    whole, _, decimals = f"{value:.{digits}f}".partition(".")
    return f"${whole}.{decimals.rstrip('0').ljust(2, '0')}"  # $0.0000042, not $0.00000420; $0.50, not $0.5


@dataclass(frozen=True, slots=True)
class CostSum:
    """Many turns' cost: what the priced ones cost, and how many were not priced (a partial sum says so)."""

    total_usd: float
    input_usd: float
    output_usd: float
    priced: int
    unpriced: int

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self, _SUM_FIELDS)


_SUM_FIELDS = field_names(CostSum)


def sum_costs(costs: Iterable[Cost | None]) -> CostSum:
    """The sum over turns (None for a turn that was not priced, counted in ``unpriced``)."""
    total = inp = out = 0.0
    priced = unpriced = 0
    for c in costs:
        if c is None:
            unpriced += 1
            continue
        priced += 1
        total += c.total_usd
        inp += c.input_usd
        out += c.output_usd
    return CostSum(total, inp, out, priced, unpriced)


def price_turn(ref: PriceRef | None, tokens: TokenCounts, started_at: str | None = None) -> Cost | None:
    """The turn's cost, or None: no price reference, token counts that are estimates, or a model the
    table does not know. ``started_at``: the turn's ISO time, which picks the price that applied."""
    if ref is None or tokens.source != "usage" or tokens.input is None or tokens.output is None:
        return None
    cached = min(tokens.cached_input or 0, tokens.input)
    written = min(tokens.cache_write_input or 0, tokens.input - cached)
    if ref.config is not None:
        return _config_cost(ref.config, tokens.input, cached, written, tokens.output)
    return _table_cost(ref, tokens.input, cached, written, tokens.output, _when(started_at))


def _config_cost(p: Price, inp: int, cached: int, written: int, out: int) -> Cost:
    cached_rate = p.input_per_mtok if p.cached_input_per_mtok is None else p.cached_input_per_mtok
    write_rate = p.input_per_mtok if p.cache_write_input_per_mtok is None else p.cache_write_input_per_mtok
    in_usd = ((inp - cached - written) * p.input_per_mtok + cached * cached_rate + written * write_rate) / PER_MTOK
    out_usd = out * p.output_per_mtok / PER_MTOK
    return Cost(in_usd, out_usd, in_usd + out_usd, p.key, CONFIG_SOURCE)


def _when(started_at: str | None) -> datetime:
    if started_at:
        try:
            when = datetime.fromisoformat(started_at)
        except ValueError:
            pass
        else:
            return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return datetime.now(UTC)


_lock = threading.Lock()  # turns end on several threads (the chat's runner, compare, bench workers)
# (id of the table's price entry, input, cached, written, output) -> (that entry, the three prices): the
# entry is kept in the value so its id is never another's.
_memo: dict[tuple[int, int, int, int, int], tuple[object, Decimal, Decimal, Decimal]] = {}
_MEMO_MAX = 4096
_source: str | None = None


def table_source() -> str:
    """``"genai-prices VERSION"``: which table, and which release of its data, priced a turn."""
    global _source
    if _source is None:
        from genai_prices import __version__

        _source = f"genai-prices {__version__}"
    return _source


def warm(ref: PriceRef | None) -> None:
    """Import the price table now, if ``ref``'s turns will need it: before a load or a comparison sends
    (where a first turn's end would otherwise hold the others' streams for the import), or while the
    chat's first prompt is typed. Never raises: the turn's own pricing meets any problem again."""
    if ref is None or ref.config is not None:
        return
    try:
        price_turn(ref, TokenCounts(1, 0, 1, 0, "usage"))
    except Exception:
        return


def _table_cost(ref: PriceRef, inp: int, cached: int, written: int, out: int, when: datetime) -> Cost | None:
    from genai_prices import Usage
    from genai_prices.data_snapshot import get_snapshot

    snapshot = get_snapshot()
    found = None
    for provider_id, api_url in ((None, ref.api_url), (ref.provider_id, None)):
        if provider_id is None and api_url is None:
            continue
        try:
            found = snapshot.find_provider_model(ref.model, None, provider_id, api_url)
        except LookupError:
            continue
        break
    if found is None:
        return None
    provider, model = found
    entry = model.get_prices(when)
    key = (id(entry), inp, cached, written, out)
    with _lock:
        hit = _memo.get(key)
    if hit is None or hit[0] is not entry:
        usage = Usage(input_tokens=inp, cache_read_tokens=cached, cache_write_tokens=written, output_tokens=out)
        calc = model.calc_price(usage, provider, genai_request_timestamp=when)  # what calc_price() does once found
        hit = (entry, calc.input_price, calc.output_price, calc.total_price)
        with _lock:
            if len(_memo) >= _MEMO_MAX:
                _memo.clear()
            _memo[key] = hit
    _, in_usd, out_usd, total = hit
    return Cost(float(in_usd), float(out_usd), float(total), f"{provider.id}:{model.id}", table_source())
