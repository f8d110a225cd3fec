"""Built-in methods; importing this package registers them."""

from gnnprivacy.experiments.methods import ldp, node_dp, nonprivate  # noqa: F401
from gnnprivacy.experiments.methods import gap  # noqa: F401,E402
from gnnprivacy.experiments.methods import heterorr  # noqa: F401,E402
