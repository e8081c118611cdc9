/* Gradient functions of the array ops (build-impl.h), as TensorFlow's array_grad.py writes them,
 * except that GatherV2's gradient is dense (UnsortedSegmentSum into the params' shape) where
 * TensorFlow makes IndexedSlices: the trainer's optimizers take dense gradients.
 */
#include "runtime/build-impl.h"

#define G (c->g)

static tfs_out bin(tfs_grad_ctx *c, const char *op, tfs_out a, tfs_out b)
{
    return tfs_build_binary(G, op, a, b);
}

static tfs_out reshape_like(tfs_grad_ctx *c, tfs_out g, tfs_out like)
{
    return tfs_build_reshape(G, g, tfs_build_shape(G, like));
}

TFS_GRAD(tfs__grad_reshape)
{
    c->dx[0] = reshape_like(c, c->dy[0], c->x[0]);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_expand_dims)
{
    c->dx[0] = reshape_like(c, c->dy[0], c->x[0]);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_squeeze)
{
    c->dx[0] = reshape_like(c, c->dy[0], c->x[0]);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_transpose)
{
    tfs_out inv = tfs_build_unary(G, "InvertPermutation", c->x[1]);
    c->dx[0] = bin(c, "Transpose", c->dy[0], inv);
    return TFS_OK;
}

/* The size of x along a (possibly negative) axis tensor, as a 1-element int32 vector. */
static tfs_out dim_along(tfs_grad_ctx *c, tfs_out x, tfs_out axis)
{
    tfs_out shape = tfs_build_shape(G, x);
    tfs_out rank = tfs_build_unary(G, "Size", shape);
    if (tfs_out_ok(rank))
        tfs_graph_set_attr_type(G, rank.node, "out_type", TFS_DTYPE_INT32);
    tfs_out ax = bin(c, "FloorMod", tfs_build_cast(G, axis, TFS_DTYPE_INT32), rank);
    tfs_out in[3] = {shape, tfs_build_reshape(G, ax, tfs_build_ints(G, 1, (int64_t[]){1})),
                     tfs_build_scalar(G, TFS_DTYPE_INT32, 0)};
    return tfs_build_op(G, "GatherV2", NULL, 3, in);
}

/* ConcatV2(x_0..x_{n-1}, axis): SplitV of dy by each input's size along the axis. */
TFS_GRAD(tfs__grad_concat)
{
    int n = c->n_in - 1;
    tfs_out axis = c->x[n];
    tfs_out *sizes = tfs_calloc((size_t)n + 2, sizeof *sizes);
    if (!sizes)
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory building ConcatV2's gradient");
    for (int i = 0; i < n; i++)
        sizes[i] = dim_along(c, c->x[i], axis);
    sizes[n] = tfs_build_scalar(G, TFS_DTYPE_INT32, 0);
    tfs_out lens = tfs_build_op(G, "ConcatV2", NULL, n + 1, sizes);
    tfs_free(sizes);
    tfs_out in[3] = {c->dy[0], lens, tfs_build_cast(G, axis, TFS_DTYPE_INT32)};
    tfs_out split = tfs_build_op(G, "SplitV", NULL, 3, in);
    if (tfs_out_ok(split)) {
        tfs_graph_set_attr_int(G, split.node, "num_split", n);
        tfs_graph_set_attr_type(G, split.node, "T", tfs_dtype_base(tfs_build_dtype(G, c->dy[0])));
        tfs_graph_set_attr_type(G, split.node, "Tlen", TFS_DTYPE_INT32);
    }
    for (int i = 0; i < n; i++)
        c->dx[i] = tfs_out_at(split, i);
    return TFS_OK;
}

TFS_GRAD(tfs__grad_pack)
{
    tfs_out u = tfs_build_unary(G, "Unpack", c->dy[0]);
    if (tfs_out_ok(u)) {
        tfs_graph_set_attr_int(G, u.node, "num", c->n_in);
        const tfs_attr_value *axis = tfs_graph_node_attr(G, c->node, "axis");
        tfs_graph_set_attr_int(G, u.node, "axis", axis && axis->kind == TFS_ATTR_I ? axis->i : 0);
    }
    for (int i = 0; i < c->n_in; i++)
        c->dx[i] = tfs_out_at(u, i);
    return TFS_OK;
}

/* GatherV2(params, indices, axis 0): UnsortedSegmentSum(dy, indices, dim 0 of params). */
TFS_GRAD(tfs__grad_gather)
{
    const tfs_attr_value *bd = tfs_graph_node_attr(G, c->node, "batch_dims");
    if (bd && bd->kind == TFS_ATTR_I && bd->i != 0)
        return TFS_ERR(st, TFS_UNIMPLEMENTED, "GatherV2 gradient with batch_dims %lld",
                       (long long)bd->i);
    tfs_out zero = tfs_build_scalar(G, TFS_DTYPE_INT32, 0);
    tfs_out in_n[3] = {tfs_build_shape(G, c->x[0]), zero, zero};
    tfs_out n = tfs_build_op(G, "GatherV2", NULL, 3, in_n);
    tfs_out in[3] = {c->dy[0], c->x[1], n};
    tfs_out g = tfs_build_op(G, "UnsortedSegmentSum", NULL, 3, in);
    /* Only axis 0 is differentiated here: the gradient is checked against it at run time by
     * UnsortedSegmentSum's shape rule (dy's leading dims must equal the indices' shape). */
    c->dx[0] = g;
    return TFS_OK;
}

/* Tile: reshape dy to [m0, d0, m1, d1, ...] and sum over the multiples' axes. */
TFS_GRAD(tfs__grad_tile)
{
    tfs_out shape = tfs_build_shape(G, c->x[0]);
    tfs_out mult = tfs_build_cast(G, c->x[1], TFS_DTYPE_INT32);
    tfs_out pack_in[2] = {mult, shape};
    tfs_out stacked = tfs_build_op(G, "Pack", NULL, 2, pack_in);
    tfs_out perm = tfs_build_ints(G, 2, (int64_t[]){1, 0});
    tfs_out split = tfs_build_reshape(G, bin(c, "Transpose", stacked, perm),
                                      tfs_build_ints(G, 1, (int64_t[]){-1}));
    tfs_out size = tfs_build_unary(G, "Size", split);
    if (tfs_out_ok(size))
        tfs_graph_set_attr_type(G, size.node, "out_type", TFS_DTYPE_INT32);
    tfs_out range_in[3] = {tfs_build_scalar(G, TFS_DTYPE_INT32, 0), size,
                           tfs_build_scalar(G, TFS_DTYPE_INT32, 2)};
    tfs_out axes = tfs_build_op(G, "Range", NULL, 3, range_in);
    c->dx[0] = tfs_build_reduce(G, "Sum", tfs_build_reshape(G, c->dy[0], split), axes, false);
    return TFS_OK;
}

/* Pad: slice dy at the low paddings with x's shape. */
TFS_GRAD(tfs__grad_pad)
{
    tfs_out pads = tfs_build_cast(G, c->x[1], TFS_DTYPE_INT32);
    tfs_out in[3] = {pads, tfs_build_ints(G, 2, (int64_t[]){0, 0}),
                     tfs_build_ints(G, 2, (int64_t[]){-1, 1})};
    tfs_out low = tfs_build_reshape(G, tfs_build_op(G, "Slice", NULL, 3, in),
                                    tfs_build_ints(G, 1, (int64_t[]){-1}));
    tfs_out sl[3] = {c->dy[0], low, tfs_build_shape(G, c->x[0])};
    c->dx[0] = tfs_build_op(G, "Slice", NULL, 3, sl);
    return TFS_OK;
}

/* Select/SelectV2(cond, a, b): dy where cond to a, elsewhere to b (summed over broadcasting). */
TFS_GRAD(tfs__grad_select)
{
    tfs_out cond = c->x[0], dy = c->dy[0];
    tfs_out zeros = tfs_build_unary(G, "ZerosLike", dy);
    tfs_out ia[3] = {cond, dy, zeros}, ib[3] = {cond, zeros, dy};
    tfs_out ga = tfs_build_op(G, "SelectV2", NULL, 3, ia);
    tfs_out gb = tfs_build_op(G, "SelectV2", NULL, 3, ib);
    c->dx[1] = tfs__grad_unbroadcast(G, ga, c->x[1], dy, true);
    c->dx[2] = tfs__grad_unbroadcast(G, gb, c->x[2], dy, true);
    return TFS_OK;
}

/* Slice(x, begin, size): pad dy back with begin before and shape(x) - begin - shape(dy) after. */
TFS_GRAD(tfs__grad_slice)
{
    tfs_out begin = tfs_build_cast(G, c->x[1], TFS_DTYPE_INT32);
    tfs_out shape = tfs_build_shape(G, c->x[0]);
    tfs_out after = bin(c, "Sub", bin(c, "Sub", shape, begin), tfs_build_shape(G, c->dy[0]));
    tfs_out col = tfs_build_ints(G, 2, (int64_t[]){-1, 1});
    tfs_out cat[3] = {tfs_build_reshape(G, begin, col), tfs_build_reshape(G, after, col),
                      tfs_build_scalar(G, TFS_DTYPE_INT32, 1)};
    tfs_out pads = tfs_build_op(G, "ConcatV2", NULL, 3, cat);
    c->dx[0] = bin(c, "Pad", c->dy[0], pads);
    return TFS_OK;
}
