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
