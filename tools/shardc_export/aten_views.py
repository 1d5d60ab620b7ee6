"""ATen capture: views and copies that torchvision's classifiers need beyond
aten.py's table, lowered onto the op table's `as_strided` (the view family:
y[i] = x_flat[offset + sum_k i_k stride[k]], strides of any sign).

- aten.index.Tensor with one constant index tensor (Swin's and MaxViT's
  relative position bias: `table[relative_position_index]`, a parameter read
  at an index built in __init__): the index is factored into an affine
  multi-index (sizes and strides, found from its values) and read as one
  strided copy; an index that is not affine is refused with its shape.
- aten.as_strided on a contiguous tensor: the same op with torch's strides.
- aten.index_select with a constant index: torch.roll decomposes into one
  (index (start + i) mod n): a rotation is two slices and a cat; an affine
  index is as_strided as above.
- aten.repeat: a cat of copies along each repeated dim.
- aten.flip: as_strided with the flipped dims' strides negated.
- aten.unfold (Tensor.unfold's sliding windows): as_strided.
- aten.upsample_nearest{1,2,3}d: a constant index per spatial dim, found by
  running the op on coordinates; the linear, bilinear and trilinear ones a
  blend of two such reads per dim.
- aten.constant_pad_nd (F.pad, Swin's padding to whole windows): zero pads
  are the tensor itself, others cat a fill buffer on each side; negative
  pads crop with a slice.
"""

import math

import torch

from .graph_emitter import G
from . import aten_consts as hf


def row_major_strides(shape):
    out, step = [], 1
    for n in reversed(list(shape)):
        out.insert(0, step)
        step *= int(n)
    return out


def affine_factors(flat):
    """flat (1-d int64 tensor, length L >= 1) as offset + sum_k i_k strides[k]
    over sizes (row-major, product L); None if it is not affine."""
    sizes, strides = [], []
    seq = flat
    while seq.numel() > 1:
        d = int(seq[1] - seq[0])
        run = 2
        while run < seq.numel() and int(seq[run] - seq[run - 1]) == d:
            run += 1
        for m in range(run, 1, -1):  # the longest run that tiles seq
            if seq.numel() % m:
                continue
            blocks = seq.reshape(-1, m)
            if bool((blocks[:, 1:] - blocks[:, :-1] == d).all()):
                break
        else:
            return None
        sizes.insert(0, m)
        strides.insert(0, d)
        seq = seq[::m]
    return sizes, strides, int(seq[0]) if seq.numel() else 0


def as_strided_node(self, node, x, size, stride, offset, val):
    size, stride = [int(v) for v in size], [int(v) for v in stride]
    numel = 1
    for n in x.shape:
        numel *= int(n)
    if int(offset) == 0 and stride == row_major_strides(size) and numel == math.prod(size):
        # every element in row-major order (an index of all of a flattened
        # tensor): a reshape, which --data-parallel can split, where an
        # as_strided read may cross batch rows
        if size == list(x.shape):
            return x
        return self.emit(node, "reshape", [x], val, shape=size)
    return self.emit(node, "as_strided", [x], val, size=size, stride=stride,
                     offset=int(offset))


def index_tensor(self, node, x, indices):
    """x[..., idx, ...] with constant integer index tensors (one, or several on
    adjacent dims), or a computed int64 index on dim 0."""
    x = self.tensor(node, x)
    picked = [(d, i) for d, i in enumerate(indices) if i is not None]
    if len(picked) == 1 and picked[0][0] == 0 and isinstance(picked[0][1], G):
        return rows_at(self, node, x, picked[0][1])
    if not picked or not all(isinstance(i, hf.Const) for _, i in picked):
        self.fail(node, "indexing with an index computed from the input or a parameter: "
                  "only constant index tensors (built in __init__ or from constants, e.g. "
                  "a relative position index) have a graph op")
    for _, i in picked:
        if i.t.dtype == torch.bool or i.t.is_floating_point():
            self.fail(node, "indexing with a %s mask has no graph op" % i.t.dtype)
    dims = [d for d, _ in picked]
    for d, i in picked:
        n = x.shape[d]
        if i.t.numel() and (bool((i.t < -n).any()) or bool((i.t >= n).any())):
            self.fail(node, "its constant index is out of range for dim %d of size %d"
                      % (d, n))
    if len(picked) > 1:
        if dims != list(range(dims[0], dims[0] + len(dims))):
            self.fail(node, "indexing with several constant index tensors on dims %s that "
                      "are not adjacent has no graph op" % dims)
        x, idx = merged_index(self, node, x, picked)
        d = dims[0]
    else:
        d, idx = picked[0][0], picked[0][1].t.to(torch.int64)
    n = x.shape[d]
    idx = torch.where(idx < 0, idx + n, idx)
    return self.reshape(node, rows_at_index(self, node, x, d, idx), self.out_shape(node))


def rows_at_index(self, node, x, d, idx):
    """x read on dim d at the constant index idx (int64, in range): shape
    x.shape[:d] + idx.shape + x.shape[d + 1:]. An affine index is one
    strided read; any other is constant data read by `embedding`."""
    flat = idx.reshape(-1)
    if flat.numel() == 0:
        self.fail(node, "an empty index has no graph op")
    factors = affine_factors(flat)
    if factors is None:
        return rows_at_constant(self, node, x, d, idx)
    sizes, strides, offset = factors
    xs = row_major_strides(x.shape)
    size = x.shape[:d] + sizes + x.shape[d + 1:]
    stride = xs[:d] + [s * xs[d] for s in strides] + xs[d + 1:]
    val = torch.empty(size, dtype=x.val.dtype, device="meta")
    g = as_strided_node(self, node, x, size, stride, offset * xs[d], val)
    out = list(x.shape[:d]) + list(idx.shape) + list(x.shape[d + 1:])
    if size == out:
        return g
    return self.emit(node, "reshape", [g], torch.empty(out, dtype=x.val.dtype, device="meta"),
                     shape=out)


def merged_index(self, node, x, picked):
    """x[..., i0, i1, ...] with constant indices on adjacent dims (nn.Unfold's
    patch gather, CrossViT): the dims seen as one of their product's size,
    read at the broadcast indices combined row-major. torch puts the
    result's dims where the first indexed dim was, as a single index does."""
    dims = [d for d, _ in picked]
    try:
        idxs = torch.broadcast_tensors(*[i.t.to(torch.int64) for _, i in picked])
    except RuntimeError:
        self.fail(node, "its constant index tensors of shapes %s do not broadcast"
                  % [list(i.t.shape) for _, i in picked])
    merged = torch.zeros_like(idxs[0])
    size = 1
    for d, t in zip(dims, idxs):
        n = x.shape[d]
        merged = merged * n + torch.where(t < 0, t + n, t)
        size *= n
    shape = list(x.shape[:dims[0]]) + [size] + list(x.shape[dims[-1] + 1:])
    if shape != list(x.shape):
        x = self.emit(node, "reshape", [x], torch.empty(shape, dtype=x.val.dtype,
                                                         device="meta"), shape=shape)
    return x, merged


def rows_at_constant(self, node, x, d, idx):
    """x indexed on dim d by a constant index that is not affine (BEiT's
    relative position index, whose class-token entries break the pattern;
    LeViT's and EfficientFormer's attention bias offsets |dy| * w + |dx|):
    the index becomes constant data (an int64 buffer) and dim d's rows are
    read by the graph's `embedding`, dim d first and back."""
    from .const_data import index_buffer
    ids = index_buffer(self, idx)
    if ids is None:
        self.fail(node, "its constant index (shape %s) is not an affine function of its "
                  "position and too large for constant data" % list(idx.shape))
    rank, m = len(x.shape), idx.dim()
    others = [k for k in range(rank) if k != d]
    if d:
        order = [d] + others
        x = self.emit(node, "permute", [x], torch.empty([x.shape[k] for k in order],
                                                        dtype=x.val.dtype, device="meta"),
                      dims=order)
    kept = list(x.val.shape[1:])  # the other dims, in order
    rest = 1
    for n in kept:
        rest *= n
    table = x if rank == 2 else self.emit(
        node, "reshape", [x], torch.empty([x.val.shape[0], rest], dtype=x.val.dtype,
                                          device="meta"), shape=[x.val.shape[0], rest])
    flat_ids = ids if m == 1 else self.emit(
        node, "reshape", [ids], torch.empty([idx.numel()], dtype=torch.int64, device="meta"),
        shape=[idx.numel()])
    rows = self.emit(node, "embedding", [table, flat_ids],
                     torch.empty([idx.numel(), rest], dtype=x.val.dtype, device="meta"))
    # rows are idx's positions by the other dims in order: torch puts idx's
    # dims where dim d was
    shape = list(idx.shape) + kept
    if shape != [idx.numel(), rest]:
        rows = self.emit(node, "reshape", [rows], torch.empty(shape, dtype=x.val.dtype,
                                                              device="meta"), shape=shape)
    if d:
        perm = list(range(m, m + d)) + list(range(m)) + list(range(m + d, m + len(others)))
        out = [shape[k] for k in perm]
        rows = self.emit(node, "permute", [rows], torch.empty(out, dtype=x.val.dtype,
                                                              device="meta"), dims=perm)
    return rows


def rows_at(self, node, x, ids):
    """x[ids] with a computed int64 index on dim 0 (a mixture of experts'
    expert weights picked per token): the rows of x seen as [rows, rest] by
    the graph's `embedding`, then the result's shape."""
    if ids.val.dtype == torch.bool or ids.val.dtype.is_floating_point:
        self.fail(node, "indexing with a computed %s index: only integer indices on dim 0 "
                  "have a graph op" % ids.val.dtype)
    rest = 1
    for n in x.shape[1:]:
        rest *= n
    def view(v, shape):
        if list(v.shape) == list(shape):
            return v
        return self.emit(node, "reshape", [v], torch.empty(shape, dtype=v.val.dtype,
                                                              device="meta"), shape=list(shape))
    table = view(x, [x.shape[0], rest])
    flat_ids = view(ids, [ids.val.numel()])
    rows = self.emit(node, "embedding", [table, flat_ids],
                     torch.empty([ids.val.numel(), rest], dtype=x.val.dtype, device="meta"))
    return self.reshape(node, rows, self.out_shape(node))


def as_strided_any(self, node, x, size, stride, storage_offset=0):
    """aten.as_strided on a tensor torch also holds contiguously (offset 0):
    the graph buffer has torch's storage layout, so torch's strides apply."""
    from .aten import as_strided
    xv = self.vals.get(node.args[0]) if isinstance(node.args[0], torch.fx.Node) else None
    meta = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    try:
        return as_strided(self, node, x, size, stride, storage_offset)
    except Exception:
        if not isinstance(xv, G) or meta is None or not meta.is_contiguous() or \
                meta.storage_offset() != 0:
            raise
    return as_strided_node(self, node, self.tensor(node, x), size, stride,
                           storage_offset or 0, node.meta["val"])


def slice_node(self, node, x, dim, start, end):
    if start == 0 and end == x.shape[dim]:
        return x
    shape = list(x.shape)
    shape[dim] = end - start
    return self.emit(node, "slice", [x], torch.empty(shape, dtype=x.val.dtype, device="meta"),
                     dim=dim, start=start, end=end, step=1)


def cat_node(self, node, parts, dim):
    parts = [p for p in parts if p.shape[dim] > 0]
    if len(parts) == 1:
        return parts[0]
    shape = list(parts[0].shape)
    shape[dim] = sum(p.shape[dim] for p in parts)
    return self.emit(node, "cat", parts, torch.empty(shape, dtype=parts[0].val.dtype,
                                                     device="meta"), dim=dim)


def index_select(self, node, x, dim, index):
    """x.index_select(dim, constant index): a rotation (torch.roll) is two
    slices and a cat, an affine index one as_strided; a computed index on
    dim 0 reads the rows by `embedding`."""
    x = self.tensor(node, x)
    dim %= len(x.shape)
    if isinstance(index, G) and dim == 0:
        # a computed index on dim 0 (M2M100's sinusoidal table read at position
        # ids counted from the token ids): the rows, as x[index]
        return rows_at(self, node, x, index)
    if not isinstance(index, hf.Const):
        self.fail(node, "index_select with an index computed from the input or a "
                  "parameter has no graph op (only a constant index, or a computed one "
                  "on dim 0)")
    idx = index.t.reshape(-1).to(torch.int64)
    n = x.shape[dim]
    if idx.numel() == n and n > 0:
        start = int(idx[0]) % n
        if bool((idx == (torch.arange(n) + start) % n).all()):
            if start == 0:
                return x
            return cat_node(self, node, [slice_node(self, node, x, dim, start, n),
                                         slice_node(self, node, x, dim, 0, start)], dim)
    indices = [None] * dim + [index]
    return index_tensor(self, node, x, indices)


def constant_pad_nd(self, node, x, pad, value=0):
    x = self.tensor(node, x)
    pad = [int(p) for p in pad]
    if len(pad) % 2 or len(pad) // 2 > len(x.shape):
        self.fail(node, "pad %s does not pair up with the tensor's %d dims"
                  % (pad, len(x.shape)))
    for k in range(len(pad) // 2):
        dim = len(x.shape) - 1 - k
        left, right = pad[2 * k], pad[2 * k + 1]
        if left < 0 or right < 0:  # a negative pad crops
            x = slice_node(self, node, x, dim, max(0, -left), x.shape[dim] - max(0, -right))
            left, right = max(0, left), max(0, right)
        parts = []
        for width in (left, None, right):
            if width is None:
                parts.append(x)
            elif width > 0:
                shape = list(x.shape)
                shape[dim] = width
                parts.append(hf.fill_buffer(self, float(value), shape, x.val.dtype))
        x = cat_node(self, node, parts, dim)
    if list(x.shape) != self.out_shape(node):
        self.fail(node, "padding gave %s, torch %s" % (list(x.shape), self.out_shape(node)))
    return x


def full_like(self, node, x, value, **kw):
    """A tensor of x's shape filled with value (swin_v2 zeroes the k third of
    its qkv bias: full_like + slice_scatter): a fill buffer."""
    val = node.meta["val"]
    if not val.is_floating_point():
        self.fail(node, "full_like of dtype %s has no graph op" % val.dtype)
    return hf.fill_buffer(self, float(value), list(val.shape), val.dtype)


def slice_scatter(self, node, base, src, dim=0, start=None, end=None, step=1):
    """base with base[start:end] along dim replaced by src: a cat of base's
    slices around src (step 1). An expanded src (DeepSeek-V3 copies its one
    rotary key head into every head's slice of the keys) is made whole
    first: the result holds its copies anyway."""
    from .aten import Expanded
    if isinstance(src, Expanded):
        src = hf.materialize_expand(self, node, src)
    base, src = self.tensor(node, base), self.tensor(node, src)
    dim %= len(base.shape)
    n = base.shape[dim]
    start = 0 if start is None else (start + n if start < 0 else start)
    end = n if end is None else (end + n if end < 0 else end)
    start, end = max(0, min(start, n)), max(0, min(end, n))
    if step != 1:
        self.fail(node, "slice_scatter with step %d has no graph op" % step)
    return cat_node(self, node, [slice_node(self, node, base, dim, 0, start), src,
                                 slice_node(self, node, base, dim, end, n)], dim)


def repeat(self, node, x, sizes):
    """x.repeat(sizes): leading new dims as 1s, then each dim repeated r
    times is a cat of r copies along it (XCiT's positional encoding, built
    once and repeated over the batch)."""
    x = self.tensor(node, x)
    sizes = [int(r) for r in sizes]
    extra = len(sizes) - len(x.shape)
    if extra < 0:
        self.fail(node, "repeat with %d sizes for a %d-d tensor" % (len(sizes), len(x.shape)))
    if extra:
        shape = [1] * extra + list(x.shape)
        x = self.emit(node, "reshape", [x], torch.empty(shape, dtype=x.val.dtype,
                                                         device="meta"), shape=shape)
    for dim, r in enumerate(sizes):
        if r < 1:
            self.fail(node, "repeat %d times along dim %d (an empty result) has no graph op"
                      % (r, dim))
        if r > 1:
            x = cat_node(self, node, [x] * r, dim)
    return self.reshape(node, x, self.out_shape(node))


def flip(self, node, x, dims):
    """torch.flip (a bidirectional LSTM's reversed sequence): one strided
    read with the flipped dims' strides negated, from their last element."""
    x = self.tensor(node, x)
    rank = len(x.shape)
    flipped = {int(d) % rank for d in dims} if rank else set()
    strides = row_major_strides(x.shape)
    offset = sum((x.shape[d] - 1) * strides[d] for d in flipped if x.shape[d] > 0)
    stride = [-s if d in flipped else s for d, s in enumerate(strides)]
    if not flipped or all(x.shape[d] <= 1 for d in flipped):
        return x
    return as_strided_node(self, node, x, x.shape, stride, offset, node.meta["val"])


def upsample_nearest(self, node, x, *args):
    """Nearest upsampling (F.interpolate(mode="nearest"), GhostNetV2's
    attention map): per spatial dim, the source index of each output
    position, found by running the same ATen op on a map of that dim's
    coordinates (so torch's rounding is reproduced exactly), then read as a
    constant index (an integer scale is a stride-0 strided read)."""
    x = self.tensor(node, x)
    rank = len(x.shape)
    spatial = list(range(2, rank))
    for d in spatial:
        shape = [1, 1] + list(x.shape[2:])
        view = [1] * rank
        view[d] = x.shape[d]
        coords = torch.arange(x.shape[d], dtype=torch.float64).reshape(view).expand(shape)
        src = node.target(coords.contiguous(), *args)
        pick = [0] * rank
        pick[d] = slice(None)
        x = rows_at_index(self, node, x, d, src[tuple(pick)].to(torch.int64))
    return self.reshape(node, x, self.out_shape(node))


def unfold_windows(self, node, x, dim, size, step):
    """Tensor.unfold(dim, size, step) (HaloNet's key/value windows): a view
    with dim's windows as a new last dim, one strided read."""
    x = self.tensor(node, x)
    rank = len(x.shape)
    dim = int(dim) % rank if rank else 0
    size, step = int(size), int(step)
    strides = row_major_strides(x.shape)
    shape = list(x.shape)
    shape[dim] = (x.shape[dim] - size) // step + 1
    stride = list(strides)
    stride[dim] = strides[dim] * step
    return as_strided_node(self, node, x, shape + [size], stride + [strides[dim]], 0,
                           node.meta["val"])


def upsample_linear(self, node, x, *args):
    """Linear, bilinear and trilinear upsampling (EfficientFormerV2's
    attention downsampling): per spatial dim, each output position's source
    position p, found by running the same ATen op on that dim's coordinates
    (torch's align_corners and scale rules exactly), is a blend of rows
    floor(p) and the next (the last row at the edge), with weights 1 - f and
    f (f = p - floor(p)) as constant data broadcast along the dim: two
    constant-index reads, two multiplies and an add."""
    from .const_data import data_buffer
    x = self.tensor(node, x)
    rank = len(x.shape)
    for d in range(2, rank):
        n = x.shape[d]
        view = [1] * rank
        view[d] = n
        coords = torch.arange(n, dtype=torch.float64).reshape(view).expand(
            [1, 1] + list(x.shape[2:]))
        pick = [0] * rank
        pick[d] = slice(None)
        pos = node.target(coords.contiguous(), *args)[tuple(pick)]
        lo = torch.floor(pos).clamp(0, n - 1)
        frac = (pos - lo).clamp(0, 1)
        hi = torch.clamp(lo + 1, max=n - 1)
        lo, hi = lo.to(torch.int64), hi.to(torch.int64)
        a = rows_at_index(self, node, x, d, lo)
        b = rows_at_index(self, node, x, d, hi)
        wshape = [pos.numel()] + [1] * (rank - 1 - d)
        w1 = data_buffer(self, frac.reshape(wshape), x.val.dtype)
        w0 = data_buffer(self, (1 - frac).reshape(wshape), x.val.dtype)
        if w0 is None or w1 is None:
            self.fail(node, "an upsampled dim of %d positions is too large for constant "
                      "data" % pos.numel())
        out = torch.empty(a.val.shape, dtype=x.val.dtype, device="meta")
        x = self.emit(node, "add", [self.emit(node, "mul", [a, w0], out),
                                    self.emit(node, "mul", [b, w1], out)], out)
    return self.reshape(node, x, self.out_shape(node))


def col2im(self, node, x, output_size, kernel_size, dilation, padding, stride):
    """F.fold (VOLO's outlook attention): column (c, ki, kj) of each block
    adds into output pixel (oh * s - p + ki * d, ow * s - p + kj * d) of
    channel c. That is a transposed convolution of the columns seen as
    [B, C * kh * kw, OH, OW] with one group per channel and a constant one-hot
    weight ([C * kh * kw, 1, kh, kw], 1 at tap (ki, kj) of column (c, ki,
    kj)); output_padding makes up the rows the last block does not reach."""
    from .const_data import data_buffer
    x = self.tensor(node, x)
    batched = len(x.shape) == 3
    from .aten import spatial_list
    k, dil, pad, st = (spatial_list(v, 2) for v in (kernel_size, dilation, padding, stride))
    size = spatial_list(output_size, 2)
    taps = k[0] * k[1]
    rows = x.shape[-2]
    if rows % taps:
        self.fail(node, "fold: %d columns rows are not a multiple of the kernel's %d taps"
                  % (rows, taps))
    c = rows // taps
    blocks = [(size[i] + 2 * pad[i] - dil[i] * (k[i] - 1) - 1) // st[i] + 1 for i in (0, 1)]
    if blocks[0] * blocks[1] != x.shape[-1]:
        self.fail(node, "fold: %d blocks, the output size gives %d x %d"
                  % (x.shape[-1], blocks[0], blocks[1]))
    dtype = x.val.dtype
    n = x.shape[0] if batched else 1
    grid = [n, rows] + blocks
    x = self.emit(node, "reshape", [x], torch.empty(grid, dtype=dtype, device="meta"),
                  shape=grid)
    one_hot = torch.zeros(rows, 1, k[0], k[1], dtype=torch.float64)
    for r in range(rows):
        t = r % taps
        one_hot[r, 0, t // k[1], t % k[1]] = 1
    w = data_buffer(self, one_hot, dtype)
    if w is None:
        self.fail(node, "fold: its one-hot weight (%d elements) is too large for constant "
                  "data" % one_hot.numel())
    reach = [(blocks[i] - 1) * st[i] - 2 * pad[i] + dil[i] * (k[i] - 1) + 1 for i in (0, 1)]
    out = [n, c] + size
    y = self.emit(node, "conv", [x, w], torch.empty(out, dtype=dtype, device="meta"),
                  stride=st, padding=pad, dilation=dil, groups=c, transposed=1,
                  output_padding=[size[i] - reach[i] for i in (0, 1)])
    return self.reshape(node, y, self.out_shape(node))


GRID_SAMPLE_MODES = {0: "bilinear", 1: "nearest"}
GRID_SAMPLE_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}


def grid_sample(self, node, x, grid, interpolation_mode=0, padding_mode=0, align_corners=False):
    """F.grid_sample on 4-d tensors (aten.grid_sampler_2d; RAFT's
    correlation lookup at the flow's positions): the graph's grid_sample op,
    torch's interpolation and padding codes as names."""
    mode = GRID_SAMPLE_MODES.get(int(interpolation_mode))
    if mode is None:
        self.fail(node, "grid_sample's bicubic mode has no graph op (bilinear and nearest do)")
    padding = GRID_SAMPLE_PADDINGS.get(int(padding_mode))
    if padding is None:
        self.fail(node, "grid_sample padding mode %s is not zeros, border or reflection"
                  % padding_mode)
    x, grid = self.tensor(node, x), self.tensor(node, grid)
    if len(x.shape) != 4:
        self.fail(node, "grid_sample on a %d-d input (the graph op is the 4-d one)"
                  % len(x.shape))
    return self.emit(node, "grid_sample", [x, grid], node.meta["val"], mode=mode,
                     padding_mode=padding, align_corners=int(bool(align_corners)))


def rules(aten):
    return {aten.index.Tensor: index_tensor, aten.as_strided.default: as_strided_any,
            aten.grid_sampler_2d.default: grid_sample,
            aten.repeat.default: repeat, aten.flip.default: flip,
            aten.unfold.default: unfold_windows,
            **{getattr(aten, "upsample_nearest%dd" % k).vec: upsample_nearest
               for k in (1, 2, 3)},
            **{getattr(aten, "upsample_nearest%dd" % k).default: upsample_nearest
               for k in (1, 2, 3)},
            **{getattr(aten, name).vec: upsample_linear for name in (
                "upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d")},
            **{getattr(aten, name).default: upsample_linear for name in (
                "upsample_linear1d", "upsample_bilinear2d", "upsample_trilinear3d")},
            aten.index_select.default: index_select,
            aten.constant_pad_nd.default: constant_pad_nd,
            aten.full_like.default: full_like, aten.slice_scatter.default: slice_scatter,
            aten.col2im.default: col2im}
