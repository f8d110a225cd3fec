"""Checks that hold around every test: no test leaves torch's thread state changed for the
tests after it (grad mode, torch function modes, default dtype). One that does fails here,
with the state put back, so that the failure is its own and not a later test's."""
import pytest
import torch


def _state():
    return (torch.is_grad_enabled(), torch.is_inference_mode_enabled(),
            torch._C._len_torch_function_stack(), torch.get_default_dtype())


@pytest.fixture(autouse=True)
def _torch_state_is_left_as_found():
    before = _state()
    yield
    after = _state()
    if after == before:
        return
    torch.set_grad_enabled(before[0])
    while torch._C._len_torch_function_stack() > before[2]:
        torch._C._pop_torch_function_stack()
    torch.set_default_dtype(before[3])
    pytest.fail(f"the test left torch's state changed: (grad, inference, function modes, dtype) "
                f"{before} -> {after}", pytrace=False)
