/* RE2 behind a C interface, for the regex kernels (kernels/regex-ops.c). Internal to
 * runtime/kernels.
 *
 * TensorFlow's regex ops are defined by RE2 -- its syntax, its leftmost-first matching, and
 * RE2::Replace / RE2::GlobalReplace for the rewrites -- so the kernels hand every pattern to RE2
 * itself rather than to an engine of our own. RE2 is C++: kernels/regex-re2.cc is the one C++ file
 * outside the CUDA code, and this header is all the C side sees of it.
 *
 * A compiled pattern is immutable and may be matched from many threads at once (RE2 is
 * thread-safe for matching). Nothing here throws: C++ exceptions (out of memory) are caught in the
 * shim and come back as the error return each function states.
 */
#ifndef TFS_RUNTIME_KERNELS_REGEX_IMPL_H
#define TFS_RUNTIME_KERNELS_REGEX_IMPL_H

#include <stdbool.h>
#include <stddef.h>

/* RE2's max_mem for every pattern: RE2's own default, 8 MiB, which is what TensorFlow's kernels
 * get from RE2(pattern), so the same patterns compile. It bounds one compiled pattern's memory:
 * the forward program may take two thirds of it (a pattern that needs more is refused, "pattern
 * too large - compile failed", as in TensorFlow) and what the programs leave goes to the DFA state
 * caches built lazily while matching; a DFA that fills its cache is reset, or RE2 falls back to
 * its NFA, linear in the text either way. */
#define TFS_REGEX_MAX_MEM ((long long)8 << 20)

typedef struct tfs_regex tfs_regex;

/* Compiles `pattern` (len bytes, not NUL-terminated) with TensorFlow's RE2 options. NULL on
 * failure: *error is then RE2's message (tfs_malloc'd, the caller frees it) for a pattern RE2
 * refuses, or NULL when memory ran out. */
tfs_regex *tfs__regex_new(const char *pattern, size_t len, char **error);
void       tfs__regex_free(tfs_regex *re);   /* NULL is fine */

/* RE2::FullMatch: 1 when the whole of text[0, len) matches, else 0; -1: out of memory. */
int tfs__regex_full_match(const tfs_regex *re, const char *text, size_t len);

/* text with RE2::GlobalReplace (global) or RE2::Replace applied with `rewrite` (\0-\9 and \\), as
 * TensorFlow's RegexReplace kernels do -- including RE2's handling of a rewrite it cannot apply
 * (a group the pattern lacks: the text unchanged). The result goes to *out (tfs_malloc'd and
 * NUL-terminated; the caller frees it) and its length to *out_len. false: out of memory. */
bool tfs__regex_replace(const tfs_regex *re, const char *text, size_t len, const char *rewrite,
                        size_t rewrite_len, bool global, char **out, size_t *out_len);

#endif
