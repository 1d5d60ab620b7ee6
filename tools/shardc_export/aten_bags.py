"""nn.EmbeddingBag / F.embedding_bag (aten._embedding_bag): the rows of each
bag of ids looked up in a table and reduced to one row (docs/exporter.md,
the `_embedding_bag` row).

Two forms, by what torch passes as offsets:
- bags of one size (a 2-d input: F.embedding_bag flattens it and passes the
  constant offsets 0, L, 2L, ...): `embedding` as [B, L, D] and `sum` /
  `mean` / `amax` over each bag;
- ragged bags (a 1-d input and its offsets, a forward input: DLRM's sparse
  features): each id's bag number computed from the offsets at run time,
  then the bag sums as one `embedding_backward` (rows summed by index, in
  order, in double), so the graph's shapes stay static while the bags' sizes
  are data. `mean` divides by each bag's count (an empty bag gives 0, as
  torch); `max` over ragged bags has no graph form.

padding_idx leaves that id's rows out of its bag (and out of mean's count);
per_sample_weights scale each row first (torch allows them in mode sum)."""

import torch

from . import aten_consts as hf
from .aten_values import _meta
from .graph_emitter import value_dtype

SUM, MEAN, MAX = 0, 1, 2


def _table_ids(low, weight, ids):
    """ids read as rows of `weight`: an input's valid range is the table."""
    for d in low.input_decls:
        if d["name"] == ids.name:
            low.high[d["name"]] = weight.shape[0]


def _rows(low, node, weight, ids, padding_idx, dtype):
    """embedding(weight, ids) as [count, D]; padding_idx keeps that row out
    of the table's gradient, as nn.Embedding's."""
    extra = {"padding_idx": padding_idx} if padding_idx >= 0 else {}
    return low.emit(node, "embedding", [weight, ids],
                    _meta([ids.shape[0], weight.shape[1]], dtype), **extra)


def _kept(low, node, ids, padding_idx, shape, dtype):
    """1 where ids != padding_idx, else 0, as `shape` (ids' order): int64
    (a where's condition) or, given a float dtype, in it (a factor)."""
    kept = low.emit(node, "ne", [ids], _meta(ids.shape, torch.int64), value=float(padding_idx))
    if dtype != torch.int64:
        kept = low.emit(node, "cast", [kept], _meta(ids.shape, dtype), dtype=value_dtype(dtype))
    return low.emit(node, "reshape", [kept], _meta(shape, dtype), shape=list(shape))


def _scaled(low, node, rows, weights, shape):
    """rows times per_sample_weights (one per id) as `shape`."""
    w = low.tensor(node, weights, "per_sample_weights")
    w = low.emit(node, "reshape", [w], _meta(shape, rows.val.dtype), shape=list(shape))
    return low.emit(node, "mul", [rows, w], rows.val)


def _equal_bags(low, node, weight, ids, bags, size, mode, weights, padding_idx, out):
    """Bags of one size: [B, L, D] rows reduced over L."""
    dim, dtype = weight.shape[1], out.dtype
    rows = _rows(low, node, weight, ids, padding_idx, dtype)
    rows = low.emit(node, "reshape", [rows], _meta([bags, size, dim], dtype),
                    shape=[bags, size, dim])
    if weights is not None:
        rows = _scaled(low, node, rows, weights, [bags, size, 1])
    if padding_idx < 0:
        reduce = {SUM: "sum", MEAN: "mean", MAX: "amax"}[mode]
        return low.emit(node, reduce, [rows], out, dims=[1], keepdim=0)
    if mode == MAX:
        # Padding rows can never be a bag's max; a bag of padding only is 0.
        kept = _kept(low, node, ids, padding_idx, [bags, size, 1], torch.int64)
        masked = low.emit(node, "where", [kept, rows, low.const(float("-inf"), rows)], rows.val)
        top = low.emit(node, "amax", [masked], out, dims=[1], keepdim=0)
        counts = low.emit(node, "cast", [kept], _meta(kept.shape, dtype), dtype=value_dtype(dtype))
        counts = low.emit(node, "sum", [counts], _meta([bags, 1], dtype), dims=[1], keepdim=0)
        some = low.emit(node, "gt", [counts], _meta([bags, 1], torch.int64), value=0.0)
        return low.emit(node, "where", [some, top, low.const(0.0, top)], out)
    kept = _kept(low, node, ids, padding_idx, [bags, size, 1], dtype)
    counts = low.emit(node, "sum", [kept], _meta([bags, 1], dtype), dims=[1], keepdim=0)
    rows = low.emit(node, "mul", [rows, kept], rows.val)
    sums = low.emit(node, "sum", [rows], out, dims=[1], keepdim=0)
    return sums if mode == SUM else _per_count(low, node, sums, counts, out)


def _per_count(low, node, sums, counts, out):
    """mean: each bag's sum over its count (at least 1: an empty bag's sum
    is 0, and so is torch's mean)."""
    counts = low.emit(node, "clamp_out", [counts], counts.val, min=1.0)
    return low.emit(node, "div", [sums, counts], out)


def _bag_numbers(low, node, starts, count):
    """Each id's bag as int64 [count]: a 1 at every bag's start (bags with
    equal starts, i.e. empty ones, add up), summed along the ids. The
    counting is in float64 (exact to 2^53 ids); a start past the ids (an
    empty last bag) lands in the extra row, cut off."""
    bags = starts.shape[0]
    ones = hf.fill_buffer(low, 1.0, [bags, 1], torch.float64)
    marks = low.emit(node, "embedding_backward", [ones, starts],
                     _meta([count + 1, 1], torch.float64), rows=count + 1)
    marks = low.emit(node, "slice", [marks], _meta([count, 1], torch.float64),
                     dim=0, start=0, end=count, step=1)
    number = low.emit(node, "cumsum", [marks], marks.val, dim=0)
    number = low.emit(node, "sub", [number, low.const(1.0, number)], marks.val)
    number = low.emit(node, "cast", [number], _meta([count, 1], torch.int64), dtype="int64")
    return low.emit(node, "reshape", [number], _meta([count], torch.int64), shape=[count])


def _ragged_bags(low, node, weight, ids, offsets, include_last, mode, weights, padding_idx,
                 out):
    """Bags given by offsets at run time: rows summed into their bag by
    `embedding_backward` (in order, in double)."""
    if mode == MAX:
        low.fail(node, "embedding_bag in mode max over bags of different sizes (offsets given "
                 "at run time) has no graph form; use mode sum or mean, or a 2-d input "
                 "[bags, size] (bags of one size)")
    count, dim, dtype = ids.shape[0], weight.shape[1], out.dtype
    starts = low.tensor(node, offsets, "offsets")
    if len(starts.shape) != 1 or starts.val.dtype != torch.int64:
        low.fail(node, "embedding_bag's offsets must be 1-d int64, got %s %s"
                 % (list(starts.shape), starts.val.dtype))
    bags = out.shape[0]
    if include_last:
        starts = low.emit(node, "slice", [starts], _meta([bags], torch.int64),
                          dim=0, start=0, end=bags, step=1)
    number = _bag_numbers(low, node, starts, count)
    rows = _rows(low, node, weight, ids, padding_idx, dtype)
    if weights is not None:
        rows = _scaled(low, node, rows, weights, [count, 1])
    kept = _kept(low, node, ids, padding_idx, [count, 1], dtype) if padding_idx >= 0 else None
    if kept is not None:
        rows = low.emit(node, "mul", [rows, kept], rows.val)
    sums = low.emit(node, "embedding_backward", [rows, number], out, rows=bags)
    if mode == SUM:
        return sums
    ones = kept if kept is not None else hf.fill_buffer(low, 1.0, [count, 1], dtype)
    counts = low.emit(node, "embedding_backward", [ones, number], _meta([bags, 1], dtype),
                      rows=bags)
    return _per_count(low, node, sums, counts, out)


def _equal_starts(offsets, count, include_last):
    """The bag size when the constant offsets are 0, L, 2L, ... (bags of
    one size), else None."""
    if not isinstance(offsets, hf.Const):
        return None
    starts = offsets.t.tolist()
    if include_last:
        if not starts or starts[-1] != count:
            return None
        starts = starts[:-1]
    size = starts[1] - starts[0] if len(starts) > 1 else count
    if not starts or size <= 0 or starts != list(range(0, count, size)):
        return None
    return size


def embedding_bag(low, node, weight, indices, offsets, scale_grad_by_freq=False, mode=0,
                  sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=-1):
    """aten._embedding_bag: results 1-3 (offset2bag, bag sizes, max
    indices) feed only torch's backward."""
    from .aten import Multi, Unusable
    weight, ids = low.tensor(node, weight), low.tensor(node, indices)
    if scale_grad_by_freq:
        low.fail(node, "embedding_bag with scale_grad_by_freq has no graph form")
    mode = int(mode)
    padding_idx = -1 if padding_idx is None else int(padding_idx)
    if len(ids.shape) != 1:
        low.fail(node, "embedding_bag's ids must be 1-d here, got %s" % list(ids.shape))
    _table_ids(low, weight, ids)
    out = node.meta["val"][0]
    size = _equal_starts(offsets, ids.shape[0], include_last_offset)
    if size is not None:
        y = _equal_bags(low, node, weight, ids, out.shape[0], size, mode, per_sample_weights,
                        padding_idx, out)
    else:
        y = _ragged_bags(low, node, weight, ids, offsets, include_last_offset, mode,
                         per_sample_weights, padding_idx, out)
    why = "value no graph op produces: embedding_bag's result %d, read only by its backward"
    return Multi([y] + [Unusable(why % i) for i in (1, 2, 3)])


def rules(aten):
    return {aten._embedding_bag.default: embedding_bag,
            aten._embedding_bag_forward_only.default: embedding_bag}
