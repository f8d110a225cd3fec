"""torch's per-thread state, put back as found when a block is left however it is left.

A Ctrl-C (or SIGTERM, which the command line turns into ``KeyboardInterrupt``) is raised by
Python between two bytecodes: when it lands inside ``torch.no_grad().__exit__`` before that
restores the grad mode, or between a private loader's draw and the step that stops its loop
trace, the thread keeps gradients off, or keeps recording every torch operation. A process
that then exits loses nothing, but one that goes on (a notebook, a test run, a command invoked
in-process) trains with ``loss.backward()`` failing on "element 0 of tensors does not require
grad". `torch_state_kept` wraps the library's entry points (`gnnprivacy.method.runner.run`,
every command) so that what they changed is undone on the way out.

It does not import torch: a block entered before torch is loaded (``gnnprivacy --help``
loads none) is left with torch's defaults (gradients on, no function mode) if the block
loaded it.
"""

from __future__ import annotations

import contextlib
import sys
from typing import Iterator


@contextlib.contextmanager
def torch_state_kept() -> Iterator[None]:
    """On leaving the block: the grad mode as on entry, and no torch function mode left
    pushed above those on the stack at entry (a loop trace left by an interrupted step)."""
    torch = sys.modules.get("torch")
    grad, depth = ((True, 0) if torch is None
                   else (torch.is_grad_enabled(), torch._C._len_torch_function_stack()))
    try:
        yield
    finally:
        torch = sys.modules.get("torch")
        if torch is not None:
            while torch._C._len_torch_function_stack() > depth:
                torch._C._pop_torch_function_stack()
            torch._C._set_grad_enabled(grad)
