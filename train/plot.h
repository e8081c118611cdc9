/* train/plot: the learning curves of a run as an SVG image (tfserve-train --plot FILE.svg).
 *
 * Two panels side by side, loss on the left and accuracy on the right, each with the train and
 * the eval curve per epoch (train solid with filled markers, eval dashed with hollow ones), axes
 * with ticks and labels, a title and a legend. Plain SVG 1.1, no scripts, no external fonts or
 * styles: any browser, rsvg-convert or Inkscape draws it.
 *
 *     double loss[] = {0.61, 0.42, 0.37}, eval_loss[] = {0.48, 0.41, NAN};
 *     tfs_plot_curves c = {.n_epochs = 3, .train_loss = loss, .eval_loss = eval_loss,
 *                          .title = "fashion-mnist MLP"};
 *     if (tfs_plot_write_svg("curves.svg", &c, &st) != TFS_OK) ...
 *
 * Self-contained internal header for now; its declarations belong in train/train.h.
 */
#ifndef TFS_TRAIN_PLOT_H
#define TFS_TRAIN_PLOT_H

#include <stddef.h>

#include "runtime/runtime.h"

typedef struct tfs_plot_curves {
    int           n_epochs;         /* >= 1; point i is epoch i + 1 */
    /* n_epochs values each (borrowed), or NULL for a curve the run does not have. NaN or an
     * infinity is a missing point: the curve breaks there. */
    const double *train_loss;
    const double *eval_loss;
    const double *train_accuracy;
    const double *eval_accuracy;
    const char   *title;            /* NULL: "Training curves" */
} tfs_plot_curves;

/* The SVG document, NUL-terminated, in *out (caller frees with tfs_free), its length in *len.
 * INVALID_ARGUMENT when n_epochs < 1 (or absurdly large: over 1,000,000); RESOURCE_EXHAUSTED. */
enum tfs_code tfs_plot_svg(const tfs_plot_curves *c, char **out, size_t *len, tfs_status *st);

/* Writes the SVG to path: a temporary file beside it, renamed into place, so a viewer never sees
 * half an image. Errors name the file. */
enum tfs_code tfs_plot_write_svg(const char *path, const tfs_plot_curves *c, tfs_status *st);

#endif
