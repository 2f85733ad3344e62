/* svg_text.h: text in zinc's SVG files, shared by the loss chart (plot.c)
 * and the dry run's picture (plan_svg.c): escaping for XML and counting code
 * points for the layout. Names and titles are bytes from the user, not
 * necessarily UTF-8. */
#ifndef ZN_SVG_TEXT_H
#define ZN_SVG_TEXT_H
#include <stdio.h>

/* Code points of s as the layout counts them (an invalid byte counts one). */
long zn_svg_cp_count(const char *s);
/* Writes s as XML character data, good in text and in "..." attributes:
 * & < > " ' as entities; tab, newline and CR as character references; other
 * control characters, U+FFFE/U+FFFF and invalid UTF-8 as U+FFFD. At most
 * max_cp code points (< 0: no limit), then "…". */
void zn_svg_put_esc(FILE *f, const char *s, long max_cp);

#endif
