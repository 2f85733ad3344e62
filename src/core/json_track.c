/* json_track.c: cJSON allocations that remember their failures (see
 * json_track.h). */
#include "core/json_track.h"
#include "core/alloc.h"
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdlib.h>

static _Thread_local int failed;   /* C11 thread storage: rank threads build their own documents */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void *tracked_malloc(size_t n) {
    void *p = zn_malloc(ZN_HOST_CORE, n);
    if (!p) failed = 1;
    return p;
}

/* cJSON frees what its own hook allocated, so plain free pairs with it */
static void install(void) {
    cJSON_Hooks h = {tracked_malloc, free};
    cJSON_InitHooks(&h);
}

void zn_json_track(void) {
    pthread_once(&once, install);
    failed = 0;
}

int zn_json_failed(void) { return failed; }

cJSON *zn_json_add(cJSON *parent, const char *name, cJSON *item) {
    int ok = name ? cJSON_AddItemToObject(parent, name, item) : cJSON_AddItemToArray(parent, item);
    if (ok) return item;
    cJSON_Delete(item);
    return NULL;
}

int zn_json_replace(cJSON *parent, const char *name, cJSON *item) {
    if (cJSON_ReplaceItemInObjectCaseSensitive(parent, name, item)) return 1;
    cJSON_Delete(item);
    return 0;
}

static pthread_mutex_t parse_mu = PTHREAD_MUTEX_INITIALIZER;

cJSON *zn_json_parse(const char *text, size_t len, const char **end, int require_null) {
    pthread_mutex_lock(&parse_mu);
    cJSON *doc = cJSON_ParseWithLengthOpts(text, len, end, require_null);
    pthread_mutex_unlock(&parse_mu);
    return doc;
}

char *zn_json_print(const cJSON *doc, int formatted) {
    pthread_mutex_lock(&parse_mu);
    char *text = formatted ? cJSON_Print(doc) : cJSON_PrintUnformatted(doc);
    pthread_mutex_unlock(&parse_mu);
    return text;
}

size_t zn_json_error_offset(const char *s, size_t len, size_t p, int *unterminated) {
    *unterminated = 0;
    if (p == 0 || p > len) return p > len ? len : p;
    char stack[64];   /* innermost containers; deeper ones do not matter */
    size_t depth = 0, str_start = 0;
    int in_str = 0, esc = 0;
    for (size_t i = 0; i < p - 1; i++) {
        char ch = s[i];
        if (in_str) {
            if (esc) esc = 0;
            else if (ch == '\\') esc = 1;
            else if (ch == '"') in_str = 0;
        } else if (ch == '"') { in_str = 1; str_start = i; }
        else if (ch == '{' || ch == '[') { if (depth < sizeof stack) stack[depth] = ch; depth++; }
        else if ((ch == '}' || ch == ']') && depth > 0) depth--;
    }
    char c = s[p - 1];
    if (!in_str && c == '"') { in_str = 1; str_start = p - 1; esc = 0; }
    else if (in_str) {
        /* p - 1 is inside a string: its end is searched for after it */
    } else {
        /* a key was expected at p - 1: inside an object, after '{' or ',' */
        size_t j = p - 1;
        while (j > 0 && (unsigned char)s[j - 1] <= 32) j--;
        int in_object = depth > 0 && depth <= sizeof stack && stack[depth - 1] == '{';
        /* '}' right after '{' is an empty object, not a failed key */
        int key_expected = j > 0 && (s[j - 1] == ',' || (s[j - 1] == '{' && c != '}'));
        if (in_object && key_expected && (unsigned char)c > 32) return p - 1;
        return p;
    }
    /* in a string: unterminated if no closing quote follows */
    for (size_t i = str_start + 1; i < len; i++) {
        if (s[i] == '\\') { i++; continue; }
        if (s[i] == '"') return p; /* it ends: the error is what cJSON says (a bad escape) */
    }
    *unterminated = 1;
    return str_start;
}
