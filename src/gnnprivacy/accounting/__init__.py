"""Privacy events, accountants (PLD default, RDP cross-check) and one-sided calibration.

Pure numpy/scipy on top of Google's dp_accounting; never imports torch.

Typical use:

```
from gnnprivacy.accounting import make_accountant, heterpoisson_event
acc = make_accountant("pld", unit="node", relation="add_or_remove")
event = heterpoisson_event(q_b=0.18, M=2, max_out_degree=22469, noise_multiplier=8.0)
for _ in range(steps_executed):
    acc.compose(event)                  # or acc.compose(event, count=steps_executed)
print(acc.get_epsilon(1e-5)); print(acc.ledger)
```
"""

from gnnprivacy.accounting.accountants import (DEFAULT_VALUE_DISCRETIZATION_INTERVAL, Accountant,
                                               PldAccountant, RdpAccountant,
                                               UnsupportedEventError, make_accountant)
from gnnprivacy.accounting.builders import (dpgnn_event, dpsgd_event, edge_subgraph_event,
                                            gaussian_event,
                                            heterpoisson_event, laplace_event, pure_dp_event,
                                            randomized_response_event)
from gnnprivacy.accounting.calibration import calibrate_noise_multiplier
from gnnprivacy.accounting.events import (DpGnnDpEvent, EdgeSubgraphDpEvent, EpsilonDeltaDpEvent,
                                          HeterPoissonDpEvent,
                                          ScopedDpEvent, declared_scope, event_to_dict,
                                          resolve_scope)
from gnnprivacy.accounting.ledger import Ledger, LedgerEntry
from gnnprivacy.accounting.local import (compose_pure_epsilon, grr_fs_epsilon, grr_fs_event,
                                         grr_fs_feature_epsilon)
from gnnprivacy.accounting.multiterm import dpgnn_rdp
from gnnprivacy.accounting.rdp_builders import (default_orders, heterpoisson_paper_orders,
                                                rdp_to_delta, rdp_to_epsilon)
from gnnprivacy.accounting.units import NeighboringRelation, PrivacyUnit

__all__ = [
    "Accountant", "PldAccountant", "RdpAccountant", "make_accountant", "UnsupportedEventError",
    "DEFAULT_VALUE_DISCRETIZATION_INTERVAL", "calibrate_noise_multiplier",
    "dpsgd_event", "heterpoisson_event", "dpgnn_event", "edge_subgraph_event",
    "EdgeSubgraphDpEvent", "gaussian_event", "laplace_event",
    "randomized_response_event", "pure_dp_event",
    "EpsilonDeltaDpEvent", "ScopedDpEvent", "HeterPoissonDpEvent", "DpGnnDpEvent",
    "declared_scope", "resolve_scope", "event_to_dict", "Ledger", "LedgerEntry",
    "compose_pure_epsilon", "grr_fs_epsilon", "grr_fs_feature_epsilon", "grr_fs_event",
    "dpgnn_rdp", "default_orders", "heterpoisson_paper_orders", "rdp_to_epsilon", "rdp_to_delta",
    "PrivacyUnit", "NeighboringRelation",
]
