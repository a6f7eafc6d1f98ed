"""One JSON document as ttft writes it for people and files: indented, every control character escaped.

The CLI's ``--json`` and the files it writes (``probe.json``), and the Python API's ``save``,
all write this form, so a file saved from a notebook is the CLI's byte for byte.
"""

from __future__ import annotations

import json
import re
from typing import Any

# JSON escapes C0 itself; DEL and C1 (0x9b is a CSI) it leaves raw with ensure_ascii=False, and the
# bidi embeddings, overrides and isolates too (tui.format.BIDI_CONTROLS): all escaped here, as \u202e.
_JSON_RAW_CONTROLS = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def json_text(doc: Any) -> str:
    """One JSON document, indented, every control character (and bidi control) escaped: the same values,
    safe on a terminal."""
    text = json.dumps(doc, ensure_ascii=False, indent=2, default=str)
    return _JSON_RAW_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
