"""Built-in methods; importing this package registers them."""

from gnnprivacy.method.builtin import ldp, node_dp, nonprivate  # noqa: F401
from gnnprivacy.method.builtin import gap  # noqa: F401,E402
from gnnprivacy.method.builtin import heterorr  # noqa: F401,E402
from gnnprivacy.method.builtin import graph  # noqa: F401,E402
from gnnprivacy.method.builtin import edge  # noqa: F401,E402
from gnnprivacy.method.builtin import link  # noqa: F401,E402
