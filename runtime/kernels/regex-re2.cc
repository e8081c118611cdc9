/* RE2 behind the C interface of kernels/regex-impl.h: the one C++ file outside the CUDA code, as a
 * C++-only library stays in one isolated file behind a C header. It does no more than TensorFlow's
 * regex kernels do with RE2 -- construct with RE2's default options, FullMatch, Replace,
 * GlobalReplace -- so results, error texts and limits are RE2's own. Exceptions stop here: every
 * entry point catches them.
 */
#include <re2/re2.h>

#include <cstring>
#include <string>

extern "C" {
#include "runtime/alloc.h"
#include "runtime/kernels/regex-impl.h"
}

struct tfs_regex {
    re2::RE2 re;
    tfs_regex(const re2::StringPiece &pattern, const re2::RE2::Options &opts)
        : re(pattern, opts)
    {
    }
};

tfs_regex *tfs__regex_new(const char *pattern, size_t len, char **error)
{
    *error = nullptr;
    // TensorFlow constructs RE2(pattern): RE2's defaults (UTF-8, leftmost-first, Perl syntax,
    // case-sensitive, max_mem 8 MiB). log_errors only decides whether RE2 also writes a refusal
    // to stderr; the kernel returns it to the caller, so a bad request does not fill the log.
    re2::RE2::Options opts;
    opts.set_log_errors(false);
    opts.set_max_mem(TFS_REGEX_MAX_MEM);
    tfs_regex *re = nullptr;
    try {
        re = new tfs_regex(re2::StringPiece(pattern, len), opts);
        if (re->re.ok())
            return re;
        const std::string &msg = re->re.error();
        *error = tfs_strndup(msg.data(), msg.size());
    } catch (...) {
    }
    delete re;
    return nullptr;
}

void tfs__regex_free(tfs_regex *re)
{
    delete re;
}

int tfs__regex_full_match(const tfs_regex *re, const char *text, size_t len)
{
    try {
        return re2::RE2::FullMatch(re2::StringPiece(text, len), re->re) ? 1 : 0;
    } catch (...) {
        return -1;
    }
}

bool tfs__regex_replace(const tfs_regex *re, const char *text, size_t len, const char *rewrite,
                        size_t rewrite_len, bool global, char **out, size_t *out_len)
{
    *out = nullptr;
    try {
        std::string s(text, len);
        re2::StringPiece rw(rewrite, rewrite_len);
        if (global)
            re2::RE2::GlobalReplace(&s, re->re, rw);
        else
            re2::RE2::Replace(&s, re->re, rw);
        char *o = static_cast<char *>(tfs_malloc(s.size() + 1));
        if (!o)
            return false;
        memcpy(o, s.data(), s.size());
        o[s.size()] = '\0';
        *out = o;
        *out_len = s.size();
        return true;
    } catch (...) {
        return false;
    }
}
