/* Tests of StaticRegexReplace, RegexReplace, StaticRegexFullMatch and RegexFullMatch
 * (runtime/kernels/regex-ops.c, RE2 through regex-re2.cc): results worked out by hand from RE2's
 * rules -- leftmost-first alternation (where POSIX leftmost-longest would differ), greedy and lazy
 * quantifiers, RE2::GlobalReplace's handling of empty matches, captures in the rewrite, UTF-8
 * characters as single atoms, ASCII \b \d \s \w -- and the rest of RE2's syntax with RE2's meaning:
 * named groups, flags (?i) (?m) (?s) (?U), Unicode classes and case folding, POSIX classes,
 * \Q...\E, counted repetition. Also: the punctuation class Keras' TextVectorization strips (on a
 * long string, against a plain loop), patterns that are exponential for backtracking engines or
 * that overflow RE2's DFA cache (linear here), TensorFlow's handling of rewrites RE2 cannot apply,
 * and the patterns RE2 refuses, with TensorFlow's message "Invalid pattern: P, error: RE2'S
 * MESSAGE". */
#include <check.h>
#include <string.h>

#include "tests/runtime/array-helpers.h"

Suite *suite_runtime_regex(void);

#define DIMS(...) ((const int64_t[]){__VA_ARGS__})
#define STRS(...) ((const char *const[]){__VA_ARGS__})

typedef struct re_attrs {
    const char *pattern, *rewrite;
    int global;   /* -1: attr absent (default true) */
} re_attrs;

static void set_re(tfs_graph *g, int id, const void *arg)
{
    const re_attrs *a = arg;
    tfs_graph_set_attr_string(g, id, "pattern", a->pattern);
    if (a->rewrite)
        tfs_graph_set_attr_string(g, id, "rewrite", a->rewrite);
    if (a->global >= 0)
        tfs_graph_set_attr_bool(g, id, "replace_global", a->global);
}

static void replace_ok(const char *pattern, const char *rewrite, int global, const char *in,
                       const char *want)
{
    re_attrs a = {pattern, rewrite, global};
    tfs_tensor *ins[1] = {at_strs(1, DIMS(1), &in)};
    at_expect_strs(at_run1("StaticRegexReplace", 1, ins, false, set_re, &a), 1, DIMS(1), &want);
}

static void replace_err(const char *pattern, const char *rewrite, const char *needle)
{
    re_attrs a = {pattern, rewrite, -1};
    tfs_tensor *ins[1] = {at_strs(1, DIMS(1), STRS("abc"))}, *out = NULL;
    tfs_status st;
    ck_assert_int_eq(at_run("StaticRegexReplace", 1, ins, false, set_re, &a, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, needle);
    ck_assert(out == NULL);
}

/* Keras TextVectorization's default standardization strips this class. */
static const char *const KERAS_PUNCT = "[!\"#$%&()\\*\\+,-\\./:;<=>?@\\[\\\\\\]^_`{|}~\\']";

START_TEST(test_regex_replace_rules)
{
    replace_ok(KERAS_PUNCT, "", -1, "Hello, World! (test) a-b_c [x]\\y", "Hello World test abc xy");
    replace_ok(KERAS_PUNCT, "", -1, "don't", "dont");
    /* global and first-only */
    replace_ok("a+", "<\\0>", -1, "caaandaa", "c<aaa>nd<aa>");
    replace_ok("a+", "<\\0>", 0, "caaandaa", "c<aaa>ndaa");
    replace_ok("a+", "<\\0>", 1, "xyz", "xyz");
    /* captures and an escaped backslash in the rewrite */
    replace_ok("(\\w+)@(\\w+)\\.com", "\\2 at \\1\\\\", -1, "x bob@site.com y",
               "x site at bob\\ y");
    /* empty matches: RE2::GlobalReplace skips one right after the previous match */
    replace_ok("x*", "-", -1, "abc", "-a-b-c-");
    replace_ok("b*", "-", -1, "abb", "-a-");
    /* lazy and greedy */
    replace_ok("<.+?>", "", -1, "<a>b<c>", "b");
    replace_ok("<.+>", "", -1, "<a>b<c>", "");
    /* leftmost-first alternation: 'a' wins over the longer 'ab' */
    replace_ok("a|ab", "X", -1, "ab", "Xb");
    replace_ok("(?:ab|a)c?", "X", -1, "abc", "X");
    /* anchors: ^ and $ are the text's ends; $ does not match before a final newline */
    replace_ok("^a", "X", -1, "aa", "Xa");
    replace_ok("a$", "X", -1, "aa", "aX");
    replace_ok("$", "X", -1, "a\n", "a\nX");
    replace_ok("\\Aa|a\\z", "X", -1, "aaa", "XaX");
    /* UTF-8 characters are single atoms */
    replace_ok(".", "x", -1, "\xc3\xa9!", "xx");
    replace_ok("[^a]", "x", -1, "a\xc3\xa9" "b", "axx");
    replace_ok("\xc3\xa9+", "E", -1, "\xc3\xa9\xc3\xa9!", "E!");
    /* word boundaries, Perl classes, counted repetition, hex escapes, literal braces */
    replace_ok("\\bcat\\b", "dog", -1, "cat concat cat.", "dog concat dog.");
    replace_ok("\\d+", "#", -1, "a12b345", "a#b#");
    replace_ok("\\s+", " ", -1, "a \t\n b", "a b");
    replace_ok("[\\w-]+", "W", -1, "ab-c d", "W W");
    replace_ok("a{2,3}", "X", -1, "aaaaaaa", "XXa");
    replace_ok("a{2}", "X", -1, "aaaaa", "XXa");
    replace_ok("a{2,}?", "X", -1, "aaaaa", "XXa");
    replace_ok("\\x41", "b", -1, "ABA", "bBb");
    replace_ok("a{,2}", "X", -1, "a{,2}", "X");
    replace_ok("[]a]", "X", -1, "]a-", "XX-");
    replace_ok("[a-]", "X", -1, "]a-", "]XX");
    /* exponential for a naive backtracker; linear here */
    replace_ok("(a*)*b", "X", -1, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
               "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa");
    replace_ok("", "-", -1, "", "-");
}
END_TEST

START_TEST(test_regex_long_string_and_shapes)
{
    enum { N = 20000 };
    static char in[N + 1], want[N + 1];
    const char *punct = "!\"#$%&()*+,-./:;<=>?@[\\]^_`{|}~'";
    size_t w = 0;
    for (int i = 0; i < N; i++) {
        in[i] = (char)(' ' + (i * 7919 + i / 3) % 95);
        if (!strchr(punct, in[i]))
            want[w++] = in[i];
    }
    in[N] = 0;
    want[w] = 0;
    replace_ok(KERAS_PUNCT, "", -1, in, want);
    /* any shape, element by element; empty tensors */
    re_attrs a = {"o", "0", -1};
    tfs_tensor *ins[1] = {at_strs(2, DIMS(2, 2), STRS("foo", "", "bar", "ooo"))};
    at_expect_strs(at_run1("StaticRegexReplace", 1, ins, false, set_re, &a), 2, DIMS(2, 2),
                   STRS("f00", "", "bar", "000"));
    ins[0] = at_strs(1, DIMS(0), NULL);
    at_expect_strs(at_run1("StaticRegexReplace", 1, ins, false, set_re, &a), 1, DIMS(0), NULL);
    /* RegexReplace takes pattern and rewrite as inputs */
    tfs_tensor *rin[3] = {at_strs(1, DIMS(2), STRS("foo", "boo")), at_strs(0, NULL, STRS("o+$")),
                          at_strs(0, NULL, STRS("[\\0]"))};
    at_expect_strs(at_run1("RegexReplace", 3, rin, false, NULL, NULL), 1, DIMS(2),
                   STRS("f[oo]", "b[oo]"));
}
END_TEST

/* RE2 syntax beyond the basics; each result follows from RE2's documented syntax. */
START_TEST(test_regex_re2_syntax)
{
    /* named groups count as numbered groups in the rewrite */
    replace_ok("(?P<user>\\w+)@(?P<host>\\w+)", "\\2:\\1", -1, "x bob@site y", "x site:bob y");
    replace_ok("(?P<n>x)|y", "[\\1]", -1, "xy", "[x][]");
    /* flags: case-insensitive (also within a group only), multi-line ^, ungreedy */
    replace_ok("(?i)hello", "X", -1, "Hello HELLO hello", "X X X");
    replace_ok("(?i:ab)c", "X", -1, "ABc ABC abc", "X ABC X");
    replace_ok("(?m)^", "> ", -1, "a\nb", "> a\n> b");
    replace_ok("(?U)a+", "X", -1, "aaa", "XXX");
    replace_ok("(?U)a+?", "X", -1, "aaa", "X");
    /* Unicode: simple case folding (K folds to the Kelvin sign), letter classes, scripts */
    replace_ok("(?i)\xc3\xa9", "x", -1, "\xc3\x89\xc3\xa9", "xx");
    replace_ok("(?i)k", "x", -1, "\xe2\x84\xaa", "x");
    replace_ok("\\pL+", "L", -1, "h\xc3\xa9llo w\xc3\xb6rld 42", "L L 42");
    replace_ok("\\PL+", "_", -1, "a1-b", "a_b");
    replace_ok("\\p{Greek}+", "G", -1, "alpha \xce\xb1\xce\xb2\xce\xb3!", "alpha G!");
    replace_ok("[\xc3\xa9\xc3\xa8]", "X", -1, "\xc3\xa9l\xc3\xa8ve", "XlXve");
    replace_ok("\\x{263A}", "s", -1, "a\xe2\x98\xba" "b", "asb");
    /* classes: POSIX names, negated Perl classes inside brackets; \Q...\E literals */
    replace_ok("[[:alpha:]]+", "X", -1, "ab12cd", "X12X");
    replace_ok("[\\D]+", "X", -1, "ab12cd", "X12X");
    replace_ok("\\Q.*\\E", "X", -1, "a.*b", "aXb");
    /* counted repetition, greedy and lazy; a group's last iteration is its capture */
    replace_ok("\\d{3}-\\d{4}", "N", -1, "call 555-1234 now", "call N now");
    replace_ok("(ab){2,}", "X", -1, "abababx ab", "Xx ab");
    replace_ok("(ab|cd){2}", "<\\1>", -1, "abcd", "<cd>");
    replace_ok("a{2,3}?", "X", -1, "aaaaa", "XXa");
    replace_ok("\".*?\"", "Q", -1, "say \"a\" and \"b\"", "say Q and Q");
    replace_ok("\".*\"", "Q", -1, "say \"a\" and \"b\"", "say Q");
    /* an empty match after a match skips one whole UTF-8 character */
    replace_ok("x*", "-", -1, "\xc3\xa9", "-\xc3\xa9-");
}
END_TEST

/* TensorFlow does not check the rewrite: RE2::GlobalReplace / Replace decide. A group the pattern
 * lacks leaves the text unchanged; a bad escape ends that match's rewrite where it stands (global)
 * or leaves the text unchanged (first match only). */
START_TEST(test_regex_rewrite_as_tensorflow)
{
    replace_ok("(a)", "\\2", -1, "abc", "abc");
    replace_ok("(a)", "\\2", 0, "abc", "abc");
    replace_ok("a", "b\\x", -1, "aXa", "bXb");
    replace_ok("a", "b\\x", 0, "aXa", "aXa");
    replace_ok("a", "b\\", -1, "aXa", "bXb");
}
END_TEST

START_TEST(test_regex_full_match)
{
    re_attrs a = {"[a-z]+\\d*", NULL, -1};
    tfs_tensor *in[1] = {at_strs(1, DIMS(5), STRS("abc12", "abc12x", "", "Z", "q"))};
    at_expect(at_run1("StaticRegexFullMatch", 1, in, false, set_re, &a), TFS_DTYPE_BOOL, 1,
              DIMS(5), ((const bool[]){1, 0, 0, 0, 1}));
    /* a full match may need the second alternative */
    re_attrs b = {"a|ab", NULL, -1};
    in[0] = at_strs(1, DIMS(2), STRS("ab", "a"));
    at_expect(at_run1("StaticRegexFullMatch", 1, in, false, set_re, &b), TFS_DTYPE_BOOL, 1,
              DIMS(2), ((const bool[]){1, 1}));
    /* . matches \n only with (?s) */
    re_attrs c = {"(?s)a.b", NULL, -1}, d = {"a.b", NULL, -1};
    in[0] = at_strs(1, DIMS(1), STRS("a\nb"));
    at_expect(at_run1("StaticRegexFullMatch", 1, in, false, set_re, &c), TFS_DTYPE_BOOL, 1,
              DIMS(1), ((const bool[]){1}));
    in[0] = at_strs(1, DIMS(1), STRS("a\nb"));
    at_expect(at_run1("StaticRegexFullMatch", 1, in, false, set_re, &d), TFS_DTYPE_BOOL, 1,
              DIMS(1), ((const bool[]){0}));
    /* RegexFullMatch takes the pattern as a scalar input */
    tfs_tensor *rin[2] = {at_strs(2, DIMS(2, 2), STRS("ab", "AC", "abc", "")),
                          at_strs(0, NULL, STRS("(?i)a[bc]"))};
    at_expect(at_run1("RegexFullMatch", 2, rin, false, NULL, NULL), TFS_DTYPE_BOOL, 2, DIMS(2, 2),
              ((const bool[]){1, 1, 0, 0}));
}
END_TEST

/* Patterns that take exponential time in backtracking engines, or more DFA states than RE2's
 * max_mem lets it cache (it then resets the cache or runs its NFA): linear, and right. */
START_TEST(test_regex_hostile)
{
    enum { N = 200000, K = 20 };
    static char yes[N + 1], no[N + 1];
    for (int i = 0; i < N; i++)
        yes[i] = no[i] = (i * 7919 + i / 5) % 3 ? 'a' : 'b';
    yes[N - K - 1] = 'a';
    no[N - K - 1] = 'b';
    yes[N] = no[N] = 0;
    /* the character K + 1 from the end decides: about 2^K DFA states */
    re_attrs a = {"[ab]*a[ab]{20}", NULL, -1};
    tfs_tensor *in[1] = {at_strs(1, DIMS(2), STRS(yes, no))};
    at_expect(at_run1("StaticRegexFullMatch", 1, in, false, set_re, &a), TFS_DTYPE_BOOL, 1,
              DIMS(2), ((const bool[]){1, 0}));
    static char xs[N + 1];
    memset(xs, 'x', N);
    xs[N] = 0;
    replace_ok("(x+x+)+y", "Y", -1, xs, xs);
}
END_TEST

/* Patterns RE2 refuses: TensorFlow's INVALID_ARGUMENT with RE2's message. */
START_TEST(test_regex_refusals)
{
    replace_err("(a)\\1", "", "Invalid pattern: (a)\\1, error: invalid escape sequence: \\1");
    replace_err("(?=a)b", "", "Invalid pattern: (?=a)b, error: invalid perl operator: (?=");
    replace_err("(a", "", "Invalid pattern: (a, error: missing ): (a");
    replace_err("a)", "", "error: unexpected ): a)");
    replace_err("a**", "", "error: bad repetition operator: **");
    replace_err("a{1001}", "", "error: invalid repetition size: {1001}");
    replace_err("*a", "", "error: no argument for repetition operator: *");
    replace_err("[b-a]", "", "error: invalid character class range: b-a");
    replace_err("\\p{Foo}", "", "error: invalid character class range: \\p{Foo}");
    replace_err("a\\", "", "error: trailing \\");
    replace_err("\xff", "", "error: invalid UTF-8");
    /* past max_mem (8 MiB, as in TensorFlow): about 1000 copies of a class of every letter */
    replace_err("\\pL{1000}", "", "Invalid pattern: \\pL{1000}, error: pattern too large - "
                                   "compile failed");
    /* RegexReplace's and RegexFullMatch's pattern and rewrite must be scalars */
    tfs_tensor *rin[3] = {at_strs(1, DIMS(1), STRS("a")), at_strs(1, DIMS(2), STRS("a", "b")),
                          at_strs(0, NULL, STRS("x"))}, *out = NULL;
    tfs_status st;
    ck_assert_int_eq(at_run("RegexReplace", 3, rin, false, NULL, NULL, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Pattern must be scalar, but received [2]");
    rin[0] = at_strs(1, DIMS(1), STRS("a"));
    rin[1] = at_strs(0, NULL, STRS("a"));
    rin[2] = at_strs(1, DIMS(1), STRS("x"));
    ck_assert_int_eq(at_run("RegexReplace", 3, rin, false, NULL, NULL, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Rewrite must be scalar, but received [1]");
    rin[0] = at_strs(1, DIMS(1), STRS("a"));
    rin[1] = at_strs(0, NULL, STRS("("));
    ck_assert_int_eq(at_run("RegexFullMatch", 2, rin, false, NULL, NULL, 1, &out, &st),
                     TFS_INVALID_ARGUMENT);
    rt_assert_err(st, TFS_INVALID_ARGUMENT, "Invalid pattern: (, error: missing ): (");
    ck_assert(out == NULL);
}
END_TEST

Suite *suite_runtime_regex(void)
{
    Suite *s = suite_create("runtime_regex");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_regex_replace_rules);
    tcase_add_test(tc, test_regex_long_string_and_shapes);
    tcase_add_test(tc, test_regex_re2_syntax);
    tcase_add_test(tc, test_regex_rewrite_as_tensorflow);
    tcase_add_test(tc, test_regex_full_match);
    tcase_add_test(tc, test_regex_hostile);
    tcase_add_test(tc, test_regex_refusals);
    suite_add_tcase(s, tc);
    return s;
}
