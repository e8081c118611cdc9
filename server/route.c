/* URL routing of the REST API, by hand instead of with a regex library. TF Serving matches the
 * request path (case-insensitively, as a full match) against two regexes:
 *
 *   POST /v1/models/([^/:]+)(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?
 *          :(classify|regress|predict)
 *   GET  /v1/models(?:/([^/:]+))?(?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))?(?:\/(metadata))?
 *
 * The matcher below tries the alternatives in the regex engine's priority order (optional groups
 * present before absent, versions before labels), so odd paths resolve as they do in TF Serving:
 * GET /v1/models/metadata is the status of a model named "metadata", GET /v1/models/versions/3
 * has no model name. Name and label runs are maximal, which is all backtracking could try, since
 * every following piece starts with '/' or ':'. After the match, the verb and "metadata" are
 * compared exactly, as TF Serving does: ":PREDICT" is a malformed request and "/METADATA" a status
 * request.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runtime/alloc.h"
#include "server/server-impl.h"

/* A matched piece of the path (not yet unescaped). */
typedef struct span {
    const char *p;
    size_t      n;
} span;

typedef struct match {
    span name;       /* n == 0: absent */
    span version;    /* digits */
    span label;
    span tail;       /* the verb (POST) or "metadata" (GET), as written */
    bool has_version;
    bool has_label;
} match;

static bool lit(const char **s, const char *word)
{
    size_t n = strlen(word);
    if (strncasecmp(*s, word, n) != 0)
        return false;
    *s += n;
    return true;
}

/* [^/:]+ , maximal. */
static bool segment(const char **s, span *out)
{
    const char *p = *s;
    while (*p && *p != '/' && *p != ':')
        p++;
    if (p == *s)
        return false;
    out->p = *s;
    out->n = (size_t)(p - *s);
    *s = p;
    return true;
}

/* \d+ , maximal. */
static bool digits(const char **s, span *out)
{
    const char *p = *s;
    while (*p >= '0' && *p <= '9')
        p++;
    if (p == *s)
        return false;
    out->p = *s;
    out->n = (size_t)(p - *s);
    *s = p;
    return true;
}

/* The tail after the optional version/label group: ":verb" for POST, "[/metadata]" for GET. */
static bool tail(const char *s, bool post, match *m)
{
    if (post) {
        if (*s++ != ':')
            return false;
        static const char *const verbs[] = {"classify", "regress", "predict"};
        for (int i = 0; i < 3; i++) {
            if (strcasecmp(s, verbs[i]) == 0) {
                m->tail = (span){s, strlen(s)};
                return true;
            }
        }
        return false;
    }
    const char *t = s;
    if (lit(&t, "/metadata") && *t == 0) {
        m->tail = (span){s + 1, 8};
        return true;
    }
    m->tail = (span){NULL, 0};
    return *s == 0;
}

/* (?:(?:/versions/(\d+))|(?:/labels/([^/:]+)))? then the tail, alternatives in priority order. */
static bool version_or_label(const char *s, bool post, match *m)
{
    const char *t = s;
    m->has_version = m->has_label = false;
    if (lit(&t, "/versions/") && digits(&t, &m->version) && tail(t, post, m)) {
        m->has_version = true;
        return true;
    }
    t = s;
    if (lit(&t, "/labels/") && segment(&t, &m->label) && tail(t, post, m)) {
        m->has_label = true;
        return true;
    }
    return tail(s, post, m);
}

static bool match_post(const char *path, match *m)
{
    const char *s = path;
    memset(m, 0, sizeof *m);
    return lit(&s, "/v1/models/") && segment(&s, &m->name) && version_or_label(s, true, m);
}

static bool match_get(const char *path, match *m)
{
    const char *s = path;
    memset(m, 0, sizeof *m);
    if (!lit(&s, "/v1/models"))
        return false;
    const char *t = s;
    if (*t == '/') {
        t++;
        if (segment(&t, &m->name) && version_or_label(t, false, m))
            return true;
    }
    m->name = (span){NULL, 0};
    return version_or_label(s, false, m);
}

bool tfs__route_is_api(const char *path)
{
    return strncasecmp(path, "/v1/", 4) == 0 ||
           (strncmp(path, "/v2", 3) == 0 && (path[3] == 0 || path[3] == '/' || path[3] == '?'));
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* The byte that a %XX at s[i] (of s[0..n)) stands for, or -1 when s[i] starts none. */
static int escape_at(const char *s, size_t n, size_t i)
{
    int hi, lo;
    if (s[i] == '%' && i + 2 < n && (hi = hexval(s[i + 1])) >= 0 && (lo = hexval(s[i + 2])) >= 0)
        return hi << 4 | lo;
    return -1;
}

/* %XX decoding of s[0..n) into out (room for n + 1 bytes); returns out. */
static char *unescape_into(const char *s, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int c = escape_at(s, n, i);
        if (c >= 0) {
            out[o++] = (char)c;
            i += 2;
        } else {
            out[o++] = s[i];
        }
    }
    out[o] = 0;
    return out;
}

char *tfs__url_unescape(const char *s, size_t n)
{
    char *out = tfs_malloc(n + 1);
    return out ? unescape_into(s, n, out) : NULL;
}

/* s[0..n) unescaped into r->buf from *used on, or onto the heap when it does not fit. */
static char *route_string(tfs__route *r, size_t *used, const char *s, size_t n)
{
    if (n + 1 <= sizeof r->buf - *used) {
        char *out = unescape_into(s, n, r->buf + *used);
        *used += n + 1;
        return out;
    }
    return tfs__url_unescape(s, n);
}

/* A NUL from %00 would end the C string early, so "m%00x" would be served as "m"; no model or
 * label is named with control characters (the loader's names come from folder names and config
 * entries), so a piece with one is refused whole. Checked on the decoded bytes, which is where a
 * raw control byte and an escaped one look alike. */
static enum tfs_code check_piece(span sp, bool label, tfs_status *st)
{
    size_t at = 0;   /* offset after decoding */
    for (size_t i = 0; i < sp.n; i++, at++) {
        int c = escape_at(sp.p, sp.n, i);
        if (c >= 0)
            i += 2;
        else
            c = (unsigned char)sp.p[i];
        if (c >= 0x20 && c != 0x7f)
            continue;
        if (label)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Unrecognized servable version label: it has "
                           "control character 0x%02x at byte %zu (after percent-decoding)", c, at);
        return TFS_ERR(st, TFS_NOT_FOUND, "Servable not found: the model name has control "
                       "character 0x%02x at byte %zu (after percent-decoding); no model is named "
                       "so", c, at);
    }
    return TFS_OK;
}

static bool in_buf(const tfs__route *r, const char *p)
{
    uintptr_t a = (uintptr_t)p, b = (uintptr_t)r->buf;
    return a >= b && a < b + sizeof r->buf;
}

static enum tfs_code parse_version(span v, int64_t *out, tfs_status *st)
{
    char buf[32];
    if (v.n >= sizeof buf)
        goto bad;
    memcpy(buf, v.p, v.n);
    buf[v.n] = 0;
    errno = 0;
    long long x = strtoll(buf, NULL, 10);
    if (errno == ERANGE)
        goto bad;
    *out = (int64_t)x;
    return TFS_OK;
bad:
    return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Failed to convert version: %.*s to numeric.",
                   (int)v.n, v.p);
}

/* ---- KServe v2 ------------------------------------------------------------------------------ */

/* The value of ?signature_name= in a query (not unescaped), n == 0 when absent. */
static span query_signature(const char *q)
{
    static const char key[] = "signature_name=";
    while (q && *q) {
        const char *end = strchr(q, '&');
        size_t      n = end ? (size_t)(end - q) : strlen(q);
        if (n >= sizeof key - 1 && strncmp(q, key, sizeof key - 1) == 0)
            return (span){q + sizeof key - 1, n - (sizeof key - 1)};
        q = end ? end + 1 : NULL;
    }
    return (span){NULL, 0};
}

/* /v2, /v2/health/{live,ready}, /v2/models/NAME[/versions/V][/ready|/infer]: exact and
 * case-sensitive, as the spec's strings are. A version is a v2 string; tfserve's versions are
 * numbers, so any other string names no version (404). */
static enum tfs_code route_parse_v2(const char *method, const char *path, tfs__route *r,
                                    tfs_status *st)
{
    bool        post = strcmp(method, "POST") == 0;
    bool        get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    const char *q = strchr(path, '?');
    size_t      n = q ? (size_t)(q - path) : strlen(path);
    span        name = {NULL, 0}, version = {NULL, 0}, sig = {NULL, 0};
    const char *s = path + 3, *end = path + n;

    if (s == end || (s + 1 == end && *s == '/')) {
        if (!get)
            goto malformed;
        r->kind = TFS__ROUTE_V2_SERVER;
        return TFS_OK;
    }
    if ((size_t)(end - s) == 12 && strncmp(s, "/health/live", 12) == 0 && get) {
        r->kind = TFS__ROUTE_V2_LIVE;
        return TFS_OK;
    }
    if ((size_t)(end - s) == 13 && strncmp(s, "/health/ready", 13) == 0 && get) {
        r->kind = TFS__ROUTE_V2_READY;
        return TFS_OK;
    }
    if ((size_t)(end - s) < 8 || strncmp(s, "/models/", 8) != 0)
        goto malformed;
    s += 8;
    name.p = s;
    while (s < end && *s != '/')
        s++;
    name.n = (size_t)(s - name.p);
    if (name.n == 0)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Missing model name in request.");
    if ((size_t)(end - s) > 10 && strncmp(s, "/versions/", 10) == 0) {
        s += 10;
        version.p = s;
        while (s < end && *s != '/')
            s++;
        version.n = (size_t)(s - version.p);
    }
    size_t rest = (size_t)(end - s);
    if (rest == 0 && get) {
        r->kind = TFS__ROUTE_V2_MODEL;
        sig = query_signature(q ? q + 1 : NULL);
    } else if (rest == 6 && strncmp(s, "/ready", 6) == 0 && get) {
        r->kind = TFS__ROUTE_V2_MODEL_READY;
    } else if (rest == 6 && strncmp(s, "/infer", 6) == 0 && post) {
        r->kind = TFS__ROUTE_V2_INFER;
    } else {
        goto malformed;
    }
    if (version.p) {
        span d;
        const char *v = version.p;
        enum tfs_code code;
        if (version.n == 0 || !digits(&v, &d) || d.n != version.n)
            return TFS_ERR(st, TFS_NOT_FOUND, "Model '%.*s' has no version '%.*s': tfserve's "
                           "versions are numbers (TF Serving's version labels are /v1 only)",
                           (int)name.n, name.p, (int)version.n, version.p);
        if ((code = parse_version(version, &r->version, st)) != TFS_OK)
            return code;
    }
    enum tfs_code code = check_piece(name, false, st);
    if (code != TFS_OK)
        return code;
    size_t used = 0;
    if (!(r->name = route_string(r, &used, name.p, name.n)) ||
        (sig.n && !(r->signature = route_string(r, &used, sig.p, sig.n)))) {
        tfs__route_deinit(r);
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory routing %s %s", method, path);
    }
    return TFS_OK;
malformed:
    return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Malformed request: %s %s", method, path);
}

enum tfs_code tfs__route_parse(const char *method, const char *path, tfs__route *r,
                               tfs_status *st)
{
    match         m;
    tfs__route    out = {.version = -1};
    enum tfs_code code;
    bool       post = strcmp(method, "POST") == 0;
    bool       get = strcmp(method, "GET") == 0;

    memset(r, 0, sizeof *r);
    r->version = -1;
    if (strncmp(path, "/v2", 3) == 0 && tfs__route_is_api(path)) {
        if ((code = route_parse_v2(method, path, r, st)) != TFS_OK)
            return code;
        tfs_status_clear(st);
        return TFS_OK;
    }
    if (post && match_post(path, &m)) {
        /* The regex matched case-insensitively, but the verb is compared exactly. */
        if (strncmp(m.tail.p, "predict", m.tail.n) == 0 && m.tail.n == 7)
            out.kind = TFS__ROUTE_PREDICT;
        else if (strncmp(m.tail.p, "classify", m.tail.n) == 0 && m.tail.n == 8)
            out.kind = TFS__ROUTE_CLASSIFY;
        else if (strncmp(m.tail.p, "regress", m.tail.n) == 0 && m.tail.n == 7)
            out.kind = TFS__ROUTE_REGRESS;
        else
            goto malformed;
        if (m.has_version && (code = parse_version(m.version, &out.version, st)) != TFS_OK)
            return code;
    } else if (get && match_get(path, &m)) {
        out.kind = m.tail.n == 8 && strncmp(m.tail.p, "metadata", 8) == 0 ? TFS__ROUTE_METADATA
                                                                          : TFS__ROUTE_STATUS;
        if (m.name.n == 0)
            return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Missing model name in request.");
        if (m.has_version && (code = parse_version(m.version, &out.version, st)) != TFS_OK)
            return code;
    } else {
        goto malformed;
    }

    if ((code = check_piece(m.name, false, st)) != TFS_OK ||
        (m.has_label && (code = check_piece(m.label, true, st)) != TFS_OK))
        return code;
    size_t used = 0;
    r->kind = out.kind;
    r->version = out.version;
    r->name = route_string(r, &used, m.name.p, m.name.n);
    if (!r->name)
        goto oom;
    if (m.has_label && !(r->label = route_string(r, &used, m.label.p, m.label.n)))
        goto oom;
    tfs_status_clear(st);
    return TFS_OK;

malformed:
    return TFS_ERR(st, TFS_INVALID_ARGUMENT, "Malformed request: %s %s", method, path);
oom:
    tfs__route_deinit(r);
    return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory routing %s %s", method, path);
}

void tfs__route_deinit(tfs__route *r)
{
    if (!r)
        return;
    if (!in_buf(r, r->name))
        tfs_free(r->name);
    if (!in_buf(r, r->label))
        tfs_free(r->label);
    if (!in_buf(r, r->signature))
        tfs_free(r->signature);
    r->name = r->label = r->signature = NULL;
}
