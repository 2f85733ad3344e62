/* xml_check.h: a small XML well-formedness checker for the SVG tests
 * (test_plot.c, test_plan_svg.c): balanced tags, quoted attributes, valid
 * entities and character references, valid UTF-8, one root. Tests also ask
 * Python's xml.dom.minidom when python3 exists (have_python); assert_well_formed
 * does both. Include it after testutil.h. */
#ifndef ZN_TEST_XML_CHECK_H
#define ZN_TEST_XML_CHECK_H
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static int is_name_start(int c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == ':'; }
static int is_name_char(int c) { return is_name_start(c) || (c >= '0' && c <= '9') || c == '-' || c == '.'; }
static int is_ws(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* A reference at p ('&'): one of the five predefined entities or a numeric
   character reference. Returns its length, 0 if invalid. */
static size_t entity_len(const char *p) {
    static const char *ents[] = {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"};
    for (int i = 0; i < 5; i++) if (!strncmp(p, ents[i], strlen(ents[i]))) return strlen(ents[i]);
    size_t i = 1;
    if (p[i] != '#') return 0;
    i++;
    int hex = p[i] == 'x';
    if (hex) i++;
    size_t d0 = i;
    while (hex ? isxdigit((unsigned char)p[i]) : isdigit((unsigned char)p[i])) i++;
    return i > d0 && p[i] == ';' ? i + 1 : 0;
}

/* Valid UTF-8 with no character XML 1.0 forbids (C0 controls other than tab,
   LF, CR; surrogates; U+FFFE/FFFF). */
static const char *utf8_check(const unsigned char *s) {
    while (*s) {
        unsigned c = *s;
        int len = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (!len) return "invalid UTF-8 lead byte";
        unsigned long cp = len == 1 ? c : c & (0x3Fu >> (len - 1));
        for (int i = 1; i < len; i++) {
            if ((s[i] & 0xC0) != 0x80) return "truncated UTF-8 sequence";
            cp = (cp << 6) | (s[i] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return "overlong UTF-8";
        if (cp >= 0xD800 && cp <= 0xDFFF) return "UTF-8 surrogate";
        if ((cp < 0x20 && cp != 9 && cp != 10 && cp != 13) || cp == 0xFFFE || cp == 0xFFFF)
            return "character not allowed in XML";
        s += len;
    }
    return NULL;
}

/* NULL if doc is well-formed XML (the subset an SVG writer emits: a
   declaration, comments, elements, attributes, text, references), else why. */
static const char *xml_check(const char *doc) {
    const char *why = utf8_check((const unsigned char *)doc);
    if (why) return why;
    const char *p = doc;
    if (!strncmp(p, "<?xml", 5)) {
        p = strstr(p, "?>");
        if (!p) return "unterminated XML declaration";
        p += 2;
    }
    enum { MAXD = 64, MAXN = 64 };
    char stack[MAXD][MAXN];
    int depth = 0, roots = 0;
    while (*p) {
        if (!strncmp(p, "<!--", 4)) {
            const char *e = strstr(p + 4, "-->");
            if (!e) return "unterminated comment";
            p = e + 3;
        } else if (p[0] == '<' && p[1] == '/') {
            p += 2;
            const char *n0 = p;
            while (is_name_char((unsigned char)*p)) p++;
            if (depth == 0) return "end tag without a start tag";
            if ((size_t)(p - n0) != strlen(stack[depth - 1]) || strncmp(n0, stack[depth - 1], (size_t)(p - n0)))
                return "mismatched end tag";
            depth--;
            while (is_ws((unsigned char)*p)) p++;
            if (*p++ != '>') return "bad end tag";
        } else if (*p == '<') {
            p++;
            if (!is_name_start((unsigned char)*p)) return "bad element name";
            const char *n0 = p;
            while (is_name_char((unsigned char)*p)) p++;
            size_t nl = (size_t)(p - n0);
            if (nl >= MAXN) return "element name too long for the checker";
            if (depth == 0 && ++roots > 1) return "more than one root element";
            char attrs[32][MAXN];
            int na = 0;
            for (;;) {
                int ws = 0;
                while (is_ws((unsigned char)*p)) p++, ws = 1;
                if (p[0] == '/' && p[1] == '>') { p += 2; break; }
                if (*p == '>') {
                    if (depth == MAXD) return "nesting too deep for the checker";
                    memcpy(stack[depth], n0, nl);
                    stack[depth++][nl] = 0;
                    p++;
                    break;
                }
                if (!ws) return "attributes must be separated by white space";
                if (!is_name_start((unsigned char)*p)) return "bad attribute name";
                const char *a0 = p;
                while (is_name_char((unsigned char)*p)) p++;
                size_t al = (size_t)(p - a0);
                if (al >= MAXN || na == 32) return "attribute too long for the checker";
                for (int i = 0; i < na; i++)
                    if (strlen(attrs[i]) == al && !strncmp(attrs[i], a0, al)) return "duplicate attribute";
                memcpy(attrs[na], a0, al);
                attrs[na++][al] = 0;
                while (is_ws((unsigned char)*p)) p++;
                if (*p++ != '=') return "attribute without '='";
                while (is_ws((unsigned char)*p)) p++;
                char q = *p++;
                if (q != '"' && q != '\'') return "unquoted attribute value";
                while (*p && *p != q) {
                    if (*p == '<') return "'<' in an attribute value";
                    if (*p == '&') {
                        size_t el = entity_len(p);
                        if (!el) return "bad reference in an attribute value";
                        p += el;
                    } else {
                        p++;
                    }
                }
                if (*p++ != q) return "unterminated attribute value";
            }
        } else {
            if (depth == 0 && !is_ws((unsigned char)*p)) return "text outside the root element";
            if (*p == '&') {
                size_t el = entity_len(p);
                if (!el) return "bad reference in text";
                p += el;
            } else if (!strncmp(p, "]]>", 3)) {
                return "']]>' in text";
            } else {
                p++;
            }
        }
    }
    if (depth) return "unclosed element";
    if (roots != 1) return "no root element";
    return NULL;
}

static int have_python(void) {
    return system("command -v python3 >/dev/null 2>&1") == 0;
}

/* Both checks on a document (written to the test's temporary directory for
 * the python one, which runs only when python3 exists). */
static void assert_well_formed(const char *svg) {
    const char *why = xml_check(svg);
    if (why) fail_msg("not well-formed: %s", why);
    if (!have_python()) return;
    const char *path = zt_path("wf.svg");
    zt_write_text(path, svg);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])\" %s", path);
    if (system(cmd) != 0) fail_msg("xml.dom.minidom rejects %s", path);
}

#endif
