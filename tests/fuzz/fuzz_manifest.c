/* fuzz_manifest.c: bytes -> zn_ckpt_manifest_check, what a checkpoint load
 * makes of manifest.json (and of a universal checkpoint's
 * optimizer_state.json) before it opens a shard (spec Z-FUZZ-005).
 *
 * A manifest carries its own FNV-1a checksum, so nearly every mutation
 * would stop at that check. The harness therefore checks a re-stamped copy
 * of an input that is a JSON object: its checksum recomputed the way
 * zn_ckpt_save writes it (over the compact text without the field), so the
 * fuzzer reaches every field behind the checksum. */
#include "fuzz.h"
#include "io/checkpoint.h"
#include <cjson/cJSON.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_quiet();
    return 0;
}

/* FNV-1a 64, the manifest's self checksum (checkpoint.c, Z-CKPT-001) */
static uint64_t fnv1a64(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* data as a manifest whose checksum matches, or NULL if it is not JSON */
static char *restamp(const uint8_t *data, size_t size) {
    cJSON *doc = cJSON_ParseWithLength((const char *)data, size);
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return NULL;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "manifest_fnv1a64");
    char *compact = cJSON_PrintUnformatted(doc), *out = NULL;
    if (compact) {
        char hex[32];
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)fnv1a64(compact));
        cJSON_AddStringToObject(doc, "manifest_fnv1a64", hex);
        out = cJSON_PrintUnformatted(doc);
    }
    cJSON_free(compact);
    cJSON_Delete(doc);
    return out;
}

/* One check per input (each allocates a 600 KB Manifest, the fuzzer's
 * bottleneck): an input naming the universal format is read as
 * optimizer_state.json; any other as manifest.json, re-stamped if it is a
 * JSON object, else as it is (reaching the syntax and checksum checks). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ZnErr err = {0};
    if (memmem(data, size, "zinc-universal", 14)) {
        fuzz_check_err(zn_ckpt_manifest_check((const char *)data, size, "optimizer_state.json", 1, &err), &err,
                       "universal optimizer_state");
        return 0;
    }
    char *fixed = restamp(data, size);
    if (fixed) {
        fuzz_check_err(zn_ckpt_manifest_check(fixed, strlen(fixed), "manifest.json", 0, &err), &err,
                       "re-stamped manifest");
        cJSON_free(fixed);
    } else {
        fuzz_check_err(zn_ckpt_manifest_check((const char *)data, size, "manifest.json", 0, &err), &err, "manifest");
    }
    return 0;
}
