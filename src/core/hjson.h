/* hjson.h: DeepSpeed reads its config with hjson (deepspeed/runtime/config.py,
 * `hjson.load(..., object_pairs_hook=dict_raise_error_on_duplicate_keys)`),
 * so a user's ds_config may hold what strict JSON refuses: `#`, `//` and
 * `/ * * /` comments, trailing commas, a newline in place of a comma,
 * quoteless keys, quoteless string values (to the end of the line),
 * 'single-quoted' and '''multi-line''' strings, and an object without its
 * root braces.
 *
 * zn_hjson_to_json rewrites such text into strict JSON for cJSON, with a
 * map from every output byte to the input byte it came from, so cJSON's
 * errors still point at the user's line and column. Strict JSON passes
 * through unchanged (byte for byte), so numbers keep cJSON's reading
 * (spec Z-CFG-014). */
#ifndef ZN_HJSON_H
#define ZN_HJSON_H
#include <stddef.h>

typedef struct {
    char *json;        /* NUL-terminated strict JSON (owned) */
    size_t len;        /* bytes before the NUL */
    size_t *from;      /* [len + 1] input offset of each output byte; from[len] = input length */
    size_t err_at;     /* on failure: input offset of the problem */
    const char *why;   /* on failure: what is wrong (static text) */
} ZnHjson;

/* 0 on success; -1 on a syntax error (err_at, why); -2 out of memory.
 * Free with zn_hjson_free in every case. */
int zn_hjson_to_json(const char *in, size_t n, ZnHjson *out);
void zn_hjson_free(ZnHjson *h);

#endif
