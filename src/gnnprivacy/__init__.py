"""gnnprivacy: privacy-preserving graph learning on PyTorch and PyTorch Geometric.

Sub-packages (imports point down only): ``accounting`` (privacy events, accountants,
calibration; no torch), ``mechanisms``, ``datasets``, ``sampling``, ``nn``, ``training``,
``experiments`` (configs, registry, runner, CLI) and ``reporting`` (run records).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
