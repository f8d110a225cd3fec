"""What a pickle would call, read from its opcodes without running it.

Planetoid's raw files (``ind.cora.x`` ...) are Python pickles: numpy arrays, SciPy sparse
matrices and a ``defaultdict`` of lists. Unpickling runs whatever callable a file names, so
gnnprivacy never unpickles them itself: `pickle_globals` walks the opcodes with
``pickletools.genops`` (a parser: nothing is imported or called) and lists the Python objects
the file names, and `check_planetoid_pickle` refuses a file that names anything but the
array and container types such a file holds, or that is torn. The dataset listing uses it as
its check of these files, and the dataset loader runs it before PyG's own loader unpickles
them (PyG's ``read_planetoid_data`` calls ``pickle.load``: trust your data root all the same).
"""

from __future__ import annotations

import pickletools
from pathlib import Path
from typing import BinaryIO

__all__ = ["PLANETOID_GLOBALS", "check_planetoid_pickle", "load_error_line", "pickle_globals",
           "unsafe_globals"]

_SPARSE = {f"{fmt}_{kind}" for fmt in ("csr", "csc", "coo", "lil", "dok", "bsr", "dia")
           for kind in ("matrix", "array")}

#: the objects a Planetoid raw file may name: array and sparse-matrix classes, numpy's array
#: rebuilders, and containers (``module name`` as pickle writes them, Python 2 names included)
PLANETOID_GLOBALS = frozenset(
    {"numpy dtype", "numpy ndarray"}
    | {f"numpy.{core}.{mod} {name}" for core in ("core", "_core")
       for mod, name in (("multiarray", "_reconstruct"), ("multiarray", "scalar"),
                         ("numeric", "_frombuffer"))}
    | {f"scipy.sparse.{mod} {name}" for name in _SPARSE
       for mod in (name.split("_")[0], "_" + name.split("_")[0], "_arrays", "_matrix")}
    | {f"scipy.sparse {name}" for name in _SPARSE}
    | {f"{b} {name}" for b in ("__builtin__", "builtins")
       for name in ("list", "dict", "set", "tuple", "int", "float", "complex", "bytearray")}
    | {"collections defaultdict", "collections OrderedDict", "_codecs encode"})

_STRINGS = ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING",
            "BINSTRING", "SHORT_BINSTRING")


def pickle_globals(stream: BinaryIO) -> list[str]:
    """``"module name"`` of every object the pickle at ``stream`` names (``GLOBAL``, ``INST``,
    ``STACK_GLOBAL``, the extension registry's ``EXT*``), in order, from its opcodes; nothing
    is imported or called.

    The stack is followed opcode by opcode (each opcode's declared pops and pushes, marks
    included), so a ``STACK_GLOBAL`` is named by the two strings it really takes; one whose
    strings are not literal (built on the stack) is listed as ``"? ?"``, which no allowlist
    holds.

    Raises:
        ValueError: a torn or malformed pickle (``pickletools`` names the problem).
    """
    mark = object()
    out: list[str] = []
    stack: list = []      # per stack slot: its literal string, `mark`, or None
    memo: dict[int, object] = {}

    def pop(n: int) -> None:
        del stack[max(0, len(stack) - n):]

    for op, arg, _ in pickletools.genops(stream):
        name = op.name
        if name == "STACK_GLOBAL":
            mod, attr = (stack[-2], stack[-1]) if len(stack) >= 2 else (None, None)
            out.append(f"{mod} {attr}" if isinstance(mod, str) and isinstance(attr, str)
                       else "? ?")
            pop(2)
            stack.append(None)
            continue
        if name in ("GLOBAL", "INST"):
            out.append(str(arg))
        elif name.startswith("EXT"):
            out.append(f"? extension-{arg}")
        if name in ("MEMOIZE", "PUT", "BINPUT", "LONG_BINPUT"):
            memo[len(memo) if name == "MEMOIZE" else int(arg)] = stack[-1] if stack else None
            continue
        if name in ("GET", "BINGET", "LONG_BINGET"):
            stack.append(memo.get(int(arg)))
            continue
        before = op.stack_before
        if pickletools.stackslice in before:   # everything down to the mark, then the rest
            while stack and stack[-1] is not mark:
                stack.pop()
            pop(1 + before.index(pickletools.markobject))
        else:
            pop(len(before))
        for kind in op.stack_after:
            stack.append(mark if kind is pickletools.markobject
                         else arg if name in _STRINGS and isinstance(arg, str) else None)
    return out


def unsafe_globals(names: list[str], allowed: frozenset[str] = PLANETOID_GLOBALS) -> list[str]:
    """The names of ``names`` outside ``allowed``, each once, in order."""
    seen: list[str] = []
    for n in names:
        if n not in allowed and n not in seen:
            seen.append(n)
    return seen


def check_planetoid_pickle(path: str | Path) -> None:
    """Raise ``ValueError`` (one line) if ``path`` is not a whole pickle naming only
    `PLANETOID_GLOBALS`; the file is parsed, never unpickled."""
    with open(path, "rb") as stream:
        names = pickle_globals(stream)
    bad = unsafe_globals(names)
    if bad:
        shown = ", ".join(b.replace(" ", ".") for b in bad[:3])
        raise ValueError(f"the pickle names {shown}, which a Planetoid file never holds "
                         "(unpickling it would run that code; gnnprivacy did not)")


def load_error_line(exc: BaseException, path: str | Path | None = None) -> str:
    """One line saying why ``torch.load(weights_only=True)`` refused a file: the Python object a
    pickle names (code, never run), or the first informative line of the error. With ``path``,
    a plain pickle (not torch's zip format) is parsed for the objects it names."""
    import re
    import zipfile

    text = str(exc)
    named = re.search(r"GLOBAL ([\w.]+)", text)
    found = named.group(1) if named else None
    if found is None and path is not None and type(exc).__name__ == "UnpicklingError":
        try:
            if not zipfile.is_zipfile(path):
                with open(path, "rb") as stream:
                    names = pickle_globals(stream)
                found = names[0].replace(" ", ".") if names else None
        except (OSError, ValueError):
            found = None
    if found:
        return (f"it names the Python object {found}: code, not tensors or plain values "
                "(read weights-only, nothing in it ran)")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    detail = next((ln for ln in lines if "Unsupported" in ln or "unsupported" in ln), None)
    if detail is None:
        detail = next((ln for ln in lines if "weights_only" not in ln and "Weights only" not in ln
                       and "pytorch.org" not in ln), lines[0] if lines else "")
    detail = detail.split(". ")[0].rstrip(":. ")
    if isinstance(exc, Exception) and type(exc).__name__ == "UnpicklingError":
        detail += " (read weights-only, nothing in it ran)"
    return f"{type(exc).__name__}: {detail[:200]}"
