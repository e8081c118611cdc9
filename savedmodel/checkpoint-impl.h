/* Internals of checkpoints and event files shared by savedmodel/checkpoint*.c, events.c and their
 * tests: the CheckpointState text the way TensorFlow's Python writes it, and mkdir -p. */
#ifndef TFS_SAVEDMODEL_CHECKPOINT_IMPL_H
#define TFS_SAVEDMODEL_CHECKPOINT_IMPL_H

#include <stdbool.h>
#include <stddef.h>

#include "savedmodel/savedmodel.h"

/* Formats v as Python's repr(float) does (what protobuf's Python text_format prints for a double):
 * the shortest digits that read back as v; positional notation with at least one fractional digit
 * ("1700000000.5", "3.0", "0.0001") unless the decimal exponent is < -4 or >= 16, then
 * "1e+16", "1.5e-05"; "nan", "inf", "-inf". buf needs 32 bytes. Returns buf. */
char *tfs__format_double_repr(double v, char *buf);

/* The text of a CheckpointState, field by field as text_format.MessageToString prints it (fields
 * at their proto3 defaults omitted). Caller owns *out (tfs_free). RESOURCE_EXHAUSTED only. */
enum tfs_code tfs__checkpoint_state_render(const tfs_checkpoint_state *s, char **out,
                                           tfs_status *st);

/* mkdir -p: creates dir and its missing parents (mode 0755). */
enum tfs_code tfs__mkdirs(const char *dir, tfs_status *st);

#endif
