/* json_track.h: did any cJSON allocation fail while a document was built?
 *
 * cJSON's builders (cJSON_CreateX, cJSON_AddXToObject, cJSON_Print...)
 * report an allocation failure only by a NULL the caller may drop, and a
 * dropped one silently leaves a member out (a manifest without its
 * "format" key, issue 12). Rather than checking each of dozens of calls,
 * zinc routes cJSON's allocations through a hook that records a failure in
 * a thread-local flag: a writer calls zn_json_track() before building and
 * zn_json_failed() before using the result. Every failure of a builder is
 * an allocation failure, so the flag catches them all (Z-CKPT-011). */
#ifndef ZN_JSON_TRACK_H
#define ZN_JSON_TRACK_H
#include <stddef.h>

void zn_json_track(void);   /* installs the hook (once) and clears this thread's flag */
int zn_json_failed(void);   /* 1 if a cJSON allocation failed on this thread since */

/* Attaching a built item: to object parent under name, or to array parent
 * (name NULL). When it cannot be attached (parent or item NULL after a
 * failed allocation, or the key's copy failed) the item is freed, so a
 * failed build leaks nothing. Returns item once attached, else NULL. */
struct cJSON;
struct cJSON *zn_json_add(struct cJSON *parent, const char *name, struct cJSON *item);
/* The same for replacing the value of key name in object parent. */
int zn_json_replace(struct cJSON *parent, const char *name, struct cJSON *item);

/* cJSON_ParseWithLengthOpts behind one lock: cJSON records where a parse
 * failed in a process-wide variable that every parse writes, so two ranks
 * (threads) parsing at once race on it. Same arguments and result. */
struct cJSON *zn_json_parse(const char *text, size_t len, const char **end, int require_null);
/* cJSON_Print (formatted 1) or cJSON_PrintUnformatted behind the same lock:
 * printing and parsing a number both call localeconv(), which rewrites one
 * static struct in libc on every call, so two ranks printing or parsing at
 * once race on it (DRD found it on a resume). Caller frees with cJSON_free. */
char *zn_json_print(const struct cJSON *doc, int formatted);

/* Where a JSON syntax error is, from where cJSON stopped (p, bytes into s of
 * len bytes). cJSON's return_parse_end is one byte late in two cases: a key
 * that does not start with '"' and a string that never ends (it points just
 * past where the string began). The text before p parsed, so a scan of it
 * (strings and brackets only; cJSON takes every byte <= 32 as whitespace,
 * so does the scan) tells which case it is. *unterminated: the error is a
 * string that never ends (the offset is then where it began). */
size_t zn_json_error_offset(const char *s, size_t len, size_t p, int *unterminated);

#endif
