/* cvd.c — CUDA_VISIBLE_DEVICES with the CUDA driver's rules:
 *   - a comma-separated list of GPU indices (NVML / nvidia-smi numbering) or UUIDs
 *     ("GPU-8f3e..."; a prefix that names exactly one GPU is enough), MIG instances
 *     ("MIG-...") as given;
 *   - the GPUs listed are visible, renumbered 0, 1, ... in the order listed;
 *   - the list ends at the first entry that names no GPU of this machine (an index out of
 *     range or repeated, text that is neither a number nor a UUID, a UUID nobody has):
 *     only the entries before it count, so "0,7,1" on a 2-GPU machine shows GPU 0 only
 *     and "" or "-1" shows none. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "env.h"

static void trim(char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    size_t k = 0;
    while (s[k] && isspace((unsigned char)s[k])) k++;
    if (k) memmove(s, s + k, n - k + 1);
}

static void list_gpus(int physical, char *buf, size_t n) {
    if (physical <= 0) {
        snprintf(buf, n, "no GPU");
        return;
    }
    size_t used = (size_t)snprintf(buf, n, "%d GPU%s: ", physical, physical == 1 ? "" : "s");
    for (int i = 0; i < physical && used < n; i++) used += (size_t)snprintf(buf + used, n - used, "%s%d", i ? ", " : "", i);
}

void kc__cvd_parse(const char *text, int physical, const char (*uuids)[96], kc__cvd *out) {
    memset(out, 0, sizeof *out);
    out->bad = -1;
    if (!text) return;
    out->set = true;
    snprintf(out->text, sizeof out->text, "%s", text);
    char all[256];
    snprintf(all, sizeof all, "%s", text);
    trim(all);
    if (!all[0] || !strcmp(all, "-1") || !strcasecmp(all, "none") || !strcasecmp(all, "NoDevFiles")) {
        out->hides_on_purpose = true;
        out->n_tokens = all[0] ? 1 : 0;
        return;
    }
    char mach[128];
    list_gpus(physical, mach, sizeof mach);
    char *save = NULL;
    for (char *tok = strtok_r(all, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        trim(tok);
        int t = out->n_tokens++;
        if (out->bad >= 0) continue; /* counted, ignored */
        int gpu = -2;                /* -2: bad; -1: valid but unknown (MIG, no NVML) */
        const char *why = NULL;
        char whybuf[256];
        if (tok[0] && (isdigit((unsigned char)tok[0]) || (tok[0] == '-' && isdigit((unsigned char)tok[1])))) {
            char *end = NULL;
            long v = strtol(tok, &end, 10);
            if (*end != '\0') {
                why = "is not a GPU index or UUID";
            } else if (v < 0) {
                why = "is negative: it ends the list";
            } else if (physical >= 0 && v >= physical) {
                snprintf(whybuf, sizeof whybuf, "names GPU %ld, which does not exist (this machine has %s)", v, mach);
                why = whybuf;
            } else if (v >= KC_ENV_MAX_GPUS) {
                snprintf(whybuf, sizeof whybuf, "names GPU %ld, beyond the %d GPUs kerac can list", v, KC_ENV_MAX_GPUS);
                why = whybuf;
            } else {
                gpu = (int)v; /* with physical unknown, taken as it is */
            }
        } else if (!strncasecmp(tok, "GPU-", 4)) {
            if (!uuids || physical < 0) {
                gpu = -1; /* cannot check without NVML */
            } else {
                int match = -1, matches = 0;
                for (int i = 0; i < physical; i++)
                    if (!strncasecmp(uuids[i], tok, strlen(tok))) {
                        match = i;
                        matches++;
                    }
                if (matches == 1) gpu = match;
                else if (matches == 0) {
                    snprintf(whybuf, sizeof whybuf, "names %s, which no GPU of this machine has (%s)", tok, mach);
                    why = whybuf;
                } else {
                    snprintf(whybuf, sizeof whybuf, "the UUID prefix %s matches %d GPUs", tok, matches);
                    why = whybuf;
                }
            }
        } else if (!strncasecmp(tok, "MIG-", 4)) {
            gpu = -1; /* a MIG instance: accepted as given */
        } else {
            why = tok[0] ? "is not a GPU index or UUID" : "is empty";
        }
        if (gpu >= 0)
            for (int i = 0; i < out->n_visible; i++)
                if (out->visible[i] == gpu) {
                    snprintf(whybuf, sizeof whybuf, "repeats GPU %d", gpu);
                    why = whybuf;
                    gpu = -2;
                }
        if (why || gpu == -2) {
            out->bad = t;
            snprintf(out->bad_text, sizeof out->bad_text, "%s", tok);
            snprintf(out->bad_why, sizeof out->bad_why, "%s", why ? why : "is not valid");
            continue;
        }
        if (out->n_visible < KC_ENV_MAX_GPUS) out->visible[out->n_visible++] = gpu;
    }
}
