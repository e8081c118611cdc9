/* The text-format parser on the test messages of textformat_test.proto: every syntax form of
 * proto/textformat.h, every scalar type with its range limits, enums, oneofs, maps, lists,
 * comments, escapes, and the exact "<file>:<line>:<col>: <what>" of each kind of error. Every
 * parsed message is freed with protobuf_c_message_free_unpacked(m, NULL), which is the contract
 * (the ASan build checks it frees everything).
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/textformat.h"
#include "textformat_test.pb-c.h"

#define SCALARS  (&tfs__test__scalars__descriptor)
#define REPEATED (&tfs__test__repeated__descriptor)
#define NODE     (&tfs__test__node__descriptor)

static void *parse_ok(const ProtobufCMessageDescriptor *d, const char *text)
{
    ProtobufCMessage *m = (ProtobufCMessage *)1;
    tfs_status        st;
    enum tfs_code     code = tfs_textformat_parse(d, text, strlen(text), "t.txt", &m, &st);
    ck_assert_msg(code == TFS_OK, "parsing <<%s>> failed: %s", text, st.msg);
    ck_assert_int_eq(st.code, TFS_OK);
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_eq(m->descriptor, d);
    return m;
}

static void free_msg(void *m)
{
    protobuf_c_message_free_unpacked(m, NULL);
}

/* Asserts the parse fails with code and exactly the message want. */
static void parse_err(const ProtobufCMessageDescriptor *d, const char *text, enum tfs_code code,
                      const char *want)
{
    ProtobufCMessage *m = (ProtobufCMessage *)1;
    tfs_status        st;
    enum tfs_code     got = tfs_textformat_parse(d, text, strlen(text), "t.txt", &m, &st);
    ck_assert_msg(got == code, "<<%s>>: code %d, want %d (%s)", text, got, code, st.msg);
    ck_assert_ptr_null(m);
    ck_assert_msg(strcmp(st.msg, want) == 0, "<<%s>>:\n got  '%s'\n want '%s'", text, st.msg,
                  want);
}

START_TEST(empty_input_is_empty_message)
{
    const char *blank[] = {"", "   \n\t ", "# only a comment\n", "# no newline"};
    for (size_t i = 0; i < sizeof blank / sizeof blank[0]; i++) {
        Tfs__Test__Scalars *s = parse_ok(SCALARS, blank[i]);
        ck_assert(!s->has_i32 && !s->has_b && s->str == NULL);
        ck_assert_str_eq(s->with_default, "dflt");   /* protobuf_c_message_init defaults */
        free_msg(s);
    }
    /* NULL text with length 0 and a NULL filename are allowed. */
    ProtobufCMessage *m;
    tfs_status        st;
    ck_assert_int_eq(tfs_textformat_parse(SCALARS, NULL, 0, NULL, &m, &st), TFS_OK);
    free_msg(m);
    ck_assert_int_eq(tfs_textformat_parse(SCALARS, "i32: x", 6, NULL, &m, &st),
                     TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "<text>:1:6: expected an integer for field 'i32', found 'x'");
}
END_TEST

START_TEST(every_scalar_type)
{
    Tfs__Test__Scalars *s = parse_ok(SCALARS,
        "i32: -2147483648 i64: -9223372036854775808 u32: 4294967295\n"
        "u64: 18446744073709551615 s32: 2147483647 s64: 9223372036854775807\n"
        "f32: 0xffffffff f64: 0x10 sf32: -017 sf64: -1\n"
        "flt: 1.5f dbl: -2.5e-3 b: true str: \"h\\u00e9\" byt: 'a\\0b' color: GREEN");
    ck_assert(s->has_i32 && s->i32 == INT32_MIN);
    ck_assert(s->has_i64 && s->i64 == INT64_MIN);
    ck_assert(s->has_u32 && s->u32 == UINT32_MAX);
    ck_assert(s->has_u64 && s->u64 == UINT64_MAX);
    ck_assert(s->has_s32 && s->s32 == INT32_MAX);
    ck_assert(s->has_s64 && s->s64 == INT64_MAX);
    ck_assert(s->has_f32 && s->f32 == 0xffffffffu);
    ck_assert(s->has_f64 && s->f64 == 16);
    ck_assert(s->has_sf32 && s->sf32 == -15);   /* octal */
    ck_assert(s->has_sf64 && s->sf64 == -1);
    ck_assert(s->has_flt && s->flt == 1.5f);
    ck_assert(s->has_dbl && s->dbl == -2.5e-3);
    ck_assert(s->has_b && s->b);
    ck_assert_str_eq(s->str, "h\xc3\xa9");
    ck_assert(s->has_byt && s->byt.len == 3 && memcmp(s->byt.data, "a\0b", 3) == 0);
    ck_assert(s->has_color && s->color == TFS__TEST__COLOR__GREEN);
    ck_assert_str_eq(s->with_default, "dflt");
    free_msg(s);
}
END_TEST

START_TEST(integer_ranges)
{
    parse_err(SCALARS, "i32: 2147483648", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: integer out of range for field 'i32' (int32)");
    parse_err(SCALARS, "i32: -2147483649", TFS_INVALID_ARGUMENT,
              "t.txt:1:7: integer out of range for field 'i32' (int32)");
    parse_err(SCALARS, "\n  u32: -1", TFS_INVALID_ARGUMENT,
              "t.txt:2:9: integer out of range for field 'u32' (uint32)");
    parse_err(SCALARS, "u32: 4294967296", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: integer out of range for field 'u32' (uint32)");
    parse_err(SCALARS, "i64: 9223372036854775808", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: integer out of range for field 'i64' (int64)");
    parse_err(SCALARS, "u64: 18446744073709551616", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: integer out of range for field 'u64'");
    parse_err(SCALARS, "sf32: 0x80000000", TFS_INVALID_ARGUMENT,
              "t.txt:1:7: integer out of range for field 'sf32' (sfixed32)");
    parse_err(SCALARS, "f32: 0x100000000", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: integer out of range for field 'f32' (fixed32)");
    parse_err(SCALARS, "i32: 1.5", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: expected an integer for field 'i32', found '1.5'");
    parse_err(SCALARS, "i32: 09", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: numbers starting with 0 are octal: '9' is no octal digit");
    parse_err(SCALARS, "i32: 12abc", TFS_INVALID_ARGUMENT,
              "t.txt:1:8: need space between a number and what follows it");
    parse_err(SCALARS, "i32: 0x", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: \"0x\" must be followed by hex digits");
    parse_err(SCALARS, "dbl: 1e", TFS_INVALID_ARGUMENT,
              "t.txt:1:8: \"e\" must be followed by an exponent");
    /* -0 is fine for unsigned fields (it is zero). */
    Tfs__Test__Scalars *s = parse_ok(SCALARS, "u64: -0 i32: - 5");
    ck_assert(s->has_u64 && s->u64 == 0 && s->i32 == -5);
    free_msg(s);
}
END_TEST

START_TEST(floats_and_bools)
{
    Tfs__Test__Scalars *s = parse_ok(SCALARS, "flt: -inf dbl: NaN");
    ck_assert(isinf(s->flt) && s->flt < 0);
    ck_assert(isnan(s->dbl));
    free_msg(s);
    s = parse_ok(SCALARS, "flt: 1e39 dbl: .25");   /* out of float range: infinity */
    ck_assert(isinf(s->flt) && s->flt > 0);
    ck_assert(s->dbl == 0.25);
    free_msg(s);
    s = parse_ok(SCALARS, "flt: 3 dbl: -Infinity");   /* integers are fine for floats */
    ck_assert(s->flt == 3.0f && isinf(s->dbl) && s->dbl < 0);
    free_msg(s);
    parse_err(SCALARS, "dbl: \"1\"", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: expected a number for field 'dbl', found '\"1\"'");
    parse_err(SCALARS, "dbl: infinite", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: expected a number for field 'dbl', found 'infinite'");

    const char *yes[] = {"b: true", "b: True", "b: t", "b: 1"};
    const char *no[] = {"b: false", "b: False", "b: f", "b: 0"};
    for (int i = 0; i < 4; i++) {
        s = parse_ok(SCALARS, yes[i]);
        ck_assert(s->has_b && s->b == 1);
        free_msg(s);
        s = parse_ok(SCALARS, no[i]);
        ck_assert(s->has_b && s->b == 0);
        free_msg(s);
    }
    parse_err(SCALARS, "b: 2", TFS_INVALID_ARGUMENT,
              "t.txt:1:4: expected true or false for field 'b', found '2'");
    parse_err(SCALARS, "b: TRUE", TFS_INVALID_ARGUMENT,
              "t.txt:1:4: expected true or false for field 'b', found 'TRUE'");
}
END_TEST

START_TEST(enums_by_name_and_number)
{
    Tfs__Test__Repeated *r = parse_ok(REPEATED, "color: RED color: 2 color: -3 color: [0, MINUS]");
    ck_assert_int_eq(r->n_color, 5);
    ck_assert_int_eq(r->color[0], TFS__TEST__COLOR__RED);
    ck_assert_int_eq(r->color[1], TFS__TEST__COLOR__GREEN);
    ck_assert_int_eq(r->color[2], TFS__TEST__COLOR__MINUS);
    ck_assert_int_eq(r->color[3], TFS__TEST__COLOR__COLOR_UNSPECIFIED);
    ck_assert_int_eq(r->color[4], TFS__TEST__COLOR__MINUS);
    free_msg(r);
    parse_err(SCALARS, "color: BLUE", TFS_INVALID_ARGUMENT,
              "t.txt:1:8: unknown enum value 'BLUE' for field 'color'");
    parse_err(SCALARS, "color: 7", TFS_INVALID_ARGUMENT,
              "t.txt:1:8: unknown enum number '7' for field 'color'");
    parse_err(SCALARS, "color: \"RED\"", TFS_INVALID_ARGUMENT,
              "t.txt:1:8: expected an enum value for field 'color', found '\"RED\"'");
}
END_TEST

START_TEST(strings_and_escapes)
{
    Tfs__Test__Scalars *s = parse_ok(SCALARS,
        "str: 'a\\n\\t\\\\\\'\\\"\\?\\x41\\101\\r\\a\\b\\f\\v' \"-\" 'z'  # adjacent strings join\n"
        "byt: \"\\xff\\0\\U0001F600\"");
    ck_assert_str_eq(s->str, "a\n\t\\'\"?AA\r\a\b\f\v-z");
    ck_assert_int_eq(s->byt.len, 6);
    ck_assert(memcmp(s->byt.data, "\xff\0\xf0\x9f\x98\x80", 6) == 0);
    free_msg(s);
    s = parse_ok(SCALARS, "str: ''");
    ck_assert_str_eq(s->str, "");
    free_msg(s);
    s = parse_ok(SCALARS, "str: \"# not a comment\"");
    ck_assert_str_eq(s->str, "# not a comment");
    free_msg(s);
    parse_err(SCALARS, "str: \"ab\\q\"", TFS_INVALID_ARGUMENT,
              "t.txt:1:9: invalid escape sequence '\\q'");
    parse_err(SCALARS, "str: \"\\x\"", TFS_INVALID_ARGUMENT,
              "t.txt:1:7: \\x must be followed by hex digits");
    parse_err(SCALARS, "str: '\\ud800'", TFS_INVALID_ARGUMENT,
              "t.txt:1:7: \\u must be followed by 4 hex digits of a valid code point");
    parse_err(SCALARS, "str: '\\777'", TFS_INVALID_ARGUMENT,
              "t.txt:1:7: octal escape above \\377");
    parse_err(SCALARS, "str: \"abc", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: unterminated string literal");
    parse_err(SCALARS, "str: \"ab\ncd\"", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: string literals cannot cross line boundaries");
    parse_err(SCALARS, "str: 'a\\0b'", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: string for field 'str' contains a NUL byte");
    parse_err(SCALARS, "str: abc", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: expected a string for field 'str', found 'abc'");
}
END_TEST

START_TEST(message_syntax_forms)
{
    /* field { }, field: { }, field < >, separators ; and , and none. */
    Tfs__Test__Node *n = parse_ok(NODE,
        "name: 'root';\n"
        "child { name: 'a', child: < name: 'b' > }\n"
        "children: { name: 'c' }, children < > children {}\n"
        "scalars { i32: 1; str: 'x' }");
    ck_assert_str_eq(n->name, "root");
    ck_assert_ptr_nonnull(n->child);
    ck_assert_str_eq(n->child->name, "a");
    ck_assert_str_eq(n->child->child->name, "b");
    ck_assert_ptr_null(n->child->child->child);
    ck_assert_int_eq(n->n_children, 3);
    ck_assert_str_eq(n->children[0]->name, "c");
    ck_assert_ptr_null(n->children[1]->name);
    ck_assert_int_eq(n->kind_case, TFS__TEST__NODE__KIND_SCALARS);
    ck_assert(n->scalars->has_i32 && n->scalars->i32 == 1);
    ck_assert_str_eq(n->scalars->str, "x");
    free_msg(n);

    /* Lists of scalars and of messages, empty lists, trailing separators. */
    Tfs__Test__Repeated *r = parse_ok(REPEATED,
        "i32: [1, -2, 0x3] i32: 4 i32: []\n"
        "str: ['a', \"b\" 'c']\n"
        "msg: [{i32: 1}, <i32: 2>] msg {i32: 3}\n"
        "b: [true, f, 1] dbl: [1.5, -inf]; byt: ['\\x00']");
    ck_assert_int_eq(r->n_i32, 4);
    ck_assert(r->i32[0] == 1 && r->i32[1] == -2 && r->i32[2] == 3 && r->i32[3] == 4);
    ck_assert_int_eq(r->n_str, 2);
    ck_assert_str_eq(r->str[0], "a");
    ck_assert_str_eq(r->str[1], "bc");
    ck_assert_int_eq(r->n_msg, 3);
    ck_assert(r->msg[0]->i32 == 1 && r->msg[1]->i32 == 2 && r->msg[2]->i32 == 3);
    ck_assert(r->n_b == 3 && r->b[0] && !r->b[1] && r->b[2]);
    ck_assert(r->n_dbl == 2 && r->dbl[0] == 1.5 && isinf(r->dbl[1]));
    ck_assert(r->n_byt == 1 && r->byt[0].len == 1 && r->byt[0].data[0] == 0);
    free_msg(r);

    /* Many elements: the repeated array grows past its doubling steps. */
    char *big = malloc(40000);
    size_t len = 0;
    for (int i = 0; i < 1000; i++)
        len += (size_t)sprintf(big + len, "i32: %d msg {i32: %d}\n", i, -i);
    r = parse_ok(REPEATED, big);
    ck_assert_int_eq(r->n_i32, 1000);
    ck_assert_int_eq(r->n_msg, 1000);
    ck_assert(r->i32[999] == 999 && r->msg[999]->i32 == -999);
    free_msg(r);
    free(big);
}
END_TEST

START_TEST(oneofs_and_maps)
{
    Tfs__Test__Node *n = parse_ok(NODE, "number: -7");
    ck_assert_int_eq(n->kind_case, TFS__TEST__NODE__KIND_NUMBER);
    ck_assert(n->number == -7);
    free_msg(n);
    n = parse_ok(NODE, "text: 'hi'");
    ck_assert_int_eq(n->kind_case, TFS__TEST__NODE__KIND_TEXT);
    ck_assert_str_eq(n->text, "hi");
    free_msg(n);
    parse_err(NODE, "text: 'hi'\nnumber: 3", TFS_INVALID_ARGUMENT,
              "t.txt:2:1: field 'number' is specified along with field 'text', another member "
              "of the same oneof");
    parse_err(NODE, "scalars {} text: ''", TFS_INVALID_ARGUMENT,
              "t.txt:1:12: field 'text' is specified along with field 'scalars', another member "
              "of the same oneof");

    n = parse_ok(NODE,
        "labels { key: 'stable' value: 42 }\n"
        "labels: { value: -1 key: \"canary\" }\n"
        "labels {}\n"
        "by_id { key: 3 value { str: 'three' } }");
    ck_assert_int_eq(n->n_labels, 3);
    ck_assert_str_eq(n->labels[0]->key, "stable");
    ck_assert(n->labels[0]->value == 42);
    ck_assert_str_eq(n->labels[1]->key, "canary");
    ck_assert(n->labels[1]->value == -1);
    ck_assert_ptr_null(n->labels[2]->key);   /* proto2: an unset string is NULL */
    ck_assert_int_eq(n->n_by_id, 1);
    ck_assert_int_eq(n->by_id[0]->key, 3);
    ck_assert_str_eq(n->by_id[0]->value->str, "three");
    free_msg(n);
}
END_TEST

START_TEST(field_errors)
{
    parse_err(SCALARS, "i32: 1\n  nope: 2", TFS_INVALID_ARGUMENT,
              "t.txt:2:3: unknown field 'nope' in tfs.test.Scalars");
    parse_err(NODE, "child { child { nmae: 'x' } }", TFS_INVALID_ARGUMENT,
              "t.txt:1:17: unknown field 'nmae' in tfs.test.Node");
    parse_err(SCALARS, "i32: 1 i32: 1", TFS_INVALID_ARGUMENT,
              "t.txt:1:8: non-repeated field 'i32' is specified multiple times");
    parse_err(NODE, "child {} child {}", TFS_INVALID_ARGUMENT,
              "t.txt:1:10: non-repeated field 'child' is specified multiple times");
    parse_err(SCALARS, "i32 1", TFS_INVALID_ARGUMENT,
              "t.txt:1:5: expected ':' after field 'i32', found '1'");
    parse_err(SCALARS, "str: ['a']", TFS_INVALID_ARGUMENT,
              "t.txt:1:6: expected a string for field 'str', found '['");
    parse_err(NODE, "child: 3", TFS_INVALID_ARGUMENT,
              "t.txt:1:8: expected '{' or '<' to open message field 'child', found '3'");
    parse_err(NODE, "child { name: 'a' >", TFS_INVALID_ARGUMENT,
              "t.txt:1:19: expected a field name, found '>'");
    parse_err(NODE, "}", TFS_INVALID_ARGUMENT, "t.txt:1:1: expected a field name, found '}'");
    parse_err(REPEATED, "i32: [1 2]", TFS_INVALID_ARGUMENT,
              "t.txt:1:9: expected ']' or ',' in the list, found '2'");
    parse_err(NODE, "[ext.foo]: 1", TFS_INVALID_ARGUMENT,
              "t.txt:1:1: extensions and Any expansions ('[...]') are not supported");
    parse_err(SCALARS, "i32: 1 @", TFS_INVALID_ARGUMENT, "t.txt:1:8: unexpected character '@'");
    parse_err(SCALARS, "i32: 1 \x01", TFS_INVALID_ARGUMENT, "t.txt:1:8: unexpected byte 0x01");
    /* Columns count bytes; a tab is one column. */
    parse_err(SCALARS, "\ti32:\tx", TFS_INVALID_ARGUMENT,
              "t.txt:1:7: expected an integer for field 'i32', found 'x'");
    /* proto2 required fields. */
    parse_err(&tfs__test__has_required__descriptor, "req { note: 'n' }", TFS_INVALID_ARGUMENT,
              "t.txt:1:17: message tfs.test.Required is missing required field 'id'");
    parse_err(&tfs__test__required__descriptor, "note: 'n'", TFS_INVALID_ARGUMENT,
              "t.txt:1:10: message tfs.test.Required is missing required field 'id'");
    Tfs__Test__HasRequired *h = parse_ok(&tfs__test__has_required__descriptor, "req < id: 1 >");
    ck_assert_int_eq(h->req->id, 1);
    free_msg(h);
}
END_TEST

START_TEST(truncated_input)
{
    parse_err(NODE, "child {\n  name: 'x'\n", TFS_INVALID_ARGUMENT,
              "t.txt:3:1: expected '}' before end of input (to close the '{' at 1:7)");
    parse_err(NODE, "child <", TFS_INVALID_ARGUMENT,
              "t.txt:1:8: expected '>' before end of input (to close the '<' at 1:7)");
    parse_err(SCALARS, "i32:", TFS_INVALID_ARGUMENT,
              "t.txt:1:5: expected an integer for field 'i32', found end of input");
    parse_err(SCALARS, "i32", TFS_INVALID_ARGUMENT,
              "t.txt:1:4: expected ':' after field 'i32', found end of input");
    parse_err(REPEATED, "i32: [1,", TFS_INVALID_ARGUMENT,
              "t.txt:1:9: expected an integer for field 'i32', found end of input");
    parse_err(SCALARS, "i32: -", TFS_INVALID_ARGUMENT,
              "t.txt:1:7: expected an integer for field 'i32', found end of input");
    /* Every prefix of a valid text either parses or fails cleanly (ASan checks the rest). */
    const char *text = "name: 'n' child { labels { key: \"k\\x41\" value: 0x7 } number: -1 }"
                       " children: [{}, <text: 'x'>] by_id { key: 1 value { flt: 1e3f } }";
    for (size_t n = 0; n <= strlen(text); n++) {
        ProtobufCMessage *m = NULL;
        tfs_status        st;
        enum tfs_code     code = tfs_textformat_parse(NODE, text, n, "p", &m, &st);
        ck_assert(code == TFS_OK || code == TFS_INVALID_ARGUMENT);
        ck_assert(code == TFS_OK ? m != NULL : (m == NULL && strncmp(st.msg, "p:1:", 4) == 0));
        free_msg(m);
    }
}
END_TEST

START_TEST(depth_limit)
{
    /* 100 nested messages are fine, 101 are refused at the 101st '{'. */
    char text[2000];
    for (int depth = 100; depth <= 101; depth++) {
        size_t len = 0;
        for (int i = 0; i < depth; i++)
            len += (size_t)sprintf(text + len, "child{");
        for (int i = 0; i < depth; i++)
            text[len++] = '}';
        text[len] = 0;
        if (depth == 100) {
            Tfs__Test__Node *n = parse_ok(NODE, text);
            int              d = 0;
            for (Tfs__Test__Node *c = n; c->child; c = c->child)
                d++;
            ck_assert_int_eq(d, 100);
            free_msg(n);
        } else {
            parse_err(NODE, text, TFS_INVALID_ARGUMENT,
                      "t.txt:1:606: messages nested deeper than 100 levels");
        }
    }
    /* Deep nesting through lists counts the same way. */
    char *deep = malloc(100000);
    size_t len = 0;
    for (int i = 0; i < 5000; i++)
        len += (size_t)sprintf(deep + len, "children: [{");
    deep[len] = 0;
    ProtobufCMessage *m;
    tfs_status        st;
    ck_assert_int_eq(tfs_textformat_parse(NODE, deep, len, "d", &m, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "d:1:1212: messages nested deeper than 100 levels");
    free(deep);
}
END_TEST

START_TEST(parse_file_errors)
{
    ProtobufCMessage *m = (ProtobufCMessage *)1;
    tfs_status        st;
    ck_assert_int_eq(tfs_textformat_parse_file(SCALARS, "/nonexistent/x.txt", &m, &st),
                     TFS_NOT_FOUND);
    ck_assert_ptr_null(m);
    ck_assert_str_eq(st.msg, "could not open '/nonexistent/x.txt': No such file or directory");
    ck_assert_int_eq(tfs_textformat_parse_file(SCALARS, "/tmp", &m, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "could not read '/tmp': not a regular file");
    char loop[] = "/tmp/tfs-textformat-loop-XXXXXX";   /* a config path that is a symlink loop */
    int  lfd = mkstemp(loop);
    ck_assert_int_ge(lfd, 0);
    close(lfd);
    ck_assert_int_eq(unlink(loop), 0);
    ck_assert_int_eq(symlink(loop, loop), 0);
    /* ELOOP: UNKNOWN, as TensorFlow's errno table has it */
    ck_assert_int_eq(tfs_textformat_parse_file(SCALARS, loop, &m, &st), TFS_UNKNOWN);
    char lwant[128];
    snprintf(lwant, sizeof lwant, "could not open '%s': Too many levels of symbolic links", loop);
    ck_assert_str_eq(st.msg, lwant);
    unlink(loop);
    if (geteuid() != 0) {   /* root reads anything: no permission error to see */
        char locked[] = "/tmp/tfs-textformat-locked-XXXXXX";
        int  kfd = mkstemp(locked);
        ck_assert_int_ge(kfd, 0);
        close(kfd);
        ck_assert_int_eq(chmod(locked, 0), 0);
        ck_assert_int_eq(tfs_textformat_parse_file(SCALARS, locked, &m, &st),
                         TFS_PERMISSION_DENIED);
        ck_assert_msg(strstr(st.msg, "Permission denied"), "%s", st.msg);
        unlink(locked);
    }

    char path[] = "/tmp/tfs-textformat-XXXXXX";
    int  fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    const char *text = "i32: 5\nstr: 'file'\nbogus: 1\n";
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    ck_assert_int_eq(tfs_textformat_parse_file(SCALARS, path, &m, &st), TFS_INVALID_ARGUMENT);
    char want[128];
    snprintf(want, sizeof want, "%s:3:1: unknown field 'bogus' in tfs.test.Scalars", path);
    ck_assert_str_eq(st.msg, want);
    ck_assert_int_eq(truncate(path, 19), 0);
    ck_assert_int_eq(tfs_textformat_parse_file(SCALARS, path, &m, &st), TFS_OK);
    ck_assert_int_eq(((Tfs__Test__Scalars *)m)->i32, 5);
    ck_assert_str_eq(((Tfs__Test__Scalars *)m)->str, "file");
    free_msg(m);
    unlink(path);
}
END_TEST

Suite *suite_proto_textformat(void);
Suite *suite_proto_textformat(void)
{
    Suite *s = suite_create("proto_textformat");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, empty_input_is_empty_message);
    tcase_add_test(tc, every_scalar_type);
    tcase_add_test(tc, integer_ranges);
    tcase_add_test(tc, floats_and_bools);
    tcase_add_test(tc, enums_by_name_and_number);
    tcase_add_test(tc, strings_and_escapes);
    tcase_add_test(tc, message_syntax_forms);
    tcase_add_test(tc, oneofs_and_maps);
    tcase_add_test(tc, field_errors);
    tcase_add_test(tc, truncated_input);
    tcase_add_test(tc, depth_limit);
    tcase_add_test(tc, parse_file_errors);
    suite_add_tcase(s, tc);
    return s;
}
