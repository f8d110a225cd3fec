"""Compiled kernels of the public-private HRG (spec 001 §3.3-3.4).

Plain-Python functions over numpy arrays, compiled with numba when it is installed (the
``heterorr`` extra) and run as ordinary Python otherwise (same results, ~100x slower). They
draw no randomness themselves: the caller passes pre-drawn uniforms from its own generator.

Dendrogram layout: ``n`` leaves ``0..n-1``, internal nodes ``n..2n-2``; ``left``, ``right``,
``parent`` (root's parent = -1). Per node: ``ntot`` (leaves), ``npub`` (leaves in V_pub), ``npri``
(leaves in V-bar). Per internal node: ``epub``/``epri`` = public/private edges whose LCA it is.
"""

from __future__ import annotations

import math

import numpy as np

try:  # numba is optional: the kernels are plain Python that numba compiles when available
    from numba import njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised only without numba
    HAVE_NUMBA = False

    def njit(*args, **kwargs):
        if args and callable(args[0]):
            return args[0]
        return lambda f: f


@njit(cache=True)
def term(e, n):
    """``N chi(e/N)`` = the maximised Bernoulli log-likelihood of ``e`` edges in ``N`` pairs."""
    if n <= 0 or e <= 0 or e >= n:
        return 0.0
    return e * math.log(e / n) + (n - e) * math.log((n - e) / n)


@njit(cache=True)
def recompute(left, right, parent, root, n, is_pub, is_pri, pub_u, pub_v, pri_u, pri_v):
    """Counts and log-likelihoods from scratch: ``(ntot, npub, npri, epub, epri, Lpub, Lpri)``."""
    m = 2 * n - 1
    ntot = np.zeros(m, np.int64)
    npub = np.zeros(m, np.int64)
    npri = np.zeros(m, np.int64)
    depth = np.zeros(m, np.int64)
    order = np.empty(m, np.int64)
    order[0] = root
    head, tail = 0, 1
    while head < tail:  # breadth-first: parents before children
        x = order[head]
        head += 1
        if x >= n:
            for c in (left[x], right[x]):
                depth[c] = depth[x] + 1
                order[tail] = c
                tail += 1
    for i in range(m - 1, -1, -1):  # children before parents
        x = order[i]
        if x < n:
            ntot[x] = 1
            npub[x] = 1 if is_pub[x] else 0
            npri[x] = 1 if is_pri[x] else 0
        else:
            ntot[x] = ntot[left[x]] + ntot[right[x]]
            npub[x] = npub[left[x]] + npub[right[x]]
            npri[x] = npri[left[x]] + npri[right[x]]
    epub = np.zeros(m, np.int64)
    epri = np.zeros(m, np.int64)
    for kind in range(2):
        us = pub_u if kind == 0 else pri_u
        vs = pub_v if kind == 0 else pri_v
        for j in range(us.shape[0]):
            a, b = us[j], vs[j]
            while depth[a] > depth[b]:
                a = parent[a]
            while depth[b] > depth[a]:
                b = parent[b]
            while a != b:
                a = parent[a]
                b = parent[b]
            if kind == 0:
                epub[a] += 1
            else:
                epri[a] += 1
    lpub = 0.0
    lpri = 0.0
    for x in range(n, m):
        lpub += term(epub[x], npub[left[x]] * npub[right[x]])
        lpri += term(epri[x], npri[left[x]] * npri[right[x]])
    return ntot, npub, npri, epub, epri, lpub, lpri


@njit(cache=True)
def _inside(y, big, parent, ntot):
    """Whether leaf ``y`` lies under ``big``: walk up while the subtree is smaller than big's."""
    size = ntot[big]
    x = y
    while x != -1 and ntot[x] < size:
        x = parent[x]
    return x == big


@njit(cache=True)
def _cross_edges_walk(small, big, n, left, right, parent, ntot, stack, pub_ptr, pub_idx,
                      pri_ptr, pri_idx):
    """(public, private) edges between the leaves of ``small`` and those of ``big``."""
    cpub = 0
    cpri = 0
    top = 1
    stack[0] = small
    while top > 0:
        top -= 1
        x = stack[top]
        if x < n:
            for j in range(pub_ptr[x], pub_ptr[x + 1]):
                if _inside(pub_idx[j], big, parent, ntot):
                    cpub += 1
            for j in range(pri_ptr[x], pri_ptr[x + 1]):
                if _inside(pri_idx[j], big, parent, ntot):
                    cpri += 1
        else:
            stack[top] = left[x]
            stack[top + 1] = right[x]
            top += 2
    return cpub, cpri


@njit(cache=True)
def mcmc_run(left, right, parent, n, nonroot, ntot, npub, npri, epub, epri,
             pub_ptr, pub_idx, pri_ptr, pri_idx, uniforms, kinds, temperature, sound,
             lpub, lpri, stack):
    """Run ``len(uniforms)`` Clauset moves in place; returns ``(lpub, lpri, accepted)``.

    ``uniforms[t] = (pick r, pick option, accept)``; ``kinds[t]`` is 0 (public move) or 1
    (private move), used only when ``sound`` is False (the paper's alternating chain).
    """
    accepted = 0
    n_nonroot = nonroot.shape[0]
    for t in range(uniforms.shape[0]):
        r = nonroot[min(int(uniforms[t, 0] * n_nonroot), n_nonroot - 1)]
        s = parent[r]
        a, b = left[r], right[r]
        c = right[s] if left[s] == r else left[s]
        if uniforms[t, 1] < 0.5:
            keep, moved = a, b      # r' = (a, c), s' = (r', b)
        else:
            keep, moved = b, a      # r' = (b, c), s' = (r', a)
        # edges between keep and c, both types: iterate the smaller subtree's leaves
        if ntot[keep] <= ntot[c]:
            small, big = keep, c
        else:
            small, big = c, keep
        e_kc_pub, e_kc_pri = _cross_edges_walk(small, big, n, left, right, parent, ntot, stack,
                                               pub_ptr, pub_idx, pri_ptr, pri_idx)
        # new counts of r' and s'
        np_r = npub[keep] + npub[c]
        nq_r = npri[keep] + npri[c]
        er_pub_new = e_kc_pub
        es_pub_new = epub[r] + epub[s] - e_kc_pub
        er_pri_new = e_kc_pri
        es_pri_new = epri[r] + epri[s] - e_kc_pri
        old_pub = term(epub[r], npub[a] * npub[b]) + term(epub[s], npub[r] * npub[c])
        old_pri = term(epri[r], npri[a] * npri[b]) + term(epri[s], npri[r] * npri[c])
        new_pub = term(er_pub_new, npub[keep] * npub[c]) + term(es_pub_new, np_r * npub[moved])
        new_pri = term(er_pri_new, npri[keep] * npri[c]) + term(es_pri_new, nq_r * npri[moved])
        d_pub = new_pub - old_pub
        d_pri = new_pri - old_pri
        if sound:
            log_a = d_pub + temperature * d_pri
        elif kinds[t] == 0:
            log_a = d_pub
        else:
            log_a = temperature * d_pri
        u = uniforms[t, 2]
        if log_a >= 0.0 or (u > 0.0 and math.log(u) < log_a):
            # apply: r = (keep, c), s = (r, moved)
            left[r] = keep
            right[r] = c
            parent[c] = r
            if left[s] == r:
                right[s] = moved
            else:
                left[s] = moved
            parent[moved] = s
            ntot[r] = ntot[keep] + ntot[c]
            npub[r] = np_r
            npri[r] = nq_r
            epub[r] = er_pub_new
            epub[s] = es_pub_new
            epri[r] = er_pri_new
            epri[s] = es_pri_new
            lpub += d_pub
            lpri += d_pri
            accepted += 1
    return lpub, lpri, accepted


@njit(cache=True)
def leaf_ranges(left, right, root, n, include):
    """In-order positions of the ``include``-d leaves and, per node, its range ``[lo, hi)``.

    Returns ``(order, lo, hi)``: ``order`` lists the included leaves left to right; node ``x``'s
    included leaves are ``order[lo[x]:hi[x]]`` (contiguous).
    """
    m = 2 * n - 1
    lo = np.zeros(m, np.int64)
    hi = np.zeros(m, np.int64)
    order = np.empty(n, np.int64)
    count = 0
    stack = np.empty(2 * m + 2, np.int64)
    visited = np.zeros(m, np.bool_)
    top = 1
    stack[0] = root
    while top > 0:
        x = stack[top - 1]
        if x < n:
            top -= 1
            lo[x] = count
            if include[x]:
                order[count] = x
                count += 1
            hi[x] = count
        elif not visited[x]:
            visited[x] = True
            lo[x] = count
            stack[top] = right[x]
            stack[top + 1] = left[x]
            top += 2
        else:
            top -= 1
            hi[x] = count
    return order[:count], lo, hi


@njit(cache=True)
def cluster_code(left, right, root, n):
    """A unique integer for the tree shape over ``n <= 5`` leaves: the set of leaf clusters.

    Bit ``m`` is set when some internal node's leaf set has bitmask ``m`` (``m < 2^n``).
    """
    mask = np.zeros(2 * n - 1, np.int64)
    code = 0
    order = np.empty(2 * n - 1, np.int64)
    order[0] = root
    head, tail = 0, 1
    while head < tail:
        x = order[head]
        head += 1
        if x >= n:
            order[tail] = left[x]
            order[tail + 1] = right[x]
            tail += 2
    for i in range(2 * n - 2, -1, -1):
        x = order[i]
        if x < n:
            mask[x] = 1 << x
        else:
            mask[x] = mask[left[x]] | mask[right[x]]
            code |= 1 << mask[x]
    return code


@njit(cache=True)
def mcmc_record(left, right, parent, n, nonroot, ntot, npub, npri, epub, epri,
                pub_ptr, pub_idx, pri_ptr, pri_idx, uniforms, kinds, temperature, sound,
                lpub, lpri, stack, thin):
    """Run ``len(uniforms)`` moves and record `cluster_code` every ``thin`` moves."""
    samples = uniforms.shape[0] // thin
    codes = np.empty(samples, np.int64)
    for s in range(samples):
        lpub, lpri, _ = mcmc_run(left, right, parent, n, nonroot, ntot, npub, npri, epub,
                                       epri, pub_ptr, pub_idx, pri_ptr, pri_idx,
                                       uniforms[s * thin:(s + 1) * thin],
                                       kinds[s * thin:(s + 1) * thin], temperature, sound, lpub,
                                       lpri, stack)
        codes[s] = cluster_code(left, right, 0 if n < 0 else _root(parent), n)
    return codes


@njit(cache=True)
def _root(parent):
    for x in range(parent.shape[0] - 1, -1, -1):
        if parent[x] == -1:
            return x
    return -1
