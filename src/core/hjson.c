/* hjson.c: hjson text to strict JSON, with an offset map (see hjson.h).
 * A recursive descent over the hjson grammar that copies what is already
 * JSON and rewrites the rest: comments dropped, commas supplied or dropped,
 * quoteless and single-quoted strings quoted. It decides structure only;
 * cJSON still judges every string escape and number. */
#include "core/hjson.h"
#include "core/alloc.h"
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 1000   /* cJSON's CJSON_NESTING_LIMIT: deeper is an error, never a stack overflow */

typedef struct {
    const char *s;
    size_t n, i;          /* input and position */
    char *o;
    size_t *m, len, cap;  /* output, its map, length, capacity */
    int depth;
    int failed;           /* the first failure is the one reported */
    size_t swallowed;     /* 1 + where the last quoteless value that took a '}' or ']' began */
    size_t err_at;
    const char *why;
    int oom;
} P;

static int fail(P *p, size_t at, const char *why) {
    if (!p->failed && !p->oom) { p->failed = 1; p->err_at = at; p->why = why; }
    return -1;
}

static int put(P *p, char c, size_t at) {
    if (p->len + 1 >= p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 256;
        char *o = zn_realloc(ZN_HOST_CORE, p->o, cap);
        if (o) p->o = o;
        size_t *m = o ? zn_realloc(ZN_HOST_CORE, p->m, cap * sizeof *m) : NULL;
        if (!o || !m) { p->oom = 1; return -1; }
        p->m = m;
        p->cap = cap;
    }
    p->o[p->len] = c;
    p->m[p->len++] = at;
    return 0;
}

/* c as it must appear inside a JSON string */
static int put_escaped(P *p, unsigned char c, size_t at) {
    static const char hex[] = "0123456789abcdef";
    if (c == '"' || c == '\\') return put(p, '\\', at) || put(p, (char)c, at);
    if (c == '\n') return put(p, '\\', at) || put(p, 'n', at);
    if (c == '\t') return put(p, '\\', at) || put(p, 't', at);
    if (c == '\r') return put(p, '\\', at) || put(p, 'r', at);
    if (c < 0x20)
        return put(p, '\\', at) || put(p, 'u', at) || put(p, '0', at) || put(p, '0', at) || put(p, hex[c >> 4], at) ||
               put(p, hex[c & 15], at);
    return put(p, (char)c, at);
}

static int at_end(const P *p) { return p->i >= p->n; }
static char cur(const P *p) { return p->i < p->n ? p->s[p->i] : 0; }
static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int comment_at(const P *p, size_t i) {
    return i < p->n && (p->s[i] == '#' || (p->s[i] == '/' && i + 1 < p->n && (p->s[i + 1] == '/' || p->s[i + 1] == '*')));
}

/* Copies whitespace, drops comments; *nl = 1 when a line ended on the way
 * (a newline may stand for a comma). */
static int skip(P *p, int *nl) {
    for (;;) {
        char c = cur(p);
        if (is_ws(c)) {
            if (c == '\n' && nl) *nl = 1;
            if (put(p, c, p->i)) return -1;
            p->i++;
        } else if (c == '#' || (c == '/' && p->i + 1 < p->n && p->s[p->i + 1] == '/')) {
            while (!at_end(p) && cur(p) != '\n') p->i++;
        } else if (c == '/' && p->i + 1 < p->n && p->s[p->i + 1] == '*') {
            size_t start = p->i;
            p->i += 2;
            while (p->i + 1 < p->n && !(p->s[p->i] == '*' && p->s[p->i + 1] == '/')) {
                if (p->s[p->i] == '\n' && nl) *nl = 1;
                p->i++;
            }
            if (p->i + 1 >= p->n) return fail(p, start, "unterminated /* comment");
            p->i += 2;
        } else {
            return 0;
        }
    }
}

/* "..." copied as it is (cJSON checks the escapes) */
static int dq_string(P *p) {
    size_t start = p->i;
    if (put(p, '"', p->i++)) return -1;
    while (!at_end(p) && cur(p) != '"') {
        if (cur(p) == '\\' && p->i + 1 < p->n && put(p, p->s[p->i], p->i)) return -1;
        if (cur(p) == '\\' && p->i + 1 < p->n) p->i++;
        if (put(p, p->s[p->i], p->i)) return -1;
        p->i++;
    }
    if (at_end(p)) return fail(p, start, "unterminated string");
    return put(p, '"', p->i++);
}

/* '...' as "...": \' becomes ', a bare " is escaped, other escapes stay */
static int sq_string(P *p) {
    size_t start = p->i;
    if (put(p, '"', p->i++)) return -1;
    while (!at_end(p) && cur(p) != '\'') {
        char c = cur(p);
        if (c == '\\' && p->i + 1 < p->n) {
            if (p->s[p->i + 1] == '\'') {
                if (put(p, '\'', p->i)) return -1;
            } else if (put(p, '\\', p->i) || put(p, p->s[p->i + 1], p->i + 1)) {
                return -1;
            }
            p->i += 2;
            continue;
        }
        if ((c == '"' && put(p, '\\', p->i)) || put(p, c, p->i)) return -1;
        p->i++;
    }
    if (at_end(p)) return fail(p, start, "unterminated string");
    return put(p, '"', p->i++);
}

/* '''...''': hjson's multi-line string. Whitespace up to the opening
 * quotes' column is removed from each line; the first line break after the
 * opening quotes and the last before the closing ones are not content. */
static int ml_string(P *p) {
    size_t start = p->i, bol = start;
    while (bol > 0 && p->s[bol - 1] != '\n') bol--;
    size_t indent = start - bol;
    p->i += 3;
    while (!at_end(p) && (cur(p) == ' ' || cur(p) == '\t')) p->i++;
    if (cur(p) == '\r') p->i++;
    if (cur(p) == '\n') p->i++;
    if (put(p, '"', start)) return -1;
    size_t col = 0;
    for (;;) {
        if (p->i + 2 >= p->n) return fail(p, start, "unterminated ''' string");
        if (p->s[p->i] == '\'' && p->s[p->i + 1] == '\'' && p->s[p->i + 2] == '\'') break;
        char c = p->s[p->i];
        if (c == '\n') col = 0;
        else if (col < indent && (c == ' ' || c == '\t')) { col++; p->i++; continue; }
        else col = indent;
        /* the line break before the closing quotes is not content, when
           nothing but the indent stands between them (hjson-py removes a
           final line break only: deeper blanks keep it, and are content) */
        size_t j = p->i + 1;
        while (c == '\n' && j < p->n && (p->s[j] == ' ' || p->s[j] == '\t')) j++;
        if (!(c == '\n' && j - (p->i + 1) <= indent && j + 2 < p->n && p->s[j] == '\'' && p->s[j + 1] == '\'' &&
              p->s[j + 2] == '\'') &&
            c != '\r' && put_escaped(p, (unsigned char)c, p->i))
            return -1;
        p->i++;
    }
    if (put(p, '"', p->i)) return -1;
    p->i += 3;
    return 0;
}

/* a JSON number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static int is_number(const char *s, size_t n) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i >= n || s[i] < '0' || s[i] > '9') return 0;
    if (s[i] == '0') i++;
    else while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i < n && s[i] == '.') {
        if (++i >= n || s[i] < '0' || s[i] > '9') return 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || s[i] < '0' || s[i] > '9') return 0;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    return i == n;
}

/* A number, true, false or null when nothing but a separator, a comment or
 * the end of the line follows it; otherwise a quoteless string: the rest
 * of the line, trailing whitespace trimmed. */
static int literal(P *p) {
    size_t start = p->i, t = start;
    char c = cur(p);
    if (c == ',' || c == ':' || c == ']' || c == '}') return fail(p, start, NULL);
    while (t < p->n && !is_ws(p->s[t]) && p->s[t] != ',' && p->s[t] != ']' && p->s[t] != '}' && !comment_at(p, t)) t++;
    const char *tok = p->s + start;
    size_t k = t - start;
    int word = (k == 4 && !memcmp(tok, "true", 4)) || (k == 5 && !memcmp(tok, "false", 5)) ||
               (k == 4 && !memcmp(tok, "null", 4)) || is_number(tok, k);
    size_t r = t;
    while (r < p->n && (p->s[r] == ' ' || p->s[r] == '\t')) r++;
    if (word && (r >= p->n || p->s[r] == '\n' || p->s[r] == '\r' || p->s[r] == ',' || p->s[r] == ']' ||
                 p->s[r] == '}' || comment_at(p, r))) {
        for (; p->i < t; p->i++)
            if (put(p, p->s[p->i], p->i)) return -1;
        return 0;
    }
    size_t e = start;
    while (e < p->n && p->s[e] != '\n' && p->s[e] != '\r') e++;
    while (e > start && (p->s[e - 1] == ' ' || p->s[e - 1] == '\t')) e--;
    if (memchr(p->s + start, '}', e - start) || memchr(p->s + start, ']', e - start)) p->swallowed = start + 1;
    if (put(p, '"', start)) return -1;
    for (; p->i < e; p->i++)
        if (put_escaped(p, (unsigned char)p->s[p->i], p->i)) return -1;
    return put(p, '"', e - 1);
}

static int value(P *p);

/* a key: quoted, or quoteless up to the ':' (no whitespace or punctuation) */
static int key(P *p) {
    char c = cur(p);
    if (c == '"') return dq_string(p);
    if (c == '\'') return sq_string(p);
    size_t start = p->i;
    while (!at_end(p) && !is_ws(cur(p)) && !strchr(",:[]{}", cur(p))) p->i++;
    if (p->i == start) return fail(p, start, NULL);
    if (put(p, '"', start)) return -1;
    for (size_t i = start; i < p->i; i++)
        if (put_escaped(p, (unsigned char)p->s[i], i)) return -1;
    return put(p, '"', p->i - 1);
}

/* The members or elements of an object or array, after its opening
 * bracket; close is '}' or ']', or 0 for the root object without braces
 * (it ends at the end of the input). */
static int members(P *p, char close) {
    int first = 1;
    for (;;) {
        int nl = 0;
        if (skip(p, &nl)) return -1;
        if (at_end(p)) {
            if (!close) return put(p, '}', p->n);
            if (p->swallowed)   /* the likeliest cause: say it where it happened */
                return fail(p, p->swallowed - 1, "this value is not JSON, so hjson reads it as a string to the end "
                                                 "of the line, closing bracket included (quote it, or fix it)");
            return fail(p, p->n, NULL);
        }
        /* close 0 (a braceless root) ends only at the end: a NUL byte is no bracket */
        if (close && cur(p) == close) return put(p, close, p->i++);
        if (!first) {
            /* after a value: a comma (dropped when a closing bracket
               follows), or a newline standing for one */
            if (cur(p) == ',') {
                size_t comma = p->len;   /* where it lands in the output */
                if (put(p, ',', p->i++) || skip(p, NULL)) return -1;
                if (at_end(p) && close) return fail(p, p->n, NULL);
                if ((close && cur(p) == close) || (at_end(p) && !close)) {
                    p->o[comma] = ' ';   /* a trailing comma: blanked, so the offsets stay */
                    continue;
                }
            } else if (nl) {
                if (put(p, ',', p->i)) return -1;
            } else {
                return fail(p, p->i, NULL);
            }
        }
        first = 0;
        if (close != ']') {
            if (key(p) || skip(p, NULL)) return -1;
            if (cur(p) != ':') return fail(p, p->i, NULL);
            if (put(p, ':', p->i++) || skip(p, NULL)) return -1;
            if (at_end(p)) return fail(p, p->n, NULL);
        }
        if (value(p)) return -1;
    }
}

static int value(P *p) {
    char c = cur(p);
    if (c == '{' || c == '[') {
        if (++p->depth > MAX_DEPTH) return fail(p, p->i, "nested deeper than 1000 levels");
        if (put(p, c, p->i++)) return -1;
        int rc = members(p, c == '{' ? '}' : ']');
        p->depth--;
        return rc;
    }
    if (c == '"') return dq_string(p);
    if (c == '\'' && p->i + 2 < p->n && p->s[p->i + 1] == '\'' && p->s[p->i + 2] == '\'') return ml_string(p);
    if (c == '\'') return sq_string(p);
    return literal(p);
}

/* Does a key followed by ':' start here? (the root without braces) */
static int key_follows(const P *p) {
    size_t i = p->i;
    if (i < p->n && (p->s[i] == '"' || p->s[i] == '\'')) {
        char q = p->s[i++];
        while (i < p->n && p->s[i] != q) i += p->s[i] == '\\' ? 2 : 1;
        i++;
    } else {
        while (i < p->n && !is_ws(p->s[i]) && !strchr(",:[]{}", p->s[i])) i++;
    }
    while (i < p->n && (p->s[i] == ' ' || p->s[i] == '\t')) i++;
    return i < p->n && p->s[i] == ':';
}

int zn_hjson_to_json(const char *in, size_t n, ZnHjson *out) {
    memset(out, 0, sizeof *out);
    P p = {.s = in, .n = n};
    int rc = skip(&p, NULL);
    if (!rc && !at_end(&p)) {
        char c = cur(&p);
        if (c != '{' && c != '[' && key_follows(&p)) {   /* root braces omitted */
            rc = put(&p, '{', p.i) || members(&p, 0);
        } else {
            rc = value(&p);
            if (!rc) rc = skip(&p, NULL);
            if (!rc && !at_end(&p)) rc = fail(&p, p.i, NULL);
        }
    }
    if (!rc) rc = put(&p, 0, n);
    out->json = p.o;
    out->from = p.m;
    if (p.oom) return -2;
    if (rc) {
        out->err_at = p.err_at;
        out->why = p.why;
        return -1;
    }
    out->len = p.len - 1;
    out->from[out->len] = n;
    return 0;
}

void zn_hjson_free(ZnHjson *h) {
    free(h->json);
    free(h->from);
    memset(h, 0, sizeof *h);
}
