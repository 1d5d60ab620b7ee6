"""Hand-written attention as the graph's one attention op.

Code that writes attention itself (nanoGPT without flash, transformers'
`attn_implementation="eager"`, research models):

    scores = q @ k.transpose(-2, -1) * scale   (+ mask)
    out = softmax(scores, dim=-1) @ v

reaches the graph, through ATen capture, as matmul / mul / add / softmax /
matmul, with [B, H, T, S] scores (and their scaled, masked and softmaxed
copies) held as tensors: at 12 heads of 2,048 tokens, 192 MiB each in
float32. `scaled_dot_product_attention` (docs/graph-format.md) computes the
same function a block of query rows at a time, so no such tensor exists
(and its gradient rule recomputes the blocks, docs/training.md). This pass
rewrites the first form into the second on the exported nodes, where the
values in between are read by nothing else (attention weights returned as
an output, dropout on the probabilities and softmax over another dim keep
the ops as they are). The two forms agree within float rounding, not bit
for bit; a query whose every key is masked gives zeros (as torch's sdpa)
where the hand-written softmax gives NaN.

The ATen capture writes a batched matmul of 4-d operands as a [B * H, ...]
`matmul` between `reshape`s, so both spellings are matched: 4-d matmuls,
and 3-d ones whose operands are reshapes of the 4-d q, k (transposed) and
v."""

import math


class _Graph:
    """The exported nodes with their producers, readers and value shapes."""

    def __init__(self, nodes, meta, consts, outputs):
        self.nodes = nodes
        self.meta = meta      # name -> (shape, graph dtype)
        self.consts = consts  # name -> number: 0-d constant buffers (fills)
        self.producer = {}
        self.readers = {}
        for i, n in enumerate(nodes):
            for name in n.get("names", [n.get("name")]):
                self.producer[name] = i
            for x in n["inputs"]:
                self.readers[x] = self.readers.get(x, 0) + 1
        for x in outputs:  # an output is read by the caller
            self.readers[x] = self.readers.get(x, 0) + 1

    def node(self, name):
        i = self.producer.get(name)
        return None if i is None else self.nodes[i]

    def shape(self, name):
        return list(self.meta[name][0]) if name in self.meta else None

    def dtype(self, name):
        return self.meta[name][1] if name in self.meta else None

    def single_use(self, name):
        return self.readers.get(name, 0) == 1


def _swaps_last_two(n, rank):
    """Whether node `n` transposes the last two of `rank` dims."""
    if n is None:
        return False
    if n["op"] == "permute":
        return list(n.get("dims", [])) == list(range(rank - 2)) + [rank - 1, rank - 2]
    if n["op"] == "transpose":
        return {d % rank for d in (n.get("dim0", 0), n.get("dim1", 0))} == {rank - 2, rank - 1}
    return False


def _as_4d(g, name, heads_shape):
    """The 4-d [B, H, X, Y] value that `name` is (itself, or the input of a
    reshape that folds its B and H into one dim), or None."""
    shape = g.shape(name)
    if shape is None:
        return None
    if len(shape) == 4:
        return name if heads_shape is None or shape[:2] == heads_shape else None
    n = g.node(name)
    if len(shape) != 3 or n is None or n["op"] != "reshape":
        return None
    src = n["inputs"][0]
    s4 = g.shape(src)
    if s4 is None or len(s4) != 4 or s4[0] * s4[1] != shape[0] or s4[2:] != shape[1:]:
        return None
    if heads_shape is not None and s4[:2] != heads_shape:
        return None
    return src


def _key_4d(g, name):
    """k as [B, H, S, E] from the matmul's second operand k^T: a transpose of
    the 4-d k, or a reshape of one to [B * H, E, S], or a transpose of a
    reshape of k to [B * H, S, E]."""
    shape = g.shape(name)
    n = g.node(name)
    if shape is None or n is None:
        return None
    if len(shape) == 4:
        return n["inputs"][0] if _swaps_last_two(n, 4) else None
    if n["op"] == "reshape":  # [B * H, E, S] from [B, H, E, S] = k^T
        kt4 = _as_4d(g, name, None)
        kt = g.node(kt4) if kt4 else None
        return kt["inputs"][0] if _swaps_last_two(kt, 4) else None
    if _swaps_last_two(n, 3):  # ([B * H, S, E] from k)^T
        return _as_4d(g, n["inputs"][0], None)
    return None


def _broadcasts(shape, to):
    """Whether `shape` (at most as many dims) broadcasts to `to`."""
    return len(shape) <= len(to) and all(d in (1, t) for d, t in zip(shape[::-1], to[::-1]))


def _from_matmul(g, name, depth=16):
    """Whether value `name` is computed from a matmul through single-use
    masks, scalings and reshapes: which operand of an added mask is the
    scores."""
    n = g.node(name)
    if depth == 0 or n is None or not g.single_use(name):
        return False
    if n["op"] == "matmul":
        return True
    if n["op"] not in ("add", "where", "mul", "div", "reshape"):
        return False
    operands = [x for x in n["inputs"] if x not in g.consts]
    if n["op"] == "where":
        operands = operands[1:]  # not the condition
    return any(_from_matmul(g, x, depth - 1) for x in operands)


def _mask_term(g, n, shape, dtype):
    """(mask, the scores before it) when node `n` masks the scores `shape`:
    add(scores, mask) with a float mask of the scores' dtype and at most 4
    dims broadcasting to them (a causal buffer, BERT's extended mask), or
    where(cond, -inf, scores) or where(cond, scores, -inf) (masked_fill with
    -inf, torch.where: the mask is ("where", cond, the fill's operand),
    made additive by the rewrite). None otherwise."""
    if n["op"] == "add" and len(n["inputs"]) == 2:
        for i in (0, 1):
            chain, other = n["inputs"][i], n["inputs"][1 - i]
            other_shape = g.shape(other)
            if (g.shape(chain) == shape and other_shape and other not in g.consts
                    and g.dtype(other) == dtype and _broadcasts(other_shape, shape)
                    and _from_matmul(g, chain)):
                return other, chain
    if n["op"] == "where" and len(n["inputs"]) == 3:
        cond = n["inputs"][0]
        cond_shape = g.shape(cond)
        for fill in (1, 2):
            chain = n["inputs"][3 - fill]
            if (g.consts.get(n["inputs"][fill]) == -math.inf and g.shape(chain) == shape
                    and cond_shape and _broadcasts(cond_shape, shape)):
                return ("where", cond, fill), chain
    return None


def _match(g, softmax):
    """The attention ending at softmax node `softmax`: a dict of what the
    rewrite needs, or None."""
    scores = softmax["inputs"][0]
    shape = g.shape(scores)
    if shape is None or len(shape) != 4 or softmax.get("dim") not in (3, -1):
        return None
    dtype = g.dtype(scores)
    removed = [softmax]
    # Backwards from softmax: the masks (added, or -inf filled in where a
    # condition holds: masked_fill), then constant scalings and the reshape
    # from [B * H, T, S]. A mask added before a scaling would be scaled too:
    # not the op's arithmetic.
    folded = [shape[0] * shape[1]] + shape[2:]
    masks, scale, scaled, x = [], 1.0, False, scores
    while True:
        n = g.node(x)
        if n is None or not g.single_use(x):
            return None
        # a mask of the 4-d scores, or of the 3-d [B * H, T, S] ones (BLOOM's
        # ALiBi bias [B * H, 1, S])
        level = 4 if g.shape(x) == shape else 3 if g.shape(x) == folded else None
        term = None if scaled or level is None else \
            _mask_term(g, n, shape if level == 4 else folded, dtype)
        if term is not None:
            masks.append((term[0], level))
            x = term[1]
        elif n["op"] in ("mul", "div") and len(n["inputs"]) == 2:
            const = [i for i in (0, 1) if n["inputs"][i] in g.consts]
            if len(const) != 1 or (n["op"] == "div" and const[0] != 1):
                return None
            c = g.consts[n["inputs"][const[0]]]
            if not math.isfinite(c) or c == 0:
                return None
            scale = scale * c if n["op"] == "mul" else scale / c
            scaled = True
            x = n["inputs"][1 - const[0]]
        elif n["op"] == "reshape" and g.shape(x) == shape:  # from [B * H, T, S]
            src = g.shape(n["inputs"][0])
            if src != [shape[0] * shape[1]] + shape[2:]:
                return None
            x = n["inputs"][0]
        elif n["op"] == "matmul" and len(n["inputs"]) == 2:
            break
        else:
            return None
        removed.append(n)
    first = n
    removed.append(first)
    q = _as_4d(g, first["inputs"][0], shape[:2])
    k = _key_4d(g, first["inputs"][1])
    if q is None or k is None:
        return None
    q_shape, k_shape = g.shape(q), g.shape(k)
    if q_shape[:3] != shape[:3] or k_shape[:3] != shape[:2] + [shape[3]] or \
            k_shape[3] != q_shape[3]:
        return None
    # Forwards: softmax read once, by the second matmul (after a reshape to
    # [B * H, T, S] when that one is 3-d).
    p = softmax["name"]
    readers = [m for m in g.nodes if p in m["inputs"]]
    if len(readers) != 1 or not g.single_use(p):
        return None
    n = readers[0]
    if n["op"] == "reshape":
        removed.append(n)
        if g.shape(n["name"]) != [shape[0] * shape[1]] + shape[2:] or not g.single_use(n["name"]):
            return None
        p = n["name"]
        readers = [m for m in g.nodes if p in m["inputs"]]
        if len(readers) != 1:
            return None
        n = readers[0]
    if n["op"] != "matmul" or n["inputs"][0] != p:
        return None
    second = n
    removed.append(second)
    v = _as_4d(g, second["inputs"][1], shape[:2])
    if v is None or g.shape(v)[2] != shape[3]:
        return None
    if {g.dtype(q), g.dtype(k), g.dtype(v)} != {dtype}:
        return None
    out = second["name"]
    out_shape = g.shape(out)
    # The result back to [B, H, T, Ev]: that reshape is the attention's end.
    last = second
    if len(out_shape) == 3 and g.single_use(out):
        back = [m for m in g.nodes if out in m["inputs"]]
        if len(back) == 1 and back[0]["op"] == "reshape" and \
                g.shape(back[0]["name"]) == shape[:3] + [out_shape[2]]:
            last = back[0]
            removed.append(last)
    return {"q": q, "k": k, "v": v, "masks": masks, "scale": scale, "scores": shape,
            "removed": removed, "last": last, "dtype": dtype}


def _combined_mask(found, g, meta, made, fresh, const, mask_form):
    """The op's one 4-d additive mask from the matched terms (appending the
    nodes that make it to `made`), or None when there is none; and whether
    the op is causal. A constant term that allows every key is dropped, the
    causal one becomes the op's `causal` flag (the kernel then skips the
    keys after each query instead of adding -inf to their scores)."""
    dtype, total, causal = found["dtype"], None, False
    heads, (T, S) = found["scores"][:2], found["scores"][2:]
    for term, level in found["masks"]:
        form = mask_form(term, T, S)
        if form is False or (form is True and T == S):
            causal = causal or form
            continue
        if isinstance(term, tuple):  # where(cond, -inf, 0), or (cond, 0, -inf)
            _, cond, fill = term
            name = fresh(cond + ".additive")
            values = [const(-math.inf, dtype), const(0.0, dtype)]
            made.append({"name": name, "op": "where",
                         "inputs": [cond] + (values if fill == 1 else values[::-1])})
            meta[name] = (g.shape(cond), dtype)
            term = name
        shape = list(meta[term][0])
        if level == 3:  # [B * H or 1, a, S] -> [B, H, a, S] or [1, 1, a, S]
            shape = [1] * (3 - len(shape)) + shape
            shape4 = (heads if shape[0] != 1 else [1, 1]) + shape[1:]
        elif len(shape) < 4:  # the op's mask is 4-d
            shape4 = [1] * (4 - len(shape)) + shape
        else:
            shape4 = shape
        if shape4 != list(meta[term][0]):
            name = fresh(term + ".4d")
            made.append({"name": name, "op": "reshape", "inputs": [term], "shape": shape4})
            meta[name] = (shape4, dtype)
            term = name
        if total is None:
            total = term
            continue
        a, b = meta[total][0], meta[term][0]
        name = fresh(total + ".masks")
        made.append({"name": name, "op": "add", "inputs": [total, term]})
        meta[name] = ([max(x, y) for x, y in zip(a, b)], dtype)
        total = name
    return total, causal


def fuse_attention(nodes, meta, consts, outputs, fresh, const, mask_form=None):
    """`nodes` with each hand-written attention as one
    scaled_dot_product_attention node (module docstring); returns the new
    node list and how many it fused. `fresh(base)` gives an unused name,
    `const(value, dtype)` the name of a 0-d constant of that graph dtype,
    `mask_form(term, T, S)` what a mask term holds when it is a constant
    known at export (False: every key allowed, True: the causal mask; None:
    anything else, or not known). A term is a value's name (an additive
    mask) or ("where", cond, i) (-inf filled by where, i its operand)."""
    mask_form = mask_form or (lambda term, T, S: None)
    fused = 0
    while True:
        g = _Graph(nodes, meta, consts, outputs)
        found = None
        for n in nodes:
            if n["op"] == "softmax" and "name" in n:
                found = _match(g, n)
                if found:
                    break
        if not found:
            return nodes, fused
        fused += 1
        last = found["last"]
        end = last["name"]
        q_shape, v_shape = g.shape(found["q"]), g.shape(found["v"])
        out4 = q_shape[:3] + [v_shape[3]]
        made = []
        inputs = [found["q"], found["k"], found["v"]]
        mask, causal = _combined_mask(found, g, meta, made, fresh, const, mask_form)
        if mask is not None:
            inputs.append(mask)
        attention = end if g.shape(end) == out4 else fresh(end + ".attention")
        made.append({"name": attention, "op": "scaled_dot_product_attention",
                     "inputs": inputs, "causal": causal, "scale": found["scale"]})
        meta[attention] = (out4, found["dtype"])
        if attention != end:  # the caller reads the [B * H, T, Ev] matmul
            made.append({"name": end, "op": "reshape", "inputs": [attention],
                         "shape": g.shape(end)})
        gone = {id(n) for n in found["removed"]}
        at = next(i for i, n in enumerate(nodes) if n is last)
        nodes = [n for n in nodes[:at] if id(n) not in gone] + made + \
            [n for n in nodes[at + 1:] if id(n) not in gone]
