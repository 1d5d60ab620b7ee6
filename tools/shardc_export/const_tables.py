"""Folded constants that are neither all-equal nor a mask / position ids /
rotary table (aten_consts.py), expressed exactly with graph ops that copy:
`slice`, `cat`, `reshape` (docs/exporter.md, "Constants built in forward").

Two shapes of constant are common in real models:

- ids into an embedding table that come in runs (consecutive ids, or one id
  repeated): each run is a `slice` of the table's rows (a repeated id is one
  row copied with `cat`), the runs joined with `cat`;
- tables whose value at [t, s] depends on s - t only (Toeplitz in the last
  two dims): T5's relative-position buckets, additive causal masks. Such a
  table M [T, S] is its first column and row, r [T + S - 1] with
  M[t, s] = r[s - t + T - 1], and the "skew" of r: T copies of r joined
  ([T * L], L = T + S - 1), read from element T - 1 with rows of L - 1
  (reshape [T, L - 1]) and the first S columns taken. Element (t, s) is then
  r[(T - 1 + t (L - 1) + s) mod L] = r[s - t + T - 1]. The copies cost T * L
  elements, the nodes a few.

Floating constants become runs of `fill` buffers. Every run is one graph
node, so a constant needs at most MAX_RUNS runs (after the Toeplitz
reduction); more is refused with the constant's shape. No tensor data is
written into the graph."""

import torch

# Graph nodes a constant may take (one per run).
MAX_RUNS = 512


def runs(values):
    """Maximal runs of a 1-D list: (first value, length, consecutive) where
    consecutive means value, value + 1, ... and otherwise one value repeated."""
    out, i, n = [], 0, len(values)
    while i < n:
        j = i + 1
        if j < n and values[j] == values[i]:
            while j < n and values[j] == values[i]:
                j += 1
            out.append((values[i], j - i, False))
        else:
            while j < n and isinstance(values[j], int) and values[j] == values[j - 1] + 1:
                j += 1
            out.append((values[i], j - i, True))
        i = j
    return out


def _meta(shape, dtype):
    return torch.empty([int(s) for s in shape], dtype=dtype, device="meta")


def _slice(low, node, x, dim, start, end):
    if start == 0 and end == x.shape[dim]:
        return x
    shape = list(x.shape)
    shape[dim] = end - start
    return low.emit(node, "slice", [x], _meta(shape, x.val.dtype), dim=dim, start=start,
                    end=end, step=1)


def _cat(low, node, parts, dim):
    if len(parts) == 1:
        return parts[0]
    shape = list(parts[0].shape)
    shape[dim] = sum(p.shape[dim] for p in parts)
    return low.emit(node, "cat", parts, _meta(shape, parts[0].val.dtype), dim=dim)


def _reshape(low, node, x, shape):
    if list(x.shape) == list(shape):
        return x
    return low.emit(node, "reshape", [x], _meta(shape, x.val.dtype), shape=list(shape))


def toeplitz_vector(t):
    """r with t[..., i, j] == r[j - i + T - 1] for every leading index, or
    None (t has fewer than 2 dims, a last dim of size 1 (the plain runs are
    as short), or is not such a table)."""
    if t.dim() < 2 or t.numel() == 0 or t.shape[-2] < 2 or t.shape[-1] < 2:
        return None
    T, S = t.shape[-2], t.shape[-1]
    m = t.reshape(-1, T, S)
    if not bool((m == m[:1]).all()):
        return None
    m = m[0]
    if not bool((m[1:, 1:] == m[:-1, :-1]).all()):
        return None
    return torch.cat([m[:, 0].flip(0), m[0, 1:]])


def skew(low, node, r, T, S):
    """M [T, S, *rest] with M[t, s] = r[s - t + T - 1], r [T + S - 1, *rest]."""
    rest = list(r.shape[1:])
    L = T + S - 1
    if T == 1:
        return _reshape(low, node, r, [1, S] + rest)
    f = _cat(low, node, [r] * T, 0)
    f = _slice(low, node, f, 0, T - 1, T - 1 + T * (L - 1))
    f = _reshape(low, node, f, [T, L - 1] + rest)
    return _slice(low, node, f, 1, 0, S)


def _check_runs(low, node, rs, what, shape):
    if len(rs) > MAX_RUNS:
        low.fail(node, "its %s: a constant of shape %s built in forward that takes %d runs "
                 "of consecutive or equal values (at most %d are expressed as graph data)"
                 % (what, list(shape), len(rs), MAX_RUNS))


def gather_rows(low, node, weight, ids, what="ids"):
    """weight[ids] for a 1-D list of ints, from slices of weight's rows."""
    rs = runs(ids)
    _check_runs(low, node, rs, what, [len(ids)])
    parts = []
    for first, n, consecutive in rs:
        if first < 0 or first + (n if consecutive else 1) > weight.shape[0]:
            low.fail(node, "its %s (a constant built in forward) hold %d, outside the table's "
                     "%d rows" % (what, first, weight.shape[0]))
        row = _slice(low, node, weight, 0, first, first + (n if consecutive else 1))
        parts.append(row if consecutive or n == 1 else _cat(low, node, [row] * n, 0))
    return _cat(low, node, parts, 0)


def embedding_of_const_ids(low, node, weight, ids):
    """weight[ids] (shape ids.shape + [D]) for constant integer ids: the
    Toeplitz form when the ids have it (T5's relative-position buckets),
    else the flattened ids in runs. Leading dims over which a Toeplitz table
    repeats are broadcast lazily (aten.Expanded)."""
    from .aten import Expanded
    out_shape = list(ids.shape) + list(weight.shape[1:])
    r = toeplitz_vector(ids)
    if r is not None:
        T, S = ids.shape[-2], ids.shape[-1]
        m = skew(low, node, gather_rows(low, node, weight, [int(v) for v in r]), T, S)
        lead = [1] * (ids.dim() - 2) + [T, S] + list(weight.shape[1:])
        m = _reshape(low, node, m, lead)
        return m if lead == out_shape else Expanded(m, out_shape)
    rows = gather_rows(low, node, weight, [int(v) for v in ids.reshape(-1)])
    return _reshape(low, node, rows, out_shape)


def float_table(low, node, t, dtype, fill_buffer):
    """A floating constant as a graph tensor (runs of fill buffers, through
    the Toeplitz form when it has one), or None when it takes more than
    MAX_RUNS runs. fill_buffer(value, shape) makes one run."""
    r = toeplitz_vector(t)
    toeplitz = r is not None
    flat = r if toeplitz else t.reshape(-1)
    rs = runs([float(v) for v in flat])
    if len(rs) > MAX_RUNS:
        return None
    parts = []
    for value, n, _ in rs:
        # a "consecutive" run of floats has length 1 (runs() steps ints only)
        parts.append(fill_buffer(value, [n]))
    vec = _cat(low, node, parts, 0)
    if not toeplitz:
        return _reshape(low, node, vec, list(t.shape))
    T, S = t.shape[-2], t.shape[-1]
    m = skew(low, node, vec, T, S)
    lead = [1] * (t.dim() - 2) + [T, S]
    m = _reshape(low, node, m, lead)
    if lead != list(t.shape):
        from .aten import Expanded
        return Expanded(m, list(t.shape))
    return m
