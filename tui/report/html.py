"""The HTML page of ``ttft report --html``: one self-contained file people open and share.

A header says what the page is of (when it was made, the ttft version, the models, base URLs and
source files), the tables follow, and the charts sit in a grid that reflows from one column on a
phone to several on a wide screen. Every chart element carries its hover details (``data-tip``),
shown by a few lines of inline script that also work on touch. Nothing is fetched: the styles,
the script and the SVG charts are all in the file, and a Content-Security-Policy that admits only
that one script (by its hash) keeps anything else from running. Everything read from logs and
summaries is untrusted: it is escaped as HTML, and its control characters are shown, never kept.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ...telemetry.log.urls import redact_url
from ..format import visible_controls

if TYPE_CHECKING:
    from ..commands.report.inputs import Loaded
    from . import charts


@dataclass(frozen=True)
class PageInfo:
    """What the header says about the page."""

    generated_at: str
    version: str
    sources: tuple[str, ...]
    models: tuple[str, ...]
    base_urls: tuple[str, ...]
    first_turn: str | None = None
    last_turn: str | None = None


def _unique(items: Iterable[Any]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(str(i) for i in items if i))


def page_info(loaded: Loaded, version: str) -> PageInfo:
    """The header's facts, read from the loaded records and bench summaries (URLs without credentials)."""
    records = [r for g in loaded.groups for r in g.records]
    metas = [b.meta for b in loaded.benches]
    models = _unique(
        [f"{r.provider}:{r.model}" if r.provider else r.model for r in records]
        + [m.get("model_spec") or m.get("model") for m in metas]
    )
    urls = _unique(
        redact_url(str(u))  # an odd summary's number is text here, never a crash (nor a credential kept)
        for u in [*(r.base_url for r in records), *(m.get("base_url") for m in metas)]
        if u
    )
    started = sorted(str(s) for s in [*(r.started_at for r in records), *(m.get("started_at") for m in metas)] if s)
    return PageInfo(
        generated_at=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        version=version,
        sources=_unique(loaded.sources),
        models=models,
        base_urls=urls,
        first_turn=started[0] if started else None,
        last_turn=started[-1] if started else None,
    )


def _text(value: Any) -> str:
    """Untrusted text for the page: control characters shown, then escaped."""
    return html.escape(visible_controls(str(value)))


STYLE = """
:root{--fg:#202124;--muted:#5f6368;--line:#dadce0;--head:#f1f3f4}
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);margin:0 auto;
max-width:1500px;padding:1rem 1.25rem;line-height:1.4}
h1{font-size:1.6rem;margin:.2rem 0 .6rem}h2{font-size:1.2rem;margin:1.6rem 0 .5rem}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;margin:0;font-size:.92rem}
dl.meta dt{color:var(--muted)}dl.meta dd{margin:0;overflow-wrap:anywhere}
dl.meta code{font-size:.88em}
main,section{min-width:0}
.scroll{overflow-x:auto;-webkit-overflow-scrolling:touch;max-width:100%}
table{border-collapse:separate;border-spacing:0;margin:.4rem 0;font-size:.9rem;font-variant-numeric:tabular-nums}
td,th{border:1px solid var(--line);border-width:0 1px 1px 0;padding:3px 8px;text-align:right;white-space:nowrap}
tr>:first-child{border-left-width:1px}thead th{border-top-width:1px}
th{background:var(--head);white-space:normal;min-width:4.2em;vertical-align:bottom}
td:first-child,th:first-child{text-align:left;position:sticky;left:0;background:#fff}
th:first-child{background:var(--head)}
td.words{white-space:normal;text-align:left;min-width:11em;max-width:22em}
p.conclusion{max-width:60em}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(100%,540px),1fr));gap:1rem;
align-items:start}
figure.chart{margin:0;border:1px solid var(--line);border-radius:6px;padding:.4rem;min-width:0}
figure.chart svg{display:block;width:100%;height:auto}
figure.chart svg.narrow{display:none}
[data-tip]{cursor:crosshair}
#tip{position:fixed;z-index:10;pointer-events:none;max-width:min(90vw,28rem);background:#202124;color:#fff;
padding:.35rem .55rem;border-radius:4px;font-size:.85rem;box-shadow:0 2px 6px rgba(0,0,0,.3)}
#tip[hidden]{display:none}
@media (max-width:600px){body{padding:.6rem}h1{font-size:1.3rem}dl.meta{grid-template-columns:1fr}
dl.meta dt{margin-top:.3rem}figure.chart svg.wide{display:none}figure.chart svg.narrow{display:block}}
"""

# Shows the hovered (or tapped) element's data-tip beside the pointer, kept on the screen; a tap
# elsewhere hides it (a finger "leaves" the page as it lifts, so that does not). The <title> copies
# are for SVG files opened alone, and are dropped here so the browser shows no second tooltip.
SCRIPT = """
(function(){
var tip=document.getElementById("tip");
document.querySelectorAll("[data-tip] > title").forEach(function(t){t.remove();});
function show(e){
var el=e.target&&e.target.closest?e.target.closest("[data-tip]"):null;
if(!el){tip.hidden=true;return;}
tip.textContent=el.getAttribute("data-tip");tip.hidden=false;
var w=tip.offsetWidth,h=tip.offsetHeight,x=e.clientX+14,y=e.clientY+14;
if(x+w>window.innerWidth-4){x=Math.max(4,e.clientX-w-14);}
if(y+h>window.innerHeight-4){y=Math.max(4,e.clientY-h-14);}
tip.style.left=x+"px";tip.style.top=y+"px";}
document.addEventListener("pointermove",show);
document.addEventListener("pointerdown",show);
document.addEventListener("pointerleave",function(e){if(e.pointerType!=="touch"){tip.hidden=true;}});
})();
"""
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
CSP = f"default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-{_SCRIPT_HASH}'; img-src data:"


NARROW = (420, 340)  # the phone drawing of each chart, in px


def _when(iso: str | None) -> str:
    """An ISO 8601 time as people read it, in UTC; the text as it is when it does not parse."""
    if not iso:
        return ""
    try:
        t = datetime.fromisoformat(iso)
    except ValueError:
        return iso
    return (t.astimezone(UTC) if t.tzinfo else t).strftime("%Y-%m-%d %H:%M:%S UTC")


def _words(value: str) -> bool:
    """Words (the client's health, a name), not a figure: they may wrap, so a long one widens nothing."""
    return len(str(value)) > 16 and " " in str(value).strip()


def _table(header: list[str], rows: list[list[str]]) -> str:
    """A table in its own sideways-scrolling box (its first column kept in view): however many columns
    it grows, the page itself never scrolls sideways and no column is cut off. A column with words in
    any row wraps in every row, so its cells line up."""
    head = "".join(f"<th>{_text(h)}</th>" for h in header)
    wrap = {i for row in rows for i, c in enumerate(row) if _words(c)}

    def cell(i: int, c: str) -> str:
        return f"<td class='words'>{_text(c)}</td>" if i in wrap else f"<td>{_text(c)}</td>"

    body = "".join("<tr>" + "".join(cell(i, c) for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<div class='scroll'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _header(info: PageInfo) -> str:
    def listed(items: tuple[str, ...], code: bool = False) -> str:
        if not items:
            return "-"
        return ", ".join(f"<code>{_text(i)}</code>" if code else _text(i) for i in items)

    span = "-"
    if info.first_turn:
        first, last = _when(info.first_turn), _when(info.last_turn)
        span = _text(first) + ("" if last == first else f" to {_text(last)}")
    rows = [
        ("Generated", _text(info.generated_at)),
        ("ttft", _text(info.version)),
        ("Turns", span),
        ("Models", listed(info.models)),
        ("Base URLs", listed(info.base_urls, code=True)),
        ("Sources", listed(info.sources, code=True)),
    ]
    items = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows)
    return f"<header><h1>ttft report</h1><dl class='meta'>{items}</dl></header>"


def html_page(
    chart_list: list[tuple[str, charts.Chart]],
    info: PageInfo,
    tables: list[tuple[str, list[str], list[list[str]], str]],
) -> str:
    """The page: header, then each ``(title, header, rows, note)`` table, then the charts."""
    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width,initial-scale=1'>",
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">",
        f"<title>ttft report {_text(info.generated_at)}</title><style>{STYLE}</style></head><body>",
        _header(info),
        "<main>",
    ]
    for title, header, rows, note in tables:
        parts.append(f"<section><h2>{_text(title)}</h2>{_table(header, rows)}")
        if note:
            parts.append(f"<p class='conclusion'>{_text(note)}</p>")
        parts.append("</section>")
    if chart_list:
        parts.append("<section><h2>Charts</h2><div class='charts'>")
        for name, c in chart_list:
            # drawn twice: a phone gets a chart laid out for its width, its text still legible
            wide = c.svg().replace("<svg ", "<svg class='wide' ", 1)
            narrow = c.svg(*NARROW).replace("<svg ", "<svg class='narrow' ", 1)
            parts.append(f"<figure class='chart' id='chart-{html.escape(name, quote=True)}'>{wide}{narrow}</figure>")
        parts.append("</div></section>")
    parts.append(f"</main><div id='tip' role='tooltip' hidden></div><script>{SCRIPT}</script></body></html>")
    return "\n".join(parts)
