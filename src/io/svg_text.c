/* svg_text.c: text in zinc's SVG files (svg_text.h). */
#include "io/svg_text.h"
#include <string.h>

/* Decodes one UTF-8 code point at s (n bytes left); returns it and sets *adv,
 * or returns -1 with *adv = 1 for a byte that does not start a valid,
 * shortest-form sequence (file names are bytes, not necessarily UTF-8). */
static long utf8_next(const unsigned char *s, size_t n, size_t *adv) {
    *adv = 1;
    unsigned c = s[0];
    if (c < 0x80) return c;
    int len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (!len || (size_t)len > n) return -1;
    long cp = c & (0x3F >> (len - 1));
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return -1;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    /* overlong forms, UTF-16 surrogates and values past U+10FFFF are invalid */
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return -1;
    *adv = (size_t)len;
    return cp;
}

/* Number of code points of s, as the layout counts them. */
long zn_svg_cp_count(const char *s) {
    long k = 0;
    size_t n = strlen(s), adv;
    for (size_t i = 0; i < n; i += adv, k++) utf8_next((const unsigned char *)s + i, n - i, &adv);
    return k;
}

/* Writes s as XML character data, good in text and in "..." attributes
 * (Z-PLOT-015, Z-PSVG-012): & < > " ' as entities; tab, newline and CR as character
 * references (a parser would turn them into spaces in an attribute); other
 * control characters, U+FFFE/U+FFFF and invalid UTF-8 bytes, which XML 1.0
 * cannot hold at all, as U+FFFD. At most max_cp code points, then "…". */
void zn_svg_put_esc(FILE *f, const char *s, long max_cp) {
    size_t n = strlen(s), adv;
    long k = 0;
    for (size_t i = 0; i < n; i += adv, k++) {
        if (k == max_cp) {
            fputs("\xE2\x80\xA6", f);
            return;
        }
        long cp = utf8_next((const unsigned char *)s + i, n - i, &adv);
        switch (cp) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        case '\t': case '\n': case '\r': fprintf(f, "&#%ld;", cp); break;
        default:
            if (cp < 0 || cp < 0x20 || cp == 0xFFFE || cp == 0xFFFF) fputs("\xEF\xBF\xBD", f);
            else fwrite(s + i, 1, adv, f);
        }
    }
}
